import { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { RING_SCRIPT } from '../../../src/throttle/ring-script.js';
import { keysMatching } from '../../helpers/redis-keys.js';

/**
 * The ring script against a plain model of a sliding log, on random traffic.
 *
 * The model keeps every admission of every key and counts the ones inside the window; the script
 * keeps at most N per key in a ring, skips what has left, reads small logs whole (taking entries
 * without rewriting their header) and large ones by slots, rewrites on a changed limit and tracks the widest window. Both must give the same four
 * numbers for every check. The script is run as shipped except for its clock: `now` comes from the
 * test, so windows can be minutes long while the run takes a second, and keys expire on that clock
 * (the script's expiries are recorded, and the test deletes a key once its expiry has passed, as
 * Redis would). A scope's windows differ at most twofold, the change a rolling reload may make.
 */

const REDIS_URL = process.env.TEST_REDIS_URL;
if (!REDIS_URL) throw new Error('TEST_REDIS_URL is not set: the test command starts Redis and sets it');

const PREFIX = `test:throttle-model:${process.pid}:${Date.now()}:`;
/** Where the test keeps each key's expiry on its own clock (a hash of key → µs). */
const EXPIRIES = `${PREFIX}expiries`;

/** The shipped script with the test's clock, and with key expiry kept on that clock too. */
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
let redis: Redis;

/** A small deterministic generator (mulberry32), so a failing seed can be replayed. */
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
}

/** allowed (1/0), remaining, resetMs, retryAfterS: the script's four numbers per check. */
type Result = [number, number, number, number];

/** Every admission of every key, oldest first: the sliding log with nothing dropped. */
class Model {
  private readonly logs = new Map<string, number[]>();

  /** When the oldest admission of `key` inside the window leaves it (undefined if none is inside). */
  nextExit(key: string, windowMs: number, now: number): number | undefined {
    const first = (this.logs.get(key) ?? []).find((stamp) => stamp > now - windowMs * 1000);
    return first === undefined ? undefined : first + windowMs * 1000;
  }

  decide(checks: Check[], now: number): Result[] {
    const views = checks.map(({ key, limit, windowMs }) => {
      const inside = (this.logs.get(key) ?? []).filter((stamp) => stamp > now - windowMs * 1000);
      return { limit, windowUs: windowMs * 1000, windowMs, inside };
    });
    const admitted = views.every((view) => view.inside.length < view.limit);
    return views.map(({ limit, windowUs, windowMs, inside }, j): Result => {
      const first = inside[0];
      if (inside.length >= limit) {
        const wait = (inside[inside.length - limit] as number) + windowUs - now;
        return [0, 0, Math.ceil(wait / 1000), Math.max(1, Math.ceil(wait / 1e6))];
      }
      const untilFirst = first === undefined ? undefined : Math.ceil((first + windowUs - now) / 1000);
      if (!admitted) return [1, limit - inside.length, untilFirst ?? 0, 0];
      const key = (checks[j] as Check).key;
      this.logs.set(key, [...(this.logs.get(key) ?? []), now]);
      return [1, limit - inside.length - 1, untilFirst ?? windowMs, 0];
    });
  }
}

/** Deletes the keys whose expiry (on the test's clock) has passed by `now`, as Redis would. */
async function expireKeys(now: number): Promise<void> {
  const expiries = await redis.hgetall(EXPIRIES);
  for (const [key, at] of Object.entries(expiries)) {
    if (Number(at) < now) await redis.multi().del(key).hdel(EXPIRIES, key).exec();
  }
}

/** One call of the script: requests of 1–3 checks each, decided one after another at `now`. */
async function callScript(requests: Check[][], now: number): Promise<Result[]> {
  await expireKeys(now);
  const rules: string[] = [];
  const layout: number[] = [];
  const keys: string[] = [];
  for (const request of requests) {
    layout.push(request.length);
    for (const { key, limit, windowMs } of request) {
      const rule = `${limit} ${windowMs}`;
      if (!rules.includes(rule)) rules.push(rule);
      layout.push(rules.indexOf(rule) + 1);
      keys.push(key);
    }
  }
  const reply = (await redis.callBuffer(
    'EVAL',
    SCRIPT,
    keys.length,
    ...keys,
    rules.join(' '),
    Buffer.from(layout),
    '0',
    String(now),
  )) as Buffer;
  assert.is(
    reply.length,
    keys.length * 32 + 8,
    `no request failed: ${reply.subarray(keys.length * 32 + 8).toString()}`,
  );
  assert.is(reply.readDoubleLE(keys.length * 32), now, 'the clock follows the results');
  return keys.map((_, i): Result => [0, 1, 2, 3].map((f) => reply.readDoubleLE(32 * i + 8 * f)) as Result);
}

type Variation = 'limit' | 'window' | 'none';

interface KeyPlan {
  key: string;
  limits: number[];
  windowsMs: number[];
}

/**
 * Random traffic on a few keys: each key's limit varies (its window fixed), or its window varies
 * (its limit fixed), or neither, as `variation` says. Time advances in phases of slow, near-limit
 * and burst traffic, with an occasional jump past every window.
 */
async function run(seed: number, variation: Variation, limitRange: [number, number], batches: number) {
  const next = random(seed);
  const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)] as T;
  const between = (low: number, high: number) => low + Math.floor(next() * (high - low + 1));
  const plans: KeyPlan[] = Array.from({ length: 5 }, (_, i) => {
    const limit = between(...limitRange);
    const windowMs = pick([60_000, 90_000, 120_000]);
    return {
      key: `${PREFIX}${seed}:${variation}:${i}`,
      limits: variation === 'limit' ? [limit, between(...limitRange), between(...limitRange)] : [limit],
      windowsMs: variation === 'window' ? [windowMs, windowMs * 0.75, windowMs * 1.5] : [windowMs],
    };
  });
  const model = new Model();
  const meanLimit = (limitRange[0] + limitRange[1]) / 2;
  let now = 1_790_000_000_000_000 + between(0, 1_000_000);
  let meanStepUs = 0;
  let checks = 0;
  let refused = 0;
  for (let batch = 0; batch < batches; batch++) {
    if (batch % 100 === 0) meanStepUs = (90_000_000 / meanLimit) * pick([0.05, 0.4, 1, 2.5]);
    now += next() < 0.005 ? between(250_000_000, 500_000_000) : Math.floor(-Math.log(1 - next()) * meanStepUs);
    if (next() < 0.2) {
      // exactly when (or 1 µs before or after) an admission leaves one of its key's windows
      const plan = pick(plans);
      const exit = model.nextExit(plan.key, pick(plan.windowsMs), now);
      if (exit !== undefined && exit - now < 4 * meanStepUs) now = Math.max(now, exit + pick([-1, 0, 0, 1]));
    }
    const requests = Array.from({ length: between(1, 6) }, () => {
      const chosen = [...plans].sort(() => next() - 0.5).slice(0, next() < 0.6 ? 1 : between(2, 3));
      return chosen.map((plan): Check => ({ key: plan.key, limit: pick(plan.limits), windowMs: pick(plan.windowsMs) }));
    });
    const expected = requests.flatMap((request) => model.decide(request, now));
    const actual = await callScript(requests, now);
    checks += expected.length;
    refused += expected.filter(([allowed]) => allowed === 0).length;
    for (let i = 0; i < expected.length; i++) {
      assert.equal(
        actual[i],
        expected[i],
        `seed ${seed} (${variation}), batch ${batch}, check ${i}: ${JSON.stringify(requests)}`,
      );
    }
  }
  // the traffic exercised both outcomes, or the comparison proves little
  assert.ok(refused > checks * 0.05 && refused < checks * 0.95, `refused ${refused} of ${checks} checks`);
}

const model = suite('ring script: the same answers as a sliding log that keeps everything');

model.before(() => {
  redis = new Redis(REDIS_URL as string, { maxRetriesPerRequest: 1 });
});

model.after(async () => {
  const keys = await keysMatching(redis, `${PREFIX}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

model('small limits read whole, steady rules', async () => {
  for (const seed of [1, 2]) await run(seed, 'none', [1, 12], 1500);
});

model('logs read whole that grow long between header writes (a lagging header)', async () => {
  for (const seed of [8, 9]) await run(seed, 'none', [30, 120], 2500);
});

model('limits changing between checks, on either side of the whole-read size', async () => {
  await run(3, 'limit', [1, 10], 1500);
  await run(4, 'limit', [100, 170], 2500);
});

model('windows changing between checks (the widest one is kept)', async () => {
  await run(5, 'window', [2, 9], 1500);
  await run(6, 'window', [140, 180], 2500);
  for (const seed of [10, 11]) await run(seed, 'window', [17, 128], 2500);
});

model('a wider window appending to a lagging log is remembered (it trims nothing the wider one needs)', async () => {
  const m = new Model();
  const key = `${PREFIX}widened`;
  const [narrow, wide] = [
    { key, limit: 25, windowMs: 60_000 },
    { key, limit: 25, windowMs: 80_000 },
  ];
  const start = 1_790_000_000_000_000;
  const at = async (seconds: number, check: Check) => {
    const now = start + seconds * 1_000_000;
    assert.equal(
      await callScript([[check]], now),
      m.decide([check], now),
      `${check.windowMs / 1000} s window at t=${seconds} s`,
    );
  };
  await at(0, narrow);
  for (let t = 1; t <= 20; t++) await at(t, wide);
  await at(75, narrow);
  await at(76, wide);
  await at(130, narrow);
  await at(135, wide);
});

model('a log only the narrower window has checked keeps what a twice-as-wide window needs when rewritten', async () => {
  const start = 1_790_000_000_000_000;
  const replay = async (name: string, steps: Array<[number, Check]>) => {
    const m = new Model();
    for (const [seconds, check] of steps) {
      const now = start + Math.round(seconds * 1_000_000);
      const label = `${name}: ${check.limit}/${check.windowMs / 1000} s at t=${seconds} s`;
      assert.equal(await callScript([[check]], now), m.decide([check], now), label);
    }
  };
  const a = `${PREFIX}trim-widened`;
  const narrow = { key: a, limit: 18, windowMs: 30_000 };
  const wide = { key: a, limit: 18, windowMs: 60_000 };
  await replay('trimmed growing log', [
    ...Array.from({ length: 16 }, (): [number, Check] => [0, narrow]),
    [30, narrow],
    [30, wide],
    [30, wide],
  ]);
  const b = `${PREFIX}trim-lowered`;
  await replay('limit lowered and window widened', [
    [0, { key: b, limit: 3, windowMs: 30_000 }],
    [0.18, { key: b, limit: 9, windowMs: 30_000 }],
    [0.18, { key: b, limit: 9, windowMs: 30_000 }],
    [0.2, { key: b, limit: 9, windowMs: 30_000 }],
    [42.69, { key: b, limit: 3, windowMs: 30_000 }],
    [43.02, { key: b, limit: 2, windowMs: 60_000 }],
  ]);
});

model('a key only the narrower window has checked outlives what a twice-as-wide window needs', async () => {
  const m = new Model();
  const key = `${PREFIX}outlives`;
  const [narrow, wide] = [
    { key, limit: 8, windowMs: 60_000 },
    { key, limit: 8, windowMs: 120_000 },
  ];
  const start = 1_790_000_000_000_000;
  for (const [seconds, check] of [
    [0, narrow],
    [50, narrow],
    [121, wide],
    [169, wide],
    [171, wide],
  ] as const) {
    const now = start + seconds * 1_000_000;
    assert.equal(
      await callScript([[check]], now),
      m.decide([check], now),
      `${check.windowMs / 1000} s window at t=${seconds} s`,
    );
  }
});

model('large limits read by slots', async () => {
  await run(7, 'none', [200, 300], 3000);
});

model.run();
