import { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { RING_SCRIPT } from '../../../src/throttle/ring-script.js';
import { createThrottler, throttleKey } from '../../../src/throttle/consume.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';
import type { Decision, Throttler } from '../../../src/throttle/throttler.js';
import { keysMatching } from '../../helpers/redis-keys.js';

// docs/throttling.md "Cost: requests that weigh more": the ring script with requests of several units, against a
// plain model of a sliding log of units (the script run as shipped, its clock the test's, as model.int.test.ts
// does), and through the throttler: remaining and Retry-After in units, a cost above the limit, and the memory of
// refusals by cost.

const REDIS_URL = process.env.TEST_REDIS_URL;
if (!REDIS_URL) throw new Error('TEST_REDIS_URL is not set: the test command starts Redis and sets it');

const PREFIX = `test:throttle-cost:${process.pid}:${Date.now()}:`;
const EXPIRIES = `${PREFIX}expiries`;
let redis: Redis;

/** The shipped script with the test's clock (ARGV[4], a commit) and key expiry kept on that clock. */
function scriptOnTestClock(): string {
  const clock = `local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])`;
  const px = `, 'PX', LIFE * widest_ms)`;
  const pexpire = `redis.call('PEXPIRE', key, LIFE * widest_ms)`;
  const record = `redis.call('HSET', '${EXPIRIES}', key, string.format('%.0f', now + LIFE * widest_ms * 1000))`;
  if (!RING_SCRIPT.includes(clock) || RING_SCRIPT.split(px).length !== 4 || !RING_SCRIPT.includes(pexpire)) {
    throw new Error('ring.lua no longer reads the clock or sets expiries as this test expects');
  }
  return RING_SCRIPT.replace(clock, 'local now = tonumber(ARGV[4])')
    .split(px)
    .join(`) ${record}`)
    .replace(pexpire, record);
}
const SCRIPT = scriptOnTestClock();

/** mulberry32, so a failing seed can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Check {
  key: string;
  limit: number;
  windowMs: number;
  cost: number;
}

/** allowed (1/0), remaining, resetMs, retryAfterS. */
type Result = [number, number, number, number];

/** Every admitted unit of every key: a sliding log of units with nothing dropped. */
class Model {
  private readonly logs = new Map<string, number[]>();

  decide(checks: Check[], now: number): Result[] {
    const views = checks.map(({ key, limit, windowMs, cost }) => {
      const inside = (this.logs.get(key) ?? []).filter((stamp) => stamp > now - windowMs * 1000);
      return { limit, windowUs: windowMs * 1000, windowMs, inside, cost };
    });
    const admitted = views.every((view) => view.inside.length + view.cost <= view.limit);
    return views.map(({ limit, windowUs, windowMs, inside, cost }, j): Result => {
      const first = inside[0];
      if (cost > limit) return [0, Math.max(0, limit - inside.length), 0, 0];
      if (inside.length + cost > limit) {
        const wait = (inside[inside.length - (limit - cost + 1)] as number) + windowUs - now;
        return [0, Math.max(0, limit - inside.length), Math.ceil(wait / 1000), Math.max(1, Math.ceil(wait / 1e6))];
      }
      const untilFirst = first === undefined ? undefined : Math.ceil((first + windowUs - now) / 1000);
      if (!admitted) return [1, limit - inside.length, untilFirst ?? 0, 0];
      const key = (checks[j] as Check).key;
      this.logs.set(key, [...(this.logs.get(key) ?? []), ...Array.from({ length: cost }, () => now)]);
      return [1, limit - inside.length - cost, untilFirst ?? windowMs, 0];
    });
  }
}

async function expireKeys(now: number): Promise<void> {
  const expiries = await redis.hgetall(EXPIRIES);
  for (const [key, at] of Object.entries(expiries)) {
    if (Number(at) < now) await redis.multi().del(key).hdel(EXPIRIES, key).exec();
  }
}

/** One call of the script: requests of 1–3 checks each, with their costs, decided one after another at `now`. */
async function callScript(requests: Check[][], now: number): Promise<Result[]> {
  await expireKeys(now);
  const rules: string[] = [];
  const layout: number[] = [];
  const keys: string[] = [];
  const costs: number[] = [];
  for (const request of requests) {
    layout.push(request.length);
    for (const { key, limit, windowMs, cost } of request) {
      const rule = `${limit} ${windowMs}`;
      if (!rules.includes(rule)) rules.push(rule);
      layout.push(rules.indexOf(rule) + 1);
      keys.push(key);
      costs.push(cost);
    }
  }
  const args = [rules.join(' '), Buffer.from(layout), '0', String(now), costs.join(' ')];
  const reply = (await redis.callBuffer('EVAL', SCRIPT, keys.length, ...keys, ...args)) as Buffer;
  assert.is(
    reply.length,
    keys.length * 32 + 8,
    `no request failed: ${reply.subarray(keys.length * 32 + 8).toString()}`,
  );
  return keys.map((_, i): Result => [0, 1, 2, 3].map((f) => reply.readDoubleLE(32 * i + 8 * f)) as Result);
}

/**
 * Random traffic of costs 1–maxCost (mostly 1, some heavy, a few above the limit) on a few keys; the limit varies
 * between calls when `varyLimit` (a rolling reload: the log rewritten, kept or trimmed).
 */
async function run(seed: number, limitRange: [number, number], maxCost: number, batches: number, varyLimit = false) {
  const next = random(seed);
  const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)] as T;
  const between = (low: number, high: number) => low + Math.floor(next() * (high - low + 1));
  const plans = Array.from({ length: 4 }, (_, i) => {
    const limit = between(...limitRange);
    return {
      key: `${PREFIX}${seed}:${i}`,
      limits: varyLimit ? [limit, between(...limitRange), between(...limitRange)] : [limit],
      windowMs: pick([60_000, 90_000]),
    };
  });
  const model = new Model();
  const meanLimit = (limitRange[0] + limitRange[1]) / 2;
  let now = 1_790_000_000_000_000 + between(0, 1_000_000);
  let meanStepUs = 0;
  let [checks, refused, heavy] = [0, 0, 0];
  for (let batch = 0; batch < batches; batch++) {
    if (batch % 100 === 0) meanStepUs = (90_000_000 / meanLimit) * pick([0.2, 1, 3, 8]);
    now += next() < 0.005 ? between(200_000_000, 400_000_000) : Math.floor(-Math.log(1 - next()) * meanStepUs);
    const requests = Array.from({ length: between(1, 5) }, () => {
      const chosen = [...plans].sort(() => next() - 0.5).slice(0, next() < 0.7 ? 1 : between(2, 3));
      const cost = next() < 0.5 ? 1 : next() < 0.97 ? between(2, maxCost) : maxCost * 4;
      return chosen.map((plan): Check => ({ key: plan.key, limit: pick(plan.limits), windowMs: plan.windowMs, cost }));
    });
    const expected = requests.flatMap((request) => model.decide(request, now));
    const actual = await callScript(requests, now);
    checks += expected.length;
    refused += expected.filter(([allowed]) => allowed === 0).length;
    heavy += requests.flat().filter((check, i) => check.cost > 1 && expected[i]?.[0] === 1).length;
    for (let i = 0; i < expected.length; i++)
      assert.equal(actual[i], expected[i], `seed ${seed}, batch ${batch}, check ${i}: ${JSON.stringify(requests)}`);
  }
  assert.ok(refused > checks * 0.05 && refused < checks * 0.95, `refused ${refused} of ${checks} checks`);
  assert.ok(heavy > checks * 0.05, `admitted ${heavy} checks of a cost above 1, of ${checks}`);
}

const model = suite('ring script with costs: the same answers as a sliding log of units');

model.before(() => {
  redis = new Redis(REDIS_URL as string, { maxRetriesPerRequest: 1 });
});

model('small limits read whole: costs up to the limit, and above it', async () => {
  for (const seed of [21, 22]) await run(seed, [5, 12], 5, 1200);
});

model('logs read whole that grow long, and large logs read by slots (the ring wraps under costs)', async () => {
  await run(23, [40, 120], 20, 1500);
  await run(24, [130, 200], 50, 1500);
});

model('limits changing between checks (rewritten logs keep what each limit needs)', async () => {
  await run(25, [3, 12], 6, 1200, true);
  await run(26, [90, 170], 40, 1500, true);
});

model.run();

const throttled = suite('the throttler with costs: units remaining, the wait for enough of them, and memory by cost');
let throttler: Throttler;
const rule = (rate: string, scope = 'anon'): ScopeRule => ({ scope, rate: parseRate(rate), keyedBy: 'ip' });
const take = async (r: ScopeRule, ident: string, cost?: number, via = throttler): Promise<Decision> =>
  (await via.consume([{ rule: r, ident, ...(cost === undefined ? {} : { cost }) }]))[0] as Decision;

throttled.before(() => {
  redis ??= new Redis(REDIS_URL as string, { maxRetriesPerRequest: 1 });
  throttler = createThrottler({ redis, keyPrefix: PREFIX });
});

throttled.after(async () => {
  const keys = await keysMatching(redis, `${PREFIX}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

throttled('a request of cost c takes c units; one that does not fit is refused with the units left', async () => {
  const r = rule('10/min');
  const ident = 'ip:192.0.2.1';
  assert.equal(pick(await take(r, ident, 5)), [true, 5], 'cost 5 of 10: 5 left');
  assert.equal(pick(await take(r, ident, 3)), [true, 2], 'cost 3: 2 left');
  const refused = await take(r, ident, 5);
  assert.equal(pick(refused), [false, 2], 'cost 5 does not fit in 2: refused, 2 units still left');
  assert.ok(
    refused.retryAfterS >= 59 && refused.retryAfterS <= 60,
    `waits for the first 5 units: ${refused.retryAfterS}`,
  );
  assert.equal(pick(await take(r, ident, 2)), [true, 0], 'a cost of 2 still fits after the refusal of a 5');
  assert.equal(pick(await take(r, ident)), [false, 0], 'and then nothing');
  const bytes = await redis.strlen(throttleKey(PREFIX, { rule: r, ident }));
  assert.is(bytes, 40 + 8 * 10, 'ten units are ten entries: the log holds at most N, whatever the costs');
});

throttled('Retry-After is when enough units leave the window for the cost, not when the first does', async () => {
  const r = rule('6/3s');
  const ident = 'ip:192.0.2.2';
  assert.ok((await take(r, ident, 2)).allowed);
  await new Promise((resolve) => setTimeout(resolve, 1100));
  assert.ok((await take(r, ident, 4)).allowed, 'the window is full: 2 units at t=0, 4 at t≈1.1 s');
  // One script call, one instant: the two waits differ by the time between the two admissions.
  const [small, large] = await Promise.all([take(r, ident, 2), take(r, ident, 3)]);
  assert.is(small.allowed || large.allowed, false);
  assert.ok(small.resetMs <= 1950, `2 units free when the first 2 leave (≈1.9 s): ${small.resetMs} ms`);
  assert.ok(
    large.resetMs - small.resetMs >= 1100,
    `3 units free only when the later 4 leave: ${large.resetMs} ms against ${small.resetMs} ms`,
  );
  assert.is(large.retryAfterS, Math.ceil(large.resetMs / 1000), 'Retry-After is that wait, in whole seconds');
  await new Promise((resolve) => setTimeout(resolve, small.resetMs + 20));
  assert.is((await take(r, ident, 3)).allowed, false, 'after the first wait, 3 units still do not fit');
  assert.equal(pick(await take(r, ident, 2)), [true, 0], 'but 2 do, as promised');
});

throttled('a cost above the limit is refused at once, with no wait to promise, and Redis is not asked', async () => {
  const r = rule('10/min');
  const ident = 'ip:192.0.2.3';
  const decision = await take(r, ident, 11);
  assert.equal(
    [decision.allowed, decision.overLimit, decision.retryAfterS, decision.local],
    [false, 11, 0, true],
    'over the limit',
  );
  assert.is(await redis.exists(throttleKey(PREFIX, { rule: r, ident })), 0, 'nothing was recorded or read');
  assert.equal(pick(await take(r, ident, 10)), [true, 0], 'a cost equal to the limit is admitted');
  const wiring = await throttler.consume([{ rule: r, ident, cost: 1.5 }]).then(
    () => 'resolved',
    (error: Error) => error.message,
  );
  assert.match(wiring, /positive integer/, 'a cost that is not a whole number is a wiring mistake');
});

throttled(
  'a refusal remembered for a cost of 5 refuses costs of 5 and more, not a cost of 1 Redis admits',
  async () => {
    const r = rule('10/min');
    const ident = 'ip:192.0.2.4';
    assert.ok((await take(r, ident, 7)).allowed);
    const refused = await take(r, ident, 5);
    assert.equal([refused.allowed, refused.local], [false, undefined], 'refused by Redis');
    const again = await take(r, ident, 6);
    assert.equal([again.allowed, again.local, again.remaining], [false, true, 3], 'a cost of 6: refused from memory');
    const cheaper = await take(r, ident, 1);
    assert.equal(
      [cheaper.allowed, cheaper.local, cheaper.remaining],
      [true, undefined, 2],
      'a cost of 1: Redis admits',
    );
    assert.ok(throttler.knownRefusal({ rule: r, ident, cost: 5 }) === undefined, 'its admission forgot the refusal');
  },
);

throttled('requests of several costs in one script call are decided one after another, exactly', async () => {
  const r = rule('20/min');
  const ident = 'ip:192.0.2.5';
  const costs = [1, 5, 5, 1, 5, 1, 5, 1, 1, 5];
  const decisions = await Promise.all(costs.map((cost) => take(r, ident, cost)));
  let used = 0;
  const expected = costs.map((cost) => (used + cost <= 20 ? ((used += cost), true) : false));
  assert.equal(
    decisions.map((d) => d.allowed),
    expected,
    'in arrival order, as alone',
  );
  assert.is(used, 20, 'the window is filled exactly');
});

throttled.run();

function pick(decision: Decision): [boolean, number] {
  return [decision.allowed, decision.remaining];
}
