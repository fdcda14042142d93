import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createThrottler, throttleKey } from '../../../src/throttle/consume.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { newRedisPassword, startRedis } from '../../../src/embedded/redis.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';

// Shadow rules (docs/throttling.md "Shadow rules") and the caller's own budget (docs/throttling.md
// "Your own budget") against a private redis-server, so its command counters are this test's alone.

const TMP = process.env.TEST_TMP_DIR;
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

let redis: Awaited<ReturnType<typeof startRedis>>;
let admin: Redis;
let app: TestApp;
const lines: Array<Record<string, unknown>> = [];

const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
    done();
  },
});

/**
 * The distinct count's own commands (docs/throttling.md "How many"): a script sent with EVAL at most once a second,
 * whatever the requests do, left out of what requests cost. The throttle's script is sent by SHA.
 */
const DISTINCT_COUNT = new Set(['eval', 'pfadd', 'pexpire', 'pfcount']);

/** Commands Redis has run for requests (those inside scripts included), INFO itself left out. */
async function commandsRun(): Promise<{ total: number; scripts: number }> {
  let total = 0;
  let scripts = 0;
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (name !== 'info' && !DISTINCT_COUNT.has(name!)) total += Number(calls);
    if (name === 'evalsha') scripts += Number(calls);
  }
  return { total, scripts };
}

async function decisions(scope: string): Promise<{ allowed: number; throttled: number; shadow_refused: number }> {
  const samples = parseMetrics(await app.deps.metrics.registry.metrics());
  const count = (decision: string) => sumOf(samples, 'paceline_throttle_decisions_total', { scope, decision });
  return {
    allowed: count('allowed'),
    throttled: count('throttled'),
    shadow_refused: count('shadow_refused'),
  };
}

const get = (ip: string, path = '/api/tasks/', token?: string): Promise<TestResponse> =>
  request(app.base, 'GET', path, { headers: { 'X-Forwarded-For': ip }, token });

/** The admission stamps of a log (the layout of ring.lua): one per request its rule admitted. */
async function logSize(key: string): Promise<number> {
  const bytes = await admin.getBuffer(key);
  return bytes ? (bytes.length - 40) / 8 : 0;
}

const test = suite('shadow rules: anon=20/min enforced, anon=10/min in shadow, reports wholly in shadow');

test.before(async () => {
  redis = await startRedis({
    dataDir: join(TMP, 'redis-throttle-shadow'),
    port: await findFreePort(),
    persistent: false,
    password: newRedisPassword(),
    log: () => {},
  });
  admin = new Redis(redis.url);
  app = await startTestApp(
    {
      REDIS_URL: redis.url,
      THROTTLE_ANON: '20/min',
      THROTTLE_SHADOW_RATES: 'anon=10/min',
      THROTTLE_REPORTS: '2/min',
      THROTTLE_SHADOW_SCOPES: 'reports',
      TRUST_PROXY_HOPS: '1',
      LOG_LEVEL: 'info',
    },
    'throttle-shadow',
    { logger: pino({ level: 'info' }, sink) },
  );
  // The census of web workers is no request's cost: a script call every 2 s (docs/throttling.md "When Redis is
  // unreachable").
  await app.deps.alone?.census.close();
  // Nor is the reading of plans and overrides, none of which this file gives: an epoch read every 250 ms
  // (docs/throttling.md "Plans and overrides").
  app.deps.limits?.close();
});

test.after(async () => {
  await app?.close();
  admin?.disconnect();
  await redis?.stop();
});

test('30 requests from one client: exactly 20 admitted as without the shadow rule, 10 shadow refusals counted and logged', async () => {
  const ip = '198.51.100.7';
  const before = await decisions('anon');
  const responses: TestResponse[] = [];
  for (let i = 0; i < 30; i++) responses.push(await get(ip));
  assert.equal(
    responses.map((r) => r.status),
    [...Array(20).fill(200), ...Array(10).fill(429)],
  );
  for (const [i, response] of responses.entries()) {
    assert.is(response.headers.get('ratelimit-policy'), '"anon";q=20;w=60', 'the enforced rule only');
    assert.match(response.headers.get('ratelimit') ?? '', new RegExp(`^"anon";r=${Math.max(0, 19 - i)};t=\\d+$`));
  }
  const after = await decisions('anon');
  assert.equal(
    { allowed: after.allowed - before.allowed, throttled: after.throttled - before.throttled },
    { allowed: 20, throttled: 10 },
  );
  assert.is(after.shadow_refused - before.shadow_refused, 10, 'requests 11 to 20: admitted, refused by 10/min');
  const key = throttleKey(app.redisPrefix, {
    rule: { scope: 'anon', rate: parseRate('20/min'), keyedBy: 'ip' },
    ident: `ip:${ip}`,
  });
  assert.is(await logSize(key), 20, 'the enforced log');
  assert.is(await logSize(`${key}:shadow`), 10, 'the shadow log: what 10/min alone would have admitted');
  const logged = lines.find((line) => line.msg === 'shadow rule would refuse' && line.client === `ip:${ip}`);
  assert.equal(logged && { scope: logged.scope, shadowRate: logged.shadowRate }, {
    scope: 'anon',
    shadowRate: '10/min',
  });
  // The who view lists the client twice: requests 11–20 as shadow refusals, 21–30 as the enforced rule's.
  const who = new Map(app.deps.watch!.report().map(({ scope, clients }) => [scope, clients]));
  const counted = (scope: string) => who.get(scope)?.map(({ ident, count }) => ({ ident, count }));
  assert.equal(counted('anon:shadow'), [{ ident: `ip:${ip}`, count: 10 }]);
  assert.equal(counted('anon'), [{ ident: `ip:${ip}`, count: 10 }]);
});

test('refusals of the enforced rule still cost Redis nothing: 200 more of that client, no script call', async () => {
  const before = await commandsRun();
  const counted = await decisions('anon');
  for (let round = 0; round < 10; round++) {
    const responses = await Promise.all(Array.from({ length: 20 }, () => get('198.51.100.7')));
    assert.ok(responses.every((r) => r.status === 429));
  }
  const after = await commandsRun();
  assert.is(after.scripts - before.scripts, 0, 'no throttle script call');
  assert.ok(after.total - before.total <= 5, `${after.total - before.total} Redis commands for 200 refusals`);
  assert.is((await decisions('anon')).shadow_refused, counted.shadow_refused, 'a refused request is not a shadow one');
});

test('a scope wholly in shadow never refuses, has no RateLimit fields, and counts what it would refuse', async () => {
  const token = await app.login('shadowed');
  const before = await decisions('reports');
  const body = { from: '2026-11-01', to: '2026-11-01' };
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) {
    const response = await request(app.base, 'POST', '/api/reports/', { token, body });
    statuses.push(response.status);
    assert.is(response.headers.get('ratelimit'), null);
  }
  assert.ok(
    statuses.every((status) => status !== 429),
    `never refused: ${statuses.join(', ')}`,
  );
  const after = await decisions('reports');
  assert.equal(
    { allowed: after.allowed - before.allowed, shadow_refused: after.shadow_refused - before.shadow_refused },
    { allowed: 5, shadow_refused: 3 },
  );
});

test('GET /api/rate-limits/ tells an anonymous caller its own budget and spends only that one request', async () => {
  const ip = '198.51.100.50';
  for (let i = 0; i < 3; i++) assert.is((await get(ip)).status, 200);
  const table = await get(ip, '/api/rate-limits/');
  const row = (scope: string) => table.body.find((r: { scope: string }) => r.scope === scope);
  assert.equal(row('anon'), {
    scope: 'anon',
    rate: '20/min',
    keyed_by: 'ip',
    enforced: true,
    shadow_rate: '10/min',
    remaining: 16,
    reset_seconds: row('anon').reset_seconds,
    // An anonymous caller has no plan, and no override sets its rate.
    plan: null,
    override_until: null,
  });
  assert.match(table.headers.get('ratelimit') ?? '', /^"anon";r=16;/, 'the same budget as its own RateLimit field');
  assert.ok(row('anon').reset_seconds >= 1 && row('anon').reset_seconds <= 60);
  assert.equal([row('token-obtain').remaining, row('token-obtain').reset_seconds], [100_000, 0]);
  for (const scope of ['user', 'reports', 'login'])
    assert.is(row(scope).remaining, null, `${scope} is not the caller's`);
  assert.equal([row('reports').enforced, row('reports').shadow_rate], [false, null]);
  const again = await get(ip, '/api/rate-limits/');
  assert.is(again.body.find((r: { scope: string }) => r.scope === 'anon').remaining, 15, 'one request per read');
  assert.match((await get(ip)).headers.get('ratelimit') ?? '', /^"anon";r=14;/);
  const tokenObtain = { scope: 'token-obtain', rate: parseRate('1/min'), keyedBy: 'ip' as const };
  assert.is(
    await admin.exists(throttleKey(app.redisPrefix, { rule: tokenObtain, ident: `ip:${ip}` })),
    0,
    'peeked, not recorded',
  );
});

test('GET /api/rate-limits/ tells a user its budgets: user, its own login budget, not anon', async () => {
  const token = await app.login('budgeted');
  const table = await get('198.51.100.60', '/api/rate-limits/', token);
  const row = (scope: string) => table.body.find((r: { scope: string }) => r.scope === scope);
  const own = /^"user";r=(\d+);/.exec(table.headers.get('ratelimit') ?? '');
  assert.ok(own, table.headers.get('ratelimit') ?? 'no RateLimit field');
  assert.is(row('user').remaining, Number(own[1]));
  assert.is(row('login').remaining, 100_000 - 1, 'one login named this user');
  assert.is(row('anon').remaining, null);
});

test.run();

const several = suite('shadow rules in a request of several scopes (one script call decides them all)');
const rule = (scope: string, rate: string, extra: Partial<ScopeRule> = {}): ScopeRule => ({
  scope,
  rate: parseRate(rate),
  keyedBy: 'ip',
  ...extra,
});

several(
  'all scopes decided first; shadow rules decide only admitted requests, and never change the answer',
  async () => {
    const connection = new Redis(process.env.TEST_REDIS_URL as string);
    try {
      const throttler = createThrottler({ redis: connection, keyPrefix: `test:shadow-several:${Date.now()}:` });
      const checks = [
        { rule: rule('a', '3/min', { shadow: parseRate('1/min') }), ident: 'ip:1' },
        { rule: rule('b', '2/min'), ident: 'ip:1' },
        { rule: rule('c', '1/min', { inShadow: true }), ident: 'ip:1' },
      ];
      const seen = [];
      for (let i = 0; i < 4; i++) {
        const decided = await throttler.consume(checks);
        seen.push(decided.map((d) => [d.allowed, d.shadowRefused === true, d.inShadow === true]));
      }
      assert.equal(seen, [
        [
          [true, false, false],
          [true, false, false],
          [true, false, true],
        ],
        [
          [true, true, false],
          [true, false, false],
          [true, true, true],
        ],
        // b refuses: nothing recorded, no shadow rule asked
        [
          [true, false, false],
          [false, false, false],
          [true, false, true],
        ],
        [
          [true, false, false],
          [false, false, false],
          [true, false, true],
        ],
      ]);
    } finally {
      connection.disconnect();
    }
  },
);

several.run();
