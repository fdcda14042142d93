import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { loadConfig } from '../../../src/settings/config.js';
import { routeCost } from '../../../src/edge/route-cost.js';
import { wholeCost } from '../../../src/throttle/cost.js';
import { overLimitAnswer, overLimitDetail } from '../../../src/edge/throttle-answers.js';
import { unaffordable } from '../../../src/throttle/consume.js';
import { LocalLogs } from '../../../src/throttle/local-logs.js';
import { parseRate } from '../../../src/throttle/rate.js';
import { Refusals } from '../../../src/throttle/refusals.js';
import { buildScopes, type ScopeRule } from '../../../src/throttle/scopes.js';
import type { Check, Decision } from '../../../src/throttle/throttler.js';

// docs/throttling.md "Cost: requests that weigh more": THROTTLE_COSTS, a route's cost and the start it stops, the
// over-limit answer, and what the process itself decides by cost (remembered refusals, the local share).

const rule = (rate: string, scope = 'anon'): ScopeRule => ({ scope, rate: parseRate(rate), keyedBy: 'ip' });

const Settings = suite("THROTTLE_COSTS and a route's cost");

function refusalOf(env: Record<string, string>): string | undefined {
  try {
    loadConfig(env);
  } catch (error) {
    return (error as Error).message;
  }
  return undefined;
}

Settings('given scope=N pairs, when loaded, then each scope gets its cost as a number', () => {
  assert.equal(loadConfig({}).THROTTLE_COSTS, {});
  assert.equal(loadConfig({ THROTTLE_COSTS: ' reports=5, exports=2 ,' }).THROTTLE_COSTS, { reports: 5, exports: 2 });
});

Settings('given a bad value, when loaded, then the start stops with one line naming it', () => {
  for (const [value, says] of [
    ['reports', 'expected scope=N pairs'],
    ['reports=0', 'expected a whole number of units from 1 to 100000'],
    ['reports=2.5', 'expected a whole number of units'],
    ['anon=2', 'the anon scope counts every route'],
    ['login=2', 'the login scope counts usernames'],
  ] as const) {
    const message = refusalOf({ THROTTLE_COSTS: value });
    assert.ok(message?.includes('THROTTLE_COSTS') && message.includes(says), `${value}: ${message}`);
    assert.not.match(message ?? '', /\n/, `${value}: one line`);
  }
});

Settings("a fixed cost above its scope's limit stops the start naming the route, the scope and the settings", () => {
  const config = loadConfig({ THROTTLE_COSTS: 'reports=11' });
  const rules = buildScopes({ anon: '20/min', user: '100/min', reports: '10/hour' });
  const cost = routeCost({ config }, rules, 'reports', undefined);
  assert.is(cost?.units, 11);
  assert.throws(
    () => cost?.check('POST /api/reports/'),
    (error: Error) =>
      error.message ===
      "POST /api/reports/ costs 11 units (THROTTLE_COSTS=reports=11), more than the reports scope's limit of 10 " +
        '(THROTTLE_REPORTS=10/hour): no request of it would ever be admitted',
  );
  const general = routeCost({ config: loadConfig({}) }, rules, undefined, 30);
  assert.throws(() => general?.check('GET /api/exports/'), /more than the anon scope's limit of 20 \(THROTTLE_ANON/);
  routeCost({ config: loadConfig({}) }, rules, undefined, 20)?.check('GET /api/exports/');
});

Settings("a cost applies to its route's own scope, not to anon counting a request without a user", () => {
  const rules = buildScopes({ anon: '20/min', user: '100/min', reports: '10/hour' });
  const cost = routeCost({ config: loadConfig({}) }, rules, 'reports', 4);
  const req = {} as never;
  assert.equal([cost?.of(req, rules.get('reports')!), cost?.of(req, rules.get('anon')!)], [4, undefined]);
  assert.is(routeCost({ config: loadConfig({}) }, rules, 'reports', 1), undefined, 'a cost of 1 is no cost');
  const computed = routeCost({ config: loadConfig({}) }, rules, undefined, () => Number.NaN);
  assert.equal([computed?.units, computed?.of(req, rules.get('user')!)], ['per request', 1]);
  assert.equal(
    [wholeCost(2.1), wholeCost(0), wholeCost(-3), wholeCost(Number.NaN), wholeCost(1e300)],
    [3, 1, 1, 1, 2 ** 31],
  );
});

Settings.run();

const Over = suite('a request that costs more than its limit');

Over('is refused in process with no wait, its other checks not asked', () => {
  const checks: Check[] = [
    { rule: rule('10/min'), ident: 'ip:192.0.2.1', cost: 12 },
    { rule: rule('100/min', 'exports'), ident: 'ip:192.0.2.1', cost: 12 },
  ];
  const decisions = unaffordable(checks) as Decision[];
  assert.equal(
    decisions.map(({ allowed, overLimit, retryAfterS, local }) => [allowed, overLimit, retryAfterS, local]),
    [
      [false, 12, 0, true],
      [true, undefined, 0, true],
    ],
  );
  assert.is(unaffordable([{ rule: rule('10/min'), ident: 'ip:192.0.2.1', cost: 10 }]), undefined, 'the limit fits');
  const answer = overLimitAnswer(decisions);
  assert.equal(JSON.parse(answer.body.toString()), { detail: 'Request costs 12 units; the limit is 10 per minute.' });
  assert.equal(answer.fields, [
    'RateLimit-Policy',
    '"anon";q=10;w=60, "exports";q=100;w=60',
    'Content-Type',
    'application/json; charset=utf-8',
  ]);
  assert.is(overLimitDetail(2, parseRate('300/5m')), 'Request costs 2 units; the limit is 300 per 5 minutes.');
});

Over.run();

const Memory = suite('what the process decides by cost');

Memory('a refusal remembered for a cost refuses that cost and more, not less', () => {
  const refusals = new Refusals();
  const r = rule('10/min');
  const ident = 'ip:192.0.2.2';
  const at = (cost: number): Check[] => [{ rule: r, ident, cost }];
  const refused: Decision = {
    scope: 'anon',
    allowed: false,
    limit: 10,
    windowMs: 60_000,
    remaining: 3,
    resetMs: 5_000,
    retryAfterS: 5,
  };
  refusals.learn(at(5), ['k'], [refused], 1_000);
  assert.is(refusals.refuse(at(4), ['k'], 2_000), undefined, 'a cost of 4 may fit in 3 units plus what leaves: asked');
  assert.is(refusals.refuse(at(1), ['k'], 2_000), undefined, 'a cost of 1 fits: asked');
  const known = refusals.refuse(at(6), ['k'], 2_000)?.[0];
  assert.equal([known?.allowed, known?.remaining, known?.resetMs], [false, 3, 3_999], 'a cost of 6: refused here');
  assert.is(refusals.refuse(at(5), ['k'], 6_000), undefined, 'until the moment passes');
});

Memory('the local share counts units; an empty share admits one request above it per window', () => {
  const logs = new LocalLogs();
  const r = rule('20/min');
  const at = (cost: number): Check[] => [{ rule: r, ident: 'ip:192.0.2.3', cost }];
  // 4 workers: a share of 5 units
  assert.equal(
    logs.consume(at(8), 4, 0).map((d) => [d.allowed, d.remaining]),
    [[true, 0]],
    'empty: 8 admitted',
  );
  assert.equal(
    logs.consume(at(1), 4, 1).map((d) => d.allowed),
    [false],
    'then nothing',
  );
  const other: Check[] = [{ rule: r, ident: 'ip:192.0.2.4', cost: 3 }];
  assert.equal(
    logs.consume(other, 4, 0).map((d) => [d.allowed, d.remaining]),
    [[true, 2]],
  );
  assert.equal(
    logs.consume(other, 4, 1).map((d) => [d.allowed, d.remaining]),
    [[false, 2]],
    '3 do not fit in 2',
  );
  assert.equal(
    logs.consume([{ ...other[0]!, cost: 2 }], 4, 2).map((d) => [d.allowed, d.remaining]),
    [[true, 0]],
  );
});

Memory.run();
