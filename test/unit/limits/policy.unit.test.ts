import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { LimitPolicy, type OverrideRecord } from '../../../src/limits/policy.js';
import { planConcurrency, planRate, readPlans } from '../../../src/throttle/plans.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';

// docs/throttling.md "Plans and overrides": the plan settings' grammar, and which rule one client gets.

const Plans = suite('THROTTLE_PLANS and THROTTLE_PLAN_CONCURRENCY');

Plans('plans read by name, scope by scope; a scope a plan does not name is not there', () => {
  const read = readPlans('partner: user=1000/min, reports=100/hour; free: user=50/min', planRate);
  assert.equal(read, {
    ok: true,
    plans: { partner: { user: '1000/min', reports: '100/hour' }, free: { user: '50/min' } },
  });
  assert.equal(readPlans('  ', planRate), { ok: true, plans: {} });
  assert.equal(readPlans('partner: reports=4', planConcurrency(10)), { ok: true, plans: { partner: { reports: 4 } } });
});

Plans('each mistake is one line that names it', () => {
  const refused = (text: string, value: (text: string) => unknown = planRate) => {
    const read = readPlans(text, value);
    return read.ok ? 'accepted' : read.message;
  };
  assert.is(
    refused('partner user=1/min'),
    'expected "plan: scope=value, …" separated by semicolons, got "partner user=1/min"',
  );
  assert.is(
    refused('default: user=1/min'),
    'the default plan is the settings themselves (THROTTLE_ANON, THROTTLE_USER, …)',
  );
  assert.is(refused('a: user=1/min; a: user=2/min'), 'plan "a" is declared twice');
  assert.match(
    refused('a: anon=1/min'),
    /^plan "a" names anon, which no plan can change: it counts clients without a user$/,
  );
  assert.match(refused('a: user=fast'), /^plan "a", user: /);
  assert.is(refused('a: user=0', planConcurrency(10)), 'plan "a", user: expected a whole number from 1 to 10, got "0"');
  assert.is(refused('a:'), 'plan "a" names no scope');
});

const Rules = suite('the rule one client gets');
const user: ScopeRule = { scope: 'user', rate: parseRate('5/min'), keyedBy: 'user' };
const anon: ScopeRule = { scope: 'anon', rate: parseRate('3/min'), keyedBy: 'ip' };
const NOW = Date.parse('2026-12-02T12:00:00Z');

function override(id: number, fields: Partial<OverrideRecord>): OverrideRecord {
  return {
    id,
    targetKind: 'user',
    userId: null,
    address: null,
    rates: {},
    until: new Date(NOW + 60_000),
    reason: 'test',
    createdBy: 'test',
    createdAt: new Date(NOW),
    ...fields,
  };
}

function policy(overrides: OverrideRecord[] = [], plans: Array<[number, string]> = []): LimitPolicy {
  const limits = new LimitPolicy({ rates: { partner: { user: '100/min' } }, concurrency: { partner: { user: 4 } } });
  limits.replace(plans, overrides);
  return limits;
}

Rules('no plan given and no override: the settings’ rule itself', () => {
  assert.is(policy().ruleFor(user, 'user:1', 1, NOW), user);
});

Rules('a plan sets the scopes it names (and its requests in progress), once per plan', () => {
  const limits = policy([], [[1, 'partner']]);
  const rule = limits.ruleFor(user, 'user:1', 1, NOW);
  assert.equal([rule.rate.text, rule.plan, rule.inProgress], ['100/min', 'partner', 4]);
  assert.is(limits.ruleFor(user, 'user:1', 1, NOW), rule, 'the same rule object each time');
  assert.is(limits.ruleFor(user, 'user:2', 2, NOW), user, 'another user keeps the settings');
  assert.is(limits.planOf(1), 'partner');
  // A plan the settings no longer declare (removed by a reload) gives the settings' rates.
  assert.is(policy([], [[1, 'gone']]).ruleFor(user, 'user:1', 1, NOW), user);
});

Rules('an override beats the plan until it ends, for the scopes it names', () => {
  const limits = policy([override(7, { userId: 1, rates: { user: '1000/min' } })], [[1, 'partner']]);
  const rule = limits.ruleFor(user, 'user:1', 1, NOW);
  assert.equal([rule.rate.text, rule.override, rule.plan], ['1000/min', 7, 'partner']);
  assert.is(limits.ruleFor(user, 'user:1', 1, NOW + 60_000).rate.text, '100/min', 'ended: the plan again');
  assert.equal(limits.overrideEnd(7), new Date(NOW + 60_000));
  assert.equal(
    limits.inForce(NOW).map((o) => o.id),
    [7],
  );
  assert.equal(limits.inForce(NOW + 60_000), []);
});

Rules('the newest override of a client wins', () => {
  const limits = policy([
    override(3, { userId: 1, rates: { user: '10/min' } }),
    override(4, { userId: 1, rates: { user: '20/min' } }),
  ]);
  assert.is(limits.ruleFor(user, 'user:1', 1, NOW).rate.text, '20/min');
});

Rules('an address or prefix override counts each of its addresses, IPv4 and IPv6', () => {
  const limits = policy([
    override(1, { targetKind: 'address', address: '203.0.113.0/24', rates: { anon: '10/min' } }),
    override(2, { targetKind: 'address', address: '2001:db8::/32', rates: { anon: '20/min' } }),
    override(3, { targetKind: 'address', address: '198.51.100.7', rates: { anon: '30/min' } }),
  ]);
  assert.is(limits.ruleFor(anon, 'ip:203.0.113.77', undefined, NOW).rate.text, '10/min');
  assert.is(limits.ruleFor(anon, 'ip:2001:db8:5:6::/64', undefined, NOW).rate.text, '20/min');
  assert.is(limits.ruleFor(anon, 'ip:198.51.100.7', undefined, NOW).rate.text, '30/min');
  assert.is(limits.ruleFor(anon, 'ip:198.51.100.8', undefined, NOW), anon);
  assert.is(limits.ruleFor(anon, 'ip:192.0.2.1', undefined, NOW), anon);
});

Plans.run();
Rules.run();
