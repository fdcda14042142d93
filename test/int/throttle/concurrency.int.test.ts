import { setTimeout as sleep } from 'node:timers/promises';
import hashSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { throttleKey } from '../../../src/throttle/consume.js';
import {
  concurrencyKey,
  createConcurrencyLimiter,
  type ConcurrencyLimiter,
  type Slot,
} from '../../../src/throttle/concurrency.js';
import { parseRate } from '../../../src/throttle/rate.js';
import { startTcpRelay } from '../../helpers/tcp-relay.js';

// docs/throttling.md "Concurrency limits": concurrency.lua admits a request among its client's
// requests in progress atomically, whichever process asks; a released slot is free again at once,
// and an entry nobody releases (its process was killed) stops counting after the expiry bound.

const REDIS_URL = process.env.TEST_REDIS_URL;
if (!REDIS_URL) throw new Error('TEST_REDIS_URL is not set: the test command starts Redis and sets it');

const PREFIX = `test:throttle-concurrency:${process.pid}:${Date.now()}:`;
const PROCESSES = 6;
const connections: Redis[] = [];
let limiters: ConcurrencyLimiter[] = [];

const test = suite('requests in progress, counted in Redis');

/** One limiter per connection, as each web worker of each host has its own. */
function limitersWith(expiryMs: number): ConcurrencyLimiter[] {
  const timeoutMs = 5_000;
  return connections.map((redis) => createConcurrencyLimiter({ redis, keyPrefix: PREFIX, expiryMs, timeoutMs }));
}

/** Redis's clock in ms, the clock the script stamps entries with. */
async function redisNowMs(): Promise<number> {
  const [seconds, micros] = await connections[0]!.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

test.before(() => {
  for (let i = 0; i < PROCESSES; i += 1) connections.push(new Redis(REDIS_URL, { maxRetriesPerRequest: 1 }));
  limiters = limitersWith(60_000);
});

test.after(() => {
  for (const connection of connections) connection.disconnect();
});

test('many acquires of one client at once, from six connections: exactly N admitted', async () => {
  const limit = 7;
  const request = { scope: 'user', ident: 'user:1', limit };
  const slots = await Promise.all(Array.from({ length: 240 }, (_, i) => limiters[i % PROCESSES]!.acquire(request)));
  const admitted = slots.filter((slot) => slot.admitted);
  assert.is(admitted.length, limit);
  assert.equal(
    admitted.map((slot) => slot.remaining).sort(),
    [0, 1, 2, 3, 4, 5, 6],
    'each admission saw the ones before it',
  );
  assert.ok(slots.every((slot) => slot.admitted || slot.remaining === 0));
  const key = concurrencyKey(PREFIX, 'user', 'user:1');
  assert.is(await connections[0]!.zcard(key), limit, 'only the admitted are recorded');
  assert.is(
    (await limiters[0]!.acquire({ scope: 'user', ident: 'user:2', limit })).admitted,
    true,
    'another client has its own',
  );

  // Released from another process than the one that took it: each release frees exactly one slot.
  await Promise.all(admitted.slice(0, 3).map((slot) => slot.release()));
  const again = await Promise.all(Array.from({ length: 20 }, (_, i) => limiters[i % PROCESSES]!.acquire(request)));
  assert.is(again.filter((slot) => slot.admitted).length, 3);
  await Promise.all([...admitted, ...again].map((slot) => slot.release()));
  assert.is(await connections[0]!.exists(key), 0, 'the key goes with its last entry');
});

test('entries nobody releases stop counting once the expiry bound has passed, and no sooner', async () => {
  const expiryMs = 1_500;
  const short = limitersWith(expiryMs);
  const request = { scope: 'exports', ident: 'ip:203.0.113.5', limit: 2 };
  const key = concurrencyKey(PREFIX, request.scope, request.ident);
  const held = [await short[0]!.acquire(request), await short[1]!.acquire(request)];
  assert.ok(held.every((slot) => slot.admitted));
  // [member, score] pairs (RESP3) or a flat list (RESP2).
  const listed = (await connections[0]!.call('ZRANGE', key, '0', '-1', 'WITHSCORES')) as unknown[];
  const scores = listed
    .flat()
    .filter((_, i) => i % 2 === 1)
    .map(Number);
  const expires = Math.min(...scores);
  const pttl = await connections[0]!.pttl(key);
  assert.ok(pttl > 0 && pttl <= expiryMs, `the key expires with its entries: ${pttl} ms`);

  let admitted: Slot | undefined;
  let refusedInTime = 0;
  for (let i = 0; i < 100 && !admitted; i += 1) {
    const before = await redisNowMs();
    const slot = await short[2]!.acquire(request);
    const after = await redisNowMs();
    // The script's clock lies between `before` and `after`: until the entries' moment they count.
    if (after < expires) {
      assert.is(slot.admitted, false, 'a held slot counts until its entry expires');
      refusedInTime += 1;
    }
    if (slot.admitted) {
      assert.ok(before >= expires - 1, 'admitted only once the entries had expired');
      admitted = slot;
    } else await sleep(100);
  }
  assert.ok(refusedInTime >= 1, 'refused at least once while the entries counted');
  assert.ok(admitted, 'admitted once the entries had expired');
  assert.is(await connections[0]!.zcard(key), 1, 'the expired entries are gone, the new one holds');
  await admitted.release();
});

test("a client's requests in progress live in the Redis Cluster slot of its rate logs", () => {
  for (const ident of ['user:42', 'ip:198.51.100.7', 'ip:2001:db8:1:2::']) {
    const rule = { scope: 'user', rate: parseRate('100/min'), keyedBy: 'user' as const };
    assert.is(
      hashSlot(concurrencyKey('paceline:', 'user', ident)),
      hashSlot(throttleKey('paceline:', { rule, ident })),
    );
  }
  assert.throws(() => concurrencyKey('paceline:', 'user', 'ip:{x}'), /braces/);
});

test('Redis slower than the timeout: the acquire rejects, and the call Redis runs late leaves no entry', async () => {
  const relay = await startTcpRelay(REDIS_URL);
  const relayed = new Redis(relay.through(REDIS_URL), { maxRetriesPerRequest: 1 });
  try {
    await relayed.ping();
    const slow = createConcurrencyLimiter({ redis: relayed, keyPrefix: PREFIX, expiryMs: 60_000, timeoutMs: 50 });
    const request = { scope: 'user', ident: 'user:3', limit: 1 };
    relay.freeze();
    const outcome = await slow.acquire(request).then(
      () => 'answered',
      (error: Error) => error.message,
    );
    assert.match(outcome, /did not answer within 50 ms/);
    relay.thaw();
    // Both the late acquire and the removal sent after it have run once this connection answers again.
    await relayed.ping();
    assert.is(await connections[0]!.zcard(concurrencyKey(PREFIX, request.scope, request.ident)), 0);
    assert.is((await limiters[0]!.acquire(request)).admitted, true, 'the slot is free');
  } finally {
    relayed.disconnect();
    await relay.close();
  }
});

test.run();
