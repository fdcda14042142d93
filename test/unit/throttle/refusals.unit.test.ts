import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import type { Check, Decision } from '../../../src/throttle/throttler.js';
import { parseRate } from '../../../src/throttle/rate.js';
import { Refusals } from '../../../src/throttle/refusals.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';

// A client Redis has refused is refused in process until its window frees (refusals.ts): never
// after that moment, with the answer Redis would give, and only under the rule Redis judged.

const rule = (rate: string, scope = 'anon'): ScopeRule => ({ scope, rate: parseRate(rate), keyedBy: 'ip' });
const keyOf = (check: Check) => `p:throttle:v3:{${check.ident}}:${check.rule.scope}`;

/** Redis's answer for a check: refused with `resetMs` to wait, or admitted with `remaining`. */
function redisSays(check: Check, answer: { resetMs: number } | { remaining: number }): Decision {
  const { limit, windowMs } = check.rule.rate;
  if ('remaining' in answer)
    return {
      scope: check.rule.scope,
      allowed: true,
      limit,
      windowMs,
      remaining: answer.remaining,
      resetMs: 10,
      retryAfterS: 0,
    };
  return {
    scope: check.rule.scope,
    allowed: false,
    limit,
    windowMs,
    remaining: 0,
    resetMs: answer.resetMs,
    retryAfterS: Math.max(1, Math.ceil(answer.resetMs / 1000)),
  };
}

function learn(refusals: Refusals, checks: Check[], decisions: Decision[], sentAt: number): void {
  refusals.learn(checks, checks.map(keyOf), decisions, sentAt);
}
const ask = (refusals: Refusals, checks: Check[], now: number) => refusals.refuse(checks, checks.map(keyOf), now);

const Refused = suite('refusals held in process');

Refused(
  'nothing known, nothing refused; a refusal holds until the window frees, counted from when the call was sent',
  () => {
    const refusals = new Refusals();
    const check = { rule: rule('5/min'), ident: 'ip:10.0.0.1' };
    assert.is(ask(refusals, [check], 0), undefined);
    // Sent at 1,000 ms; Redis ran it some time later and said 2,500.3 ms to wait (rounded up to 2,501).
    learn(refusals, [check], [redisSays(check, { resetMs: 2_501 })], 1_000);
    const [early] = ask(refusals, [check], 1_000) ?? [];
    assert.equal(early, {
      scope: 'anon',
      allowed: false,
      limit: 5,
      windowMs: 60_000,
      remaining: 0,
      resetMs: 2_500,
      retryAfterS: 3,
      local: true,
    });
    const late = ask(refusals, [check], 3_499.5)?.[0];
    assert.equal([late?.allowed, late?.resetMs, late?.retryAfterS], [false, 1, 1], 'Retry-After at least 1');
    assert.is(ask(refusals, [check], 3_500), undefined, 'free no later than Redis frees it: from sentAt + 2,500 ms on');
    assert.is(refusals.size, 0, 'a passed moment is dropped when looked up');
  },
);

Refused('Retry-After and RateLimit t are the ceilings of the wait, as Redis gives them', () => {
  const refusals = new Refusals();
  const check = { rule: rule('3/2s'), ident: 'ip:10.0.0.2' };
  learn(refusals, [check], [redisSays(check, { resetMs: 1_801 })], 0);
  for (const [now, resetMs, retryAfterS] of [
    [0, 1_800, 2],
    [799.5, 1_001, 2],
    [800, 1_000, 1],
    [1_700.25, 100, 1],
  ] as const) {
    const decision = ask(refusals, [check], now)?.[0];
    assert.equal([decision?.resetMs, decision?.retryAfterS], [resetMs, retryAfterS], `at ${now} ms`);
  }
});

Refused('another limit or window over the same log is not matched, nor another client or scope', () => {
  const refusals = new Refusals();
  const check = { rule: rule('5/min'), ident: 'ip:10.0.0.3' };
  learn(refusals, [check], [redisSays(check, { resetMs: 30_000 })], 0);
  assert.ok(ask(refusals, [check], 10));
  assert.ok(ask(refusals, [{ rule: rule('5/min'), ident: 'ip:10.0.0.3' }], 10), 'an equal rule built again matches');
  assert.is(ask(refusals, [{ rule: rule('6/min'), ident: 'ip:10.0.0.3' }], 10), undefined, 'another limit');
  assert.is(ask(refusals, [{ rule: rule('5/2m'), ident: 'ip:10.0.0.3' }], 10), undefined, 'another window');
  assert.is(ask(refusals, [{ rule: rule('5/min'), ident: 'ip:10.0.0.4' }], 10), undefined, 'another client');
  assert.is(ask(refusals, [{ rule: rule('5/min', 'user'), ident: 'ip:10.0.0.3' }], 10), undefined, 'another scope');
});

Refused('a request with one refused check is refused whole; its other checks read allowed, untouched', () => {
  const refusals = new Refusals();
  const user = { rule: rule('100/min', 'user'), ident: 'user:1' };
  const reports = { rule: rule('2/hour', 'reports'), ident: 'user:1' };
  learn(refusals, [user, reports], [redisSays(user, { remaining: 97 }), redisSays(reports, { resetMs: 3_600_000 })], 0);
  const decisions = ask(refusals, [user, reports], 1_000);
  assert.equal(
    decisions?.map((d) => [d.scope, d.allowed, d.remaining, d.retryAfterS, d.local]),
    [
      ['user', true, 100, 0, true],
      ['reports', false, 0, 3_599, true],
    ],
  );
  assert.is(ask(refusals, [user], 1_000), undefined, 'user alone still goes to Redis');
});

Refused('Redis admitting a check forgets its refusal; a later refusal keeps the later moment', () => {
  const refusals = new Refusals();
  const check = { rule: rule('5/min'), ident: 'ip:10.0.0.5' };
  learn(refusals, [check], [redisSays(check, { resetMs: 5_000 })], 0);
  learn(refusals, [check], [redisSays(check, { resetMs: 1_000 })], 10);
  assert.is(ask(refusals, [check], 4_000)?.[0]?.resetMs, 999, 'the later of the two moments');
  learn(refusals, [check], [redisSays(check, { remaining: 0 })], 4_100);
  assert.is(
    ask(refusals, [check], 4_200),
    undefined,
    'Redis found room: the log is not what was learnt (deleted, restarted)',
  );
  learn(refusals, [check], [redisSays(check, { resetMs: 1 })], 5_000);
  assert.is(ask(refusals, [check], 5_000), undefined, 'a wait under 1 ms refuses nothing here');
});

Refused('bounded: past the limit the refusal learnt longest ago is forgotten', () => {
  const refusals = new Refusals(3);
  const checks = [1, 2, 3, 4].map((i) => ({ rule: rule('1/min'), ident: `ip:10.0.1.${i}` }));
  for (const check of checks.slice(0, 3)) learn(refusals, [check], [redisSays(check, { resetMs: 60_000 })], 0);
  const first = checks[0] as Check;
  learn(refusals, [first], [redisSays(first, { resetMs: 60_000 })], 1);
  learn(refusals, [checks[3] as Check], [redisSays(checks[3] as Check, { resetMs: 60_000 })], 2);
  assert.is(refusals.size, 3);
  assert.equal(
    checks.map((check) => ask(refusals, [check], 10) !== undefined),
    [true, false, true, true],
    'the second was learnt longest ago (the first was learnt again)',
  );
});

Refused.run();
