// Load: all (2,000 requests must finish within the 10 s its Retry-After assertion allows)
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createThrottler, throttleKey } from '../../../src/throttle/consume.js';
import type { Decision, Throttler } from '../../../src/throttle/throttler.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';
import { startRedis } from '../../../src/embedded/redis.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';
import { privateRedisOptions } from '../../helpers/private-redis.js';

// src/throttle/refusals.ts against a private redis-server that nothing else uses, so its own
// counters tell what a flood of refused requests costs: a client Redis has refused is refused in
// process until its window frees, then admitted again exactly at its budget, by every process.

const PREFIX = 'test:throttle-refusals:';
let redis: Awaited<ReturnType<typeof startRedis>>;
let admin: Redis;
let app: TestApp;
const connections: Redis[] = [];

/** Commands Redis has run (those inside scripts included), INFO itself left out. */
async function commandsRun(): Promise<number> {
  return Object.values(await commandsByName()).reduce((sum, calls) => sum + calls, 0);
}

async function commandsByName(): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const [, name, count] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (name !== 'info') calls[name!] = Number(count);
  }
  return calls;
}

/**
 * The commands the app sends on its own over `ms` with no request arriving (its census, the published head's
 * reads...): on a loaded host the hammering below takes longer, and these come with the time, not the requests.
 */
async function backgroundCommands(ms: number): Promise<number> {
  const before = await commandsRun();
  await sleep(ms);
  return (await commandsRun()) - before;
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  return sumOf(parseMetrics(await app.deps.metrics.registry.metrics()), name, labels);
}

const get = (ip: string): Promise<TestResponse> =>
  request(app.base, 'GET', '/api/tasks/', { headers: { 'X-Forwarded-For': ip } });

/** The 429 of docs/architecture.md "Throttling" for anon 5/min: Retry-After, detail and RateLimit fields agree. */
function assertThrottled(response: TestResponse, label: string): number {
  assert.is(response.status, 429, `${label}: ${response.text}`);
  const seconds = Number(response.headers.get('retry-after'));
  assert.ok(Number.isInteger(seconds) && seconds >= 1 && seconds <= 60, `${label}: Retry-After ${seconds}`);
  const unit = seconds === 1 ? 'second' : 'seconds';
  assert.equal(response.body, { detail: `Request was throttled. Expected available in ${seconds} ${unit}.` }, label);
  assert.is(response.headers.get('ratelimit-policy'), '"anon";q=5;w=60', label);
  assert.is(response.headers.get('ratelimit'), `"anon";r=0;t=${seconds}`, label);
  return seconds;
}

const rule = (rate: string, scope = 'anon'): ScopeRule => ({ scope, rate: parseRate(rate), keyedBy: 'ip' });

/** The admission stamps (µs of Redis's clock) of a log, oldest first (the layout of ring-script.ts). */
async function readStamps(key: string): Promise<number[]> {
  const bytes = await admin.getBuffer(key);
  if (!bytes) return [];
  const head = bytes.readUInt32LE(4);
  const size = (bytes.length - 40) / 8;
  return Array.from({ length: size }, (_, j) => bytes.readDoubleLE(40 + 8 * ((head + j) % size)));
}

const test = suite('refused in process until the window frees (private redis-server)');

test.before(async () => {
  redis = await startRedis(await privateRedisOptions('throttle-refusals'));
  admin = new Redis(redis.url);
  app = await startTestApp(
    { REDIS_URL: redis.url, THROTTLE_ANON: '5/min', TRUST_PROXY_HOPS: '1' },
    'throttle-refusals',
  );
});

test.after(async () => {
  await app?.close();
  await Promise.all(connections.map((connection) => connection.quit()));
  admin?.disconnect();
  await redis?.stop();
});

test('a client hammering past its limit over HTTP: 2,000 refusals cost Redis at most 20 commands, each the full 429', async () => {
  const ip = '198.51.100.7';
  for (let i = 0; i < 5; i++) assert.is((await get(ip)).status, 200, `admission ${i + 1}`);
  const first = await get(ip);
  const firstWait = assertThrottled(first, 'refused by Redis');
  const throttledBefore = await metric('paceline_throttle_decisions_total', { scope: 'anon', decision: 'throttled' });
  const idleMs = 2_000;
  const idle = await backgroundCommands(idleMs);
  const before = await commandsByName();
  const started = performance.now();
  const waits: number[] = [];
  // 20 connections' worth at once, as a client at full speed sends.
  for (let round = 0; round < 100; round++) {
    for (const response of await Promise.all(Array.from({ length: 20 }, () => get(ip))))
      waits.push(assertThrottled(response, 'refused in process'));
  }
  const elapsed = performance.now() - started;
  const after = await commandsByName();
  const sent = Object.entries(after)
    .map(([name, calls]) => [name, calls - (before[name] ?? 0)] as const)
    .filter(([, calls]) => calls > 0);
  const commands = sent.reduce((sum, [, calls]) => sum + calls, 0);
  const background = Math.ceil((idle / idleMs) * elapsed);
  assert.ok(
    commands - background <= 20,
    `${commands} Redis commands (${sent.map(([name, calls]) => `${name} ${calls}`).join(', ')}) in ` +
      `${Math.round(elapsed)} ms for 2,000 refused requests, of which about ${background} the app's own ` +
      `(${idle} in ${idleMs} ms with no request)`,
  );
  assert.ok(
    waits.every((wait) => wait <= firstWait && wait >= firstWait - 10),
    `Retry-After counts down from Redis's ${firstWait}: ${Math.min(...waits)}–${Math.max(...waits)}`,
  );
  assert.is(
    await metric('paceline_throttle_decisions_total', { scope: 'anon', decision: 'throttled' }),
    throttledBefore + 2_000,
    'each counted throttled',
  );
  assert.is(
    (await get('198.51.100.8')).headers.get('ratelimit'),
    '"anon";r=4;t=60',
    'another client is still asked of Redis',
  );
  assert.is(
    (await readStamps(throttleKey(`${app.redisPrefix}`, { rule: rule('5/min'), ident: `ip:${ip}` }))).length,
    5,
    'nothing recorded',
  );
});

/**
 * Two processes' throttlers (own connections, own refusals) hammer one client in turn for
 * `seconds`, a request every millisecond or so: their decisions, the Redis stamp of each
 * admission (read from the log after it: the newest entry), the script calls they cost, and the
 * slowest answer or pause between two requests (ms): a millisecond or two, unless the host stalled.
 */
async function hammer(
  r: ScopeRule,
  ident: string,
  seconds: number,
): Promise<{ decisions: Decision[]; stamps: number[]; calls: number; slowest: number }> {
  const throttlers: Throttler[] = [0, 1].map(() => {
    const connection = new Redis(redis.url);
    connections.push(connection);
    return createThrottler({ redis: connection, keyPrefix: PREFIX, timeoutMs: 250 });
  });
  // EVALSHA, or EVAL when ioredis sends the script's body instead.
  const scriptCalls = async () =>
    [...(await admin.info('commandstats')).matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
  // The app's count of distinct refused clients (an EVAL a second after the earlier tests' refusals) is no part of
  // it, nor is its census of web workers (a script call every 2 s, docs/throttling.md "When Redis is unreachable").
  app.deps.watch?.close();
  await app.deps.alone?.census.close();
  const callsBefore = await scriptCalls();
  const decisions: Decision[] = [];
  const stamps: number[] = [];
  let slowest = 0;
  const end = performance.now() + seconds * 1000;
  let previousAnswered = performance.now();
  for (let i = 0; performance.now() < end; i++) {
    const sent = performance.now();
    const decision = (await (throttlers[i % 2] as Throttler).consume([{ rule: r, ident }]))[0] as Decision;
    const answered = performance.now();
    slowest = Math.max(slowest, Math.round(answered - sent), Math.round(sent - previousAnswered) - 1);
    decisions.push(decision);
    if (decision.allowed) stamps.push((await readStamps(throttleKey(PREFIX, { rule: r, ident }))).at(-1) as number);
    previousAnswered = performance.now();
    await sleep(1);
  }
  return { decisions, stamps, calls: (await scriptCalls()) - callsBefore, slowest };
}

test('once the window frees the client is admitted again at exactly its budget: none early, none refused late', async () => {
  const r = rule('3/1s');
  const { decisions, stamps, calls, slowest } = await hammer(r, 'ip:198.51.100.20', 3.5);
  const admitted = stamps.length;
  assert.ok(admitted >= 12 && admitted <= 13, `${admitted} admitted in 3.5 s of 3/1s`);
  for (let i = 3; i < stamps.length; i++) {
    // The i-th admission waits for the (i-3)-th to leave the window: never sooner (exact), and
    // not much later (refused here after the window freed only by the clock allowance). A host too
    // busy to send, or to read Redis's answer, for a while (a refusal remembered from an answer read late is
    // remembered as much too long) delays it by as long, which is no refusal: the slowest such wait is allowed, and named.
    const late = ((stamps[i] as number) - (stamps[i - 3] as number) - 1_000_000) / 1000;
    assert.ok(late >= 0, `admission ${i + 1} came ${-late} ms early`);
    assert.ok(
      late <= 50 + slowest,
      `admission ${i + 1} came ${late} ms after its window freed (the host's slowest answer or pause: ${slowest} ms)`,
    );
  }
  const local = decisions.filter((d) => d.local).length;
  assert.ok(
    calls <= 4 * admitted + 10,
    `${calls} script calls for ${admitted} admissions over ${decisions.length} requests (${local} refused in process)`,
  );
  assert.is(local + calls, decisions.length, 'each request either refused in process or sent alone');
});

test('a refusal held by one process is not a refusal for another rule over the same log', async () => {
  const ident = 'ip:198.51.100.30';
  const connection = new Redis(redis.url);
  connections.push(connection);
  const throttler = createThrottler({ redis: connection, keyPrefix: PREFIX });
  const hit = async (text: string) => ((await throttler.consume([{ rule: rule(text), ident }]))[0] as Decision).allowed;
  for (let i = 0; i < 3; i++) assert.ok(await hit('3/min'));
  assert.is(await hit('3/min'), false);
  assert.is(await hit('3/min'), false);
  assert.ok(await hit('4/min'), 'a raised limit asks Redis, which admits one more');
  assert.is(await hit('4/min'), false);
  assert.is((await readStamps(throttleKey(PREFIX, { rule: rule('3/min'), ident }))).length, 4);
});

test.run();
