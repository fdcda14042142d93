import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startRedis, type RedisOptions } from '../../../src/embedded/redis.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';
import { privateRedisOptions } from '../../helpers/private-redis.js';
import { isAlive } from '../../../src/cluster/processes.js';

// docs/architecture.md "Throttling", Redis trouble: two apps on a private redis-server, one per THROTTLE_FAILURE_MODE.
// The server is SIGKILLed, then frozen with SIGSTOP (slower than THROTTLE_TIMEOUT_MS): open
// admits, closed answers 503 + Retry-After; every check is counted as store_error, each burst is
// logged once, no request hangs, and throttling comes back by itself with the server.

interface Mode {
  name: 'open' | 'closed';
  app: TestApp;
  logs: Array<{ level: number; msg: string; failedChecks?: number }>;
}

const test = suite('throttle store failures (private redis-server, THROTTLE_TIMEOUT_MS=100)');
let redisOptions: RedisOptions;
let redis: Awaited<ReturnType<typeof startRedis>>;
const modes: Mode[] = [];
let nextClient = 0;

/** `work`, which must settle within `ms` (the point is that it returns, not how fast). */
async function bounded<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not return within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, hung]);
  } finally {
    clearTimeout(timer);
  }
}

function get(mode: Mode, path = '/api/tasks/', ip = '192.0.2.1'): Promise<TestResponse> {
  return bounded(
    request(mode.app.base, 'GET', path, { headers: { 'X-Forwarded-For': ip } }),
    5_000,
    `${mode.name}: GET ${path}`,
  );
}

async function storeErrors(mode: Mode): Promise<number> {
  const samples = parseMetrics(await mode.app.deps.metrics.registry.metrics());
  return sumOf(samples, 'paceline_throttle_decisions_total', { decision: 'store_error' });
}

const logged = (mode: Mode, msg: string) => mode.logs.filter((line) => line.msg === msg);
const UNAVAILABLE = 'throttle store unavailable; applying THROTTLE_FAILURE_MODE';
const RECOVERED = 'throttle store recovered';

/**
 * While the store is failing: `count` requests per mode, over several routes (one burst is one
 * burst however many routes it hits), get the mode's answer, each counted.
 */
async function assertFailureMode(count: number): Promise<void> {
  const paths = ['/api/tasks/', '/api/rate-limits/', '/api/tasks/1/'];
  for (const mode of modes) {
    const before = await storeErrors(mode);
    for (let i = 0; i < count; i += 1) {
      const response = await get(mode, paths[i % paths.length]);
      assert.is(response.headers.get('ratelimit'), null, `${mode.name}: no RateLimit fields without a decision`);
      if (mode.name === 'open') {
        assert.ok([200, 404].includes(response.status), `open admits: ${response.status} ${response.text}`);
        continue;
      }
      assert.is(response.status, 503, `closed refuses: ${response.text}`);
      assert.match(response.headers.get('retry-after') ?? '', /^[1-9]\d*$/, 'Retry-After in whole seconds ≥ 1');
      assert.ok(response.headers.get('content-type')?.startsWith('application/json'));
      assert.type(response.body.detail, 'string');
    }
    assert.is(await storeErrors(mode), before + count, `${mode.name}: store_error counted per check`);
    assert.is((await get(mode, '/healthz')).status, 200, `${mode.name}: /healthz still answers`);
  }
}

/** Polls until both apps throttle again (RateLimit fields back), then checks the limit holds. */
async function assertRecovered(): Promise<void> {
  for (const mode of modes) {
    const deadline = Date.now() + 20_000;
    while ((await get(mode, '/api/tasks/', '192.0.2.250')).headers.get('ratelimit') === null) {
      if (Date.now() > deadline) throw new Error(`${mode.name}: throttling did not come back within 20 s`);
      await sleep(100);
    }
    // A check that outlives THROTTLE_TIMEOUT_MS on a loaded host is a store_error (counted), not a decision, and
    // may have been counted in Redis all the same: the client starts over from a fresh address (at most five).
    for (let attempt = 1; ; attempt += 1) {
      const ip = `198.18.0.${(nextClient += 1)}`;
      const before = await storeErrors(mode);
      const answers = [];
      for (let i = 0; i < 4; i += 1) answers.push(await get(mode, '/api/tasks/', ip));
      const late = (await storeErrors(mode)) - before;
      if (late > 0 && attempt < 5) {
        console.log(`# ${mode.name}: ${late} of 4 checks after recovery outlived THROTTLE_TIMEOUT_MS; again`);
        continue;
      }
      for (const [i, admitted] of answers.slice(0, 3).entries()) {
        assert.is(admitted.status, 200, `${mode.name} after recovery #${i + 1}`);
        assert.is(admitted.headers.get('ratelimit'), `"anon";r=${2 - i};t=60`);
      }
      assert.is(answers[3]!.status, 429, `${mode.name}: the limit holds again`);
      break;
    }
  }
}

test.before(async () => {
  redisOptions = await privateRedisOptions('throttle-failure');
  redis = await startRedis(redisOptions);
  for (const name of ['open', 'closed'] as const) {
    const logs: Mode['logs'] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
    const env = {
      REDIS_URL: redis.url,
      THROTTLE_FAILURE_MODE: name,
      THROTTLE_TIMEOUT_MS: '100',
      THROTTLE_ANON: '3/min',
      TRUST_PROXY_HOPS: '1',
    };
    modes.push({ name, logs, app: await startTestApp(env, `throttle-${name}`, { logger }) });
  }
});

test.after(async () => {
  if (redis && isAlive(redis.pid)) process.kill(redis.pid, 'SIGCONT');
  await Promise.allSettled(modes.map((mode) => mode.app.close()));
  await redis?.stop();
});

test('redis-server SIGKILLed: open admits, closed answers 503; counted, logged once, recovered after restart', async () => {
  for (const mode of modes)
    assert.is((await get(mode)).headers.get('ratelimit'), '"anon";r=2;t=60', `${mode.name} before`);
  process.kill(redis.pid, 'SIGKILL');
  while (isAlive(redis.pid)) await sleep(20);

  await assertFailureMode(5);
  for (const mode of modes) assert.is(logged(mode, UNAVAILABLE).length, 1, `${mode.name}: one log line for the burst`);

  redis = await startRedis(redisOptions);
  await assertRecovered();
  for (const mode of modes) {
    const recovered = logged(mode, RECOVERED);
    assert.is(recovered.length, 1, `${mode.name}: recovery logged once`);
    assert.ok((recovered[0]?.failedChecks ?? 0) >= 5, `${mode.name}: the log says how many checks failed`);
  }
});

test('redis-server frozen (SIGSTOP): checks give up after THROTTLE_TIMEOUT_MS under the same modes; SIGCONT recovers', async () => {
  process.kill(redis.pid, 'SIGSTOP');
  try {
    await assertFailureMode(3);
    // Many at once: the ones queued behind calls already waiting on Redis get their answer too.
    for (const mode of modes) {
      const before = await storeErrors(mode);
      const statuses = (
        await Promise.all(Array.from({ length: 12 }, (_, i) => get(mode, '/api/tasks/', `192.0.2.${10 + i}`)))
      ).map((r) => r.status);
      assert.ok(
        statuses.every((status) => (mode.name === 'open' ? status === 200 : status === 503)),
        `${mode.name}: ${statuses.join(' ')}`,
      );
      assert.is(await storeErrors(mode), before + 12, `${mode.name}: each counted`);
    }
  } finally {
    process.kill(redis.pid, 'SIGCONT');
  }
  for (const mode of modes)
    assert.is(logged(mode, UNAVAILABLE).length, 2, `${mode.name}: one more line for the second burst`);
  await assertRecovered();
  for (const mode of modes) assert.is(logged(mode, RECOVERED).length, 2);
  // The calls sent while Redis was frozen ran when it woke, after their callers had answered
  // without them: they recorded nothing, so a client refused with 503 (closed) is not charged for
  // it, and one let through unchecked (open) was not counted either.
  for (const mode of modes) {
    const next = await get(mode, '/api/tasks/', '192.0.2.10');
    assert.equal(
      [next.status, next.headers.get('ratelimit')],
      [200, '"anon";r=2;t=60'],
      `${mode.name}: the whole budget is left`,
    );
  }
});

test('an app whose Redis is gone still closes: the client stops reconnecting, nothing keeps the process alive', async () => {
  const app = await startTestApp({ REDIS_URL: redis.url, THROTTLE_FAILURE_MODE: 'open' }, 'throttle-close');
  process.kill(redis.pid, 'SIGKILL');
  while (isAlive(redis.pid)) await sleep(20);
  assert.is((await get({ name: 'open', app, logs: [] })).status, 200, 'open admits');
  await bounded(app.close(), 10_000, 'close()');
  let attempts = 0;
  app.deps.redis.on('reconnecting', () => (attempts += 1));
  await sleep(1_200); // longer than the longest reconnect back-off (1 s)
  assert.is(attempts, 0, 'no reconnect attempts after close()');
});

test('a command sent just before Redis died is answered when the app closes, not held until its timeout', async () => {
  redis = await startRedis(redisOptions);
  const app = await startTestApp({ REDIS_URL: redis.url, THROTTLE_FAILURE_MODE: 'open' }, 'throttle-held');
  process.kill(redis.pid, 'SIGSTOP');
  // Written to a live connection, unanswered: the client keeps it to send again once reconnected.
  const pending = app.deps.redis.get('held').then(
    () => 'answered',
    (error: Error) => error.message,
  );
  // Not events.once: the reset is also an 'error' event, which would reject it.
  const reconnecting = new Promise((resolve) => app.deps.redis.once('reconnecting', resolve));
  process.kill(redis.pid, 'SIGKILL');
  await bounded(reconnecting, 10_000, 'the client noticing the connection closed');
  await bounded(app.close(), 10_000, 'close()');
  // Its command timeout is 20 s (THROTTLE_TIMEOUT_MS × 10): a timer that long would hold the process.
  assert.is(await bounded(pending, 1_000, 'the command sent before Redis died'), 'Connection is closed.');
});

test.run();
