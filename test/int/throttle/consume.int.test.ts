import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createThrottler, isAdmitted, throttleKey } from '../../../src/throttle/consume.js';
import type { Decision, Throttler } from '../../../src/throttle/throttler.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';
import { keysMatching } from '../../helpers/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL;
if (!REDIS_URL) throw new Error('TEST_REDIS_URL is not set: the test command starts Redis and sets it');

const PREFIX = `test:throttle-consume:${process.pid}:${Date.now()}:`;
const connections: Redis[] = [];
let redis: Redis;
let throttler: Throttler;

function connect(): Redis {
  const connection = new Redis(REDIS_URL as string, { lazyConnect: false, maxRetriesPerRequest: 1 });
  connections.push(connection);
  return connection;
}

const rule = (rate: string, scope = 'anon'): ScopeRule => ({ scope, rate: parseRate(rate), keyedBy: 'ip' });
const keyOf = (r: ScopeRule, ident: string) => throttleKey(PREFIX, { rule: r, ident });
const hit = async (r: ScopeRule, ident: string, via = throttler): Promise<Decision> =>
  (await via.consume([{ rule: r, ident }]))[0] as Decision;
const burst = (r: ScopeRule, ident: string, count: number) =>
  Promise.all(Array.from({ length: count }, () => hit(r, ident)));
const admittedCount = (decisions: Decision[]) => decisions.filter((d) => d.allowed).length;

/** Redis's clock in microseconds, the clock the script records with. */
async function redisNowUs(): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1e6 + Number(micros);
}

/** Bytes of a log holding `entries` admissions: the 40-byte header and 8 bytes per entry (ring-script.ts). */
const logBytes = (entries: number) => 40 + 8 * entries;

/** The admission stamps (µs) held in a log, oldest first. White-box: the layout of ring-script.ts. */
async function readStamps(key: string): Promise<number[]> {
  const bytes = await redis.getBuffer(key);
  if (!bytes) return [];
  const magic = bytes.subarray(0, 4).toString();
  assert.ok(magic === 'PLR1' || magic === 'PLRa', `log marker ${magic}`);
  const head = bytes.readUInt32LE(4);
  // A lagging header (PLRa, head 0) may count fewer entries than follow it: the length counts them.
  const size = magic === 'PLRa' && head === 0 ? (bytes.length - logBytes(0)) / 8 : bytes.readUInt32LE(8);
  assert.ok(size >= bytes.readUInt32LE(8), 'the header never counts more entries than the log holds');
  assert.is(bytes.length, logBytes(size));
  return Array.from({ length: size }, (_, j) => bytes.readDoubleLE(logBytes((head + j) % size)));
}

/** The most admissions inside any window (t − W, t], given every admission's stamp. */
function mostInAnyWindow(stamps: number[], windowUs: number): number {
  const sorted = [...new Set(stamps)].sort((a, b) => a - b);
  let most = 0;
  sorted.forEach((end, i) => {
    const inside = sorted.slice(0, i + 1).filter((stamp) => stamp > end - windowUs).length;
    most = Math.max(most, inside);
  });
  return most;
}

/** A fixed-window counter (INCR + PEXPIRE per aligned window), only to show the tests can tell. */
const FIXED_WINDOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1] .. ':' .. math.floor(now / (ARGV[2] * 1000))
local count = redis.call('INCR', key)
if count == 1 then redis.call('PEXPIRE', key, ARGV[2]) end
return { count <= tonumber(ARGV[1]) and 1 or 0, now }
`;

async function hitFixedWindow(r: ScopeRule, ident: string): Promise<{ allowed: boolean; at: number }> {
  const [allowed, at] = (await redis.eval(
    FIXED_WINDOW,
    1,
    `${PREFIX}fixed:${ident}`,
    r.rate.limit,
    r.rate.windowMs,
  )) as number[];
  return { allowed: allowed === 1, at: at as number };
}

const consume = suite('consume: exact sliding-log throttling in Redis');

consume.before(() => {
  redis = connect();
  throttler = createThrottler({ redis, keyPrefix: PREFIX });
});

consume.after(async () => {
  const keys = await keysMatching(redis, `${PREFIX}*`);
  if (keys.length > 0) await redis.del(...keys);
  await Promise.all(connections.map((connection) => connection.quit()));
});

consume('N requests are admitted, counting down, then refused for the whole window', async () => {
  const r = rule('20/min');
  const admitted = [];
  for (let i = 0; i < 20; i++) admitted.push(await hit(r, 'ip:10.0.0.1'));
  assert.equal(
    admitted.map((d) => d.remaining),
    Array.from({ length: 20 }, (_, i) => 19 - i),
  );
  assert.ok(admitted.every((d) => d.allowed && d.retryAfterS === 0 && d.limit === 20 && d.scope === 'anon'));
  assert.is(admitted[0]?.resetMs, 60_000, 'a lone request comes back after a full window');
  const refused = await hit(r, 'ip:10.0.0.1');
  assert.is(refused.allowed, false);
  assert.is(refused.remaining, 0);
  assert.is(refused.retryAfterS, 60, 'ceil of the time until the first leaves the window');
  assert.ok(refused.resetMs > 59_000 && refused.resetMs <= 60_000, `resetMs ${refused.resetMs}`);
  assert.is(Math.ceil(refused.resetMs / 1000), refused.retryAfterS);
  assert.is((await hit(r, 'ip:10.0.0.2')).remaining, 19, 'another client has its own budget');
});

consume('refused requests are not recorded', async () => {
  const r = rule('2/1s');
  assert.is(admittedCount(await burst(r, 'ip:10.0.1.1', 2)), 2);
  const [first] = await readStamps(keyOf(r, 'ip:10.0.1.1'));
  for (let i = 0; i < 15; i++) {
    assert.is((await hit(r, 'ip:10.0.1.1')).allowed, false);
    await sleep(50);
  }
  assert.is((await readStamps(keyOf(r, 'ip:10.0.1.1'))).length, 2);
  await sleep(((first as number) + 1_000_000 - (await redisNowUs())) / 1000 + 20);
  const after = await burst(r, 'ip:10.0.1.1', 4);
  assert.is(admittedCount(after), 2, 'the refusals during the window did not push the budget back');
});

consume('after waiting Retry-After seconds, exactly one more request is admitted', async () => {
  const r = rule('3/2s');
  assert.ok((await hit(r, 'ip:10.0.2.1')).allowed);
  await sleep(1000);
  assert.is(admittedCount(await burst(r, 'ip:10.0.2.1', 2)), 2);
  const refused = await hit(r, 'ip:10.0.2.1');
  assert.is(refused.allowed, false);
  assert.is(refused.retryAfterS, 1, 'the first request leaves the window in under a second');
  await sleep(refused.retryAfterS * 1000);
  const again = await burst(r, 'ip:10.0.2.1', 3);
  assert.is(admittedCount(again), 1);
  const next = again.find((d) => !d.allowed);
  assert.is(next?.retryAfterS, 1);
});

consume('the window slides: never more than N in any window, not N per slice', async () => {
  const r = rule('5/2s');
  const key = keyOf(r, 'ip:10.0.3.1');
  for (let i = 0; i < 5; i++) {
    assert.ok((await hit(r, 'ip:10.0.3.1')).allowed);
    await sleep(250);
  }
  const phase1 = await readStamps(key);
  await sleep(((phase1[0] as number) + 2_000_000 - (await redisNowUs())) / 1000 + 30);
  const phase2 = await burst(r, 'ip:10.0.3.1', 5);
  assert.is(admittedCount(phase2), 1, 'only the first request has left the window');
  assert.ok(phase2.filter((d) => !d.allowed).every((d) => d.retryAfterS === 1));
  const stamps = [...phase1, ...(await readStamps(key))];
  assert.is(new Set(stamps).size, 6);
  assert.is(mostInAnyWindow(stamps, 2_000_000), 5);
});

consume('a fixed-window counter would admit 2N across its boundary; the sliding log admits N', async () => {
  const r = rule('4/1s');
  const toBoundary = 1_000_000 - ((await redisNowUs()) % 1_000_000);
  const lead = toBoundary / 1000 - 300;
  await sleep(lead >= 0 ? lead : lead + 1000);
  const sliding: Decision[] = [];
  const fixed: Array<{ allowed: boolean; at: number }> = [];
  for (const pause of [0, 330]) {
    await sleep(pause);
    for (let i = 0; i < 4; i++) {
      sliding.push(await hit(r, 'ip:10.0.4.1'));
      fixed.push(await hitFixedWindow(r, 'ip:10.0.4.1'));
    }
  }
  const fixedStamps = fixed.filter((f) => f.allowed).map((f) => f.at);
  assert.is(fixedStamps.length, 8, 'the fixed window resets at the boundary');
  assert.ok(mostInAnyWindow(fixedStamps, 1_000_000) === 8, 'the window check catches the fixed window');
  assert.is(admittedCount(sliding), 4);
  assert.is(mostInAnyWindow(await readStamps(keyOf(r, 'ip:10.0.4.1')), 1_000_000), 4);
});

consume('remaining counts only the requests still inside the window', async () => {
  const r = rule('3/1s');
  assert.is((await hit(r, 'ip:10.0.5.1')).remaining, 2);
  await sleep(500);
  assert.is((await hit(r, 'ip:10.0.5.1')).remaining, 1);
  const [first] = await readStamps(keyOf(r, 'ip:10.0.5.1'));
  await sleep(((first as number) + 1_000_000 - (await redisNowUs())) / 1000 + 20);
  const third = await hit(r, 'ip:10.0.5.1');
  assert.is(third.remaining, 1, 'the first left: one inside plus this one');
  // Counted from the third's own stamp, whatever the pauses took on a loaded host.
  const [second, thirdAt] = (await readStamps(keyOf(r, 'ip:10.0.5.1'))).slice(-2) as [number, number];
  const secondLeavesMs = Math.ceil((second + 1_000_000 - thirdAt) / 1000);
  assert.ok(second - (first as number) >= 500_000, 'the second came half a second after the first, or later');
  assert.is(third.resetMs, secondLeavesMs, `resetMs ${third.resetMs} is when the second leaves`);
});

consume('500 concurrent requests over 20 connections: exactly N admitted', async () => {
  const throttlers = Array.from({ length: 20 }, () => createThrottler({ redis: connect(), keyPrefix: PREFIX }));
  const r = rule('37/min');
  const decisions = await Promise.all(
    Array.from({ length: 500 }, (_, i) => hit(r, 'ip:10.0.6.1', throttlers[i % throttlers.length])),
  );
  const admitted = decisions.filter((d) => d.allowed);
  assert.is(admitted.length, 37);
  assert.equal(
    admitted.map((d) => d.remaining).sort((a, b) => a - b),
    Array.from({ length: 37 }, (_, i) => i),
  );
  assert.ok(decisions.filter((d) => !d.allowed).every((d) => d.retryAfterS === 60 && d.remaining === 0));
  assert.is((await readStamps(keyOf(r, 'ip:10.0.6.1'))).length, 37);
});

consume('several scopes are decided together: one refusal records nothing anywhere', async () => {
  const user = rule('100/min', 'user');
  const reports = rule('2/hour', 'reports');
  const both = [
    { rule: user, ident: 'user:42' },
    { rule: reports, ident: 'user:42' },
  ];
  assert.equal(
    (await throttler.consume(both)).map((d) => d.remaining),
    [99, 1],
  );
  assert.equal(
    (await throttler.consume(both)).map((d) => d.remaining),
    [98, 0],
  );
  const [u, rep] = await throttler.consume(both);
  assert.is(isAdmitted([u as Decision, rep as Decision]), false);
  assert.equal([u?.allowed, u?.remaining, u?.retryAfterS], [true, 98, 0], 'user had room but did not count it');
  assert.equal([rep?.allowed, rep?.remaining, rep?.retryAfterS], [false, 0, 3600]);
  assert.is((await readStamps(keyOf(user, 'user:42'))).length, 2);
  assert.is((await hit(user, 'user:42')).remaining, 97, 'user alone is still admitted and counts from 2');
  const reversed = await throttler.consume([
    { rule: reports, ident: 'user:42' },
    { rule: user, ident: 'user:42' },
  ]);
  assert.equal(
    reversed.map((d) => d.scope),
    ['reports', 'user'],
  );
  assert.equal(
    reversed.map((d) => d.allowed),
    [false, true],
  );
  assert.is((await readStamps(keyOf(user, 'user:42'))).length, 3);
});

consume('keys expire by themselves within three windows of the last admission', async () => {
  const r = rule('5/min');
  await hit(r, 'ip:10.0.7.1');
  const ttl = await redis.pttl(keyOf(r, 'ip:10.0.7.1'));
  assert.ok(ttl > 179_000 && ttl <= 180_000, `PTTL ${ttl}`);
  assert.is(await redis.strlen(keyOf(r, 'ip:10.0.7.1')), logBytes(1), 'one admission: header + one entry');
  for (let i = 0; i < 6; i++) await hit(r, 'ip:10.0.7.1');
  assert.is(await redis.strlen(keyOf(r, 'ip:10.0.7.1')), logBytes(5), 'full: 40 + 8·N bytes, never more');
  const short = rule('2/1s', 'short');
  const key = keyOf(short, 'ip:10.0.7.1');
  assert.ok((await hit(short, 'ip:10.0.7.1')).allowed);
  assert.ok((await redis.pttl(key)) <= 3_000);
  await sleep(1100);
  assert.ok((await hit(short, 'ip:10.0.7.1')).allowed);
  const refreshed = await redis.pttl(key);
  assert.ok(
    refreshed > 2_800 && refreshed <= 3_000,
    `an admission less than two windows before expiry pushes it: PTTL ${refreshed}`,
  );
  await sleep(3050);
  assert.is(await redis.exists(key), 0, 'gone three windows after the last admission');
});

consume('a large limit stores only what was admitted and stays exact', async () => {
  const big = rule('100000/min', 'big');
  const ident = 'ip:10.0.7.2';
  const decisions = await burst(big, ident, 300);
  assert.is(admittedCount(decisions), 300);
  assert.equal(decisions.map((d) => d.remaining).sort((a, b) => a - b)[0], 100000 - 300);
  assert.is(await redis.strlen(keyOf(big, ident)), logBytes(300), 'grows with admissions, not with the limit');
});

for (const [limit, batch] of [
  [300, 100],
  [120, 50],
] as const) {
  consume(`entries that left since the last check are skipped exactly (limit ${limit}, ${batch} left)`, async () => {
    const r = rule(`${limit}/2s`, `skip${limit}`);
    const ident = 'ip:10.0.14.1';
    assert.is(admittedCount(await burst(r, ident, batch)), batch);
    await sleep(1200);
    assert.is(admittedCount(await burst(r, ident, batch)), batch);
    const second = (await readStamps(keyOf(r, ident)))[batch] as number;
    await sleep((((await readStamps(keyOf(r, ident)))[0] as number) + 2_000_000 - (await redisNowUs())) / 1000 + 50);
    const next = await hit(r, ident);
    assert.is(next.remaining, limit - batch - 1, 'only the second burst is inside');
    const expectedResetMs = (second + 2_000_000 - (await redisNowUs())) / 1000;
    assert.ok(
      Math.abs(next.resetMs - expectedResetMs) < 100,
      `resetMs ${next.resetMs} ≈ ${expectedResetMs}: when the second burst's first leaves`,
    );
    assert.is(
      await redis.strlen(keyOf(r, ident)),
      logBytes(2 * batch + 1),
      'entries that left one window are kept: a window widened twofold may need them',
    );
  });
}

consume('a changed limit applies at once and keeps the history exact', async () => {
  const ident = 'ip:10.0.8.1';
  const key = keyOf(rule('5/min'), ident);
  assert.is(admittedCount(await burst(rule('5/min'), ident, 6)), 5);
  const grown = [];
  for (let i = 0; i < 4; i++) grown.push(await hit(rule('8/min'), ident));
  assert.equal(
    grown.map((d) => [d.allowed, d.remaining]),
    [
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ],
  );
  assert.is(await redis.strlen(key), logBytes(8));
  const lowered = await hit(rule('3/min'), ident);
  assert.equal([lowered.allowed, lowered.remaining, lowered.retryAfterS], [false, 0, 60]);
  assert.is((await hit(rule('8/min'), ident)).allowed, false, 'flipping back lost nothing');
  assert.is(admittedCount(await burst(rule('10/min'), ident, 5)), 2);
  assert.is(await redis.strlen(key), logBytes(10));
});

consume(
  'a changed window applies at once: a shorter one neither forgets nor shortens what a longer one needs',
  async () => {
    const ident = 'ip:10.0.15.1';
    const long = rule('3/4s', 'win');
    const short = rule('3/1s', 'win');
    assert.is(admittedCount(await burst(long, ident, 3)), 3);
    await sleep(1100);
    assert.ok((await hit(short, ident)).allowed, 'the three left the short window');
    assert.ok((await redis.pttl(keyOf(long, ident))) > 6_000, 'the short window did not shorten the key');
    const again = await burst(long, ident, 2);
    assert.is(admittedCount(again), 0, 'the long window still counts all four');
    assert.is(again[0]?.retryAfterS, 3);
    assert.is(admittedCount(await burst(short, ident, 3)), 2, 'the short window counts only its own one');
    assert.is(admittedCount(await burst(long, ident, 1)), 0);
  },
);

consume('a smaller limit shrinks the ring only by entries already outside the window', async () => {
  const ident = 'ip:10.0.9.1';
  const key = keyOf(rule('4/s'), ident);
  assert.is(admittedCount(await burst(rule('4/s'), ident, 4)), 4);
  await sleep(1050);
  assert.is(admittedCount(await burst(rule('2/s'), ident, 3)), 2);
  assert.is(await redis.strlen(key), logBytes(2));
  assert.is(admittedCount(await burst(rule('4/s'), ident, 3)), 2, 'the two inside still count');
});

consume('a value that is not a ring is replaced; a wrong type is an error, not a decision', async () => {
  const r = rule('3/min');
  await redis.set(keyOf(r, 'ip:10.0.11.1'), 'not a ring');
  assert.equal(
    (await burst(r, 'ip:10.0.11.1', 4)).map((d) => d.allowed),
    [true, true, true, false],
  );
  assert.is(await redis.strlen(keyOf(r, 'ip:10.0.11.1')), logBytes(3));
  await redis.hset(keyOf(r, 'ip:10.0.11.2'), 'a', '1');
  try {
    await hit(r, 'ip:10.0.11.2');
    assert.unreachable('a hash at the key must fail the call');
  } catch (error) {
    assert.match(String(error), /WRONGTYPE/);
  }
});

/** Counts the commands a connection sends, by name. */
function countCommands(connection: Redis): string[] {
  const sent: string[] = [];
  const send = connection.sendCommand.bind(connection);
  connection.sendCommand = (command, ...rest) => {
    sent.push(command.name);
    return send(command, ...rest);
  };
  return sent;
}

consume('requests arriving together share script calls and are decided exactly as one by one', async () => {
  const connection = connect();
  const sent = countCommands(connection);
  const own = createThrottler({ redis: connection, keyPrefix: PREFIX });
  await own.consume([{ rule: rule('5/min'), ident: 'ip:10.0.12.9' }]);
  sent.length = 0;
  const r = rule('37/min');
  const decisions = await Promise.all(Array.from({ length: 300 }, () => hit(r, 'ip:10.0.12.1', own)));
  assert.ok(sent.length <= 4, `300 requests took ${sent.length} script calls`);
  assert.ok(sent.every((name) => name === 'evalsha'));
  const admitted = decisions.filter((d) => d.allowed);
  assert.is(admitted.length, 37);
  assert.equal(
    decisions.slice(0, 37).map((d) => d.remaining),
    Array.from({ length: 37 }, (_, i) => 36 - i),
    'in arrival order',
  );
  assert.ok(decisions.slice(37).every((d) => !d.allowed && d.retryAfterS === 60));
  assert.is((await readStamps(keyOf(r, 'ip:10.0.12.1'))).length, 37);
});

consume(
  'in a shared call, several-scope requests stay all-or-nothing and a broken key fails only its request',
  async () => {
    const user = rule('3/min', 'user');
    const reports = rule('1/min', 'reports');
    await redis.hset(keyOf(user, 'user:7'), 'a', '1');
    const both = (ident: string) =>
      throttler.consume([
        { rule: user, ident },
        { rule: reports, ident },
      ]);
    const alone = (ident: string) => throttler.consume([{ rule: user, ident }]);
    const settled = await Promise.allSettled([
      both('user:5'),
      alone('user:5'),
      both('user:5'),
      both('user:7'),
      alone('user:5'),
      alone('user:5'),
      alone('user:6'),
    ]);
    const outcome = settled.map((s) => (s.status === 'rejected' ? 'error' : s.value.map((d) => d.allowed)));
    assert.equal(
      outcome,
      [[true, true], [true], [true, false], 'error', [true], [false], [true]],
      'the refused pair recorded nothing',
    );
    assert.match(String((settled[3] as PromiseRejectedResult).reason), /WRONGTYPE/);
    assert.equal(
      [(await readStamps(keyOf(user, 'user:5'))).length, (await readStamps(keyOf(reports, 'user:5'))).length],
      [3, 1],
    );
  },
);

consume('a call naming more distinct rules than one byte can index is split, and stays exact', async () => {
  const rules = Array.from({ length: 300 }, (_, i) => rule(`${1 + (i % 3)}/min`, `s${i}`));
  const decisions = await Promise.all([0, 1, 2].flatMap(() => rules.map((r) => hit(r, 'ip:10.0.13.1'))));
  rules.forEach((r, i) => {
    const mine = [0, 1, 2].map((round) => decisions[300 * round + i]?.allowed);
    assert.equal(mine, [true, r.rate.limit >= 2, r.rate.limit >= 3], `scope ${r.scope}`);
  });
});

consume('one round trip per request, the script sent by SHA', async () => {
  const connection = connect();
  const sent = countCommands(connection);
  const own = createThrottler({ redis: connection, keyPrefix: PREFIX });
  await own.consume([
    { rule: rule('5/min'), ident: 'ip:10.0.10.1' },
    { rule: rule('9/min', 'other'), ident: 'ip:10.0.10.1' },
  ]);
  sent.length = 0;
  await own.consume([
    { rule: rule('5/min'), ident: 'ip:10.0.10.1' },
    { rule: rule('9/min', 'other'), ident: 'ip:10.0.10.1' },
  ]);
  assert.equal(sent, ['evalsha']);
  assert.equal(await own.consume([]), []);
  assert.throws(() => keyOf(rule('5/min'), 'ip:{x}'), /braces/);
  const twice = { rule: rule('5/min'), ident: 'ip:10.0.10.2' };
  await own.consume([twice, twice]).then(
    () => assert.unreachable('repeated check'),
    (error: Error) => assert.match(error.message, /repeat/),
  );
});

consume.run();
