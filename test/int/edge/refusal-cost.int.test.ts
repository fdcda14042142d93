import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import pino from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { hashToken } from '../../../src/auth/tokens.js';
import { MAX_STRIKES } from '../../../src/auth/unknown-tokens.js';
import { startRedis } from '../../../src/embedded/redis.js';
import { pseudonymOf } from '../../../src/throttle/pseudonym.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';
import { privateRedisOptions } from '../../helpers/private-redis.js';

// What a refused or credential-guessing client costs: against a private redis-server (its own
// counters tell the commands) and the test's own database (pg_stat_user_tables tells the token
// lookups), with the access log captured line by line.

let redis: Awaited<ReturnType<typeof startRedis>>;
let admin: Redis;
const lines: Array<Record<string, unknown>> = [];

/** Commands Redis has run (those inside scripts included), INFO itself left out. */
/** The distinct-refused flush's script and what it runs: at most one call a second, whatever the refusals. */
const DISTINCT_FLUSH = new Set(['eval', 'pfadd', 'pexpire', 'pfcount']);

/** Commands Redis ran, but for INFO and the distinct-refused flush; `flushes`: the flush's script calls. */
async function commandsRun(): Promise<number> {
  let total = 0;
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (name !== 'info' && !DISTINCT_FLUSH.has(name as string)) total += Number(calls);
  }
  return total;
}

async function flushes(): Promise<number> {
  return Number(/^cmdstat_eval:calls=(\d+)/m.exec(await admin.info('commandstats'))?.[1] ?? 0);
}

function captureLogger() {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return pino({ level: 'info' }, sink);
}

const randomToken = () => randomBytes(32).toString('hex');
const get = (app: TestApp, ip: string, token?: string): Promise<TestResponse> =>
  request(app.base, 'GET', '/api/tasks/', {
    headers: { 'X-Forwarded-For': ip, ...(token ? { Authorization: `Bearer ${token}` } : {}) },
  });

/** Index and sequential scans of `tokens` the app's database has counted: its token lookups. */
async function tokenScans(databaseUrl: string): Promise<number> {
  const db = connectDatabase(databaseUrl, 1);
  try {
    const { rows } = await sql<{ scans: string }>`
      select coalesce(idx_scan, 0) + coalesce(seq_scan, 0) as scans from pg_stat_user_tables where relname = 'tokens'
    `.execute(db);
    return Number(rows[0]?.scans ?? 0);
  } finally {
    await db.destroy();
  }
}

const test = suite('a refusal is the cheapest answer; unknown tokens cost no database');

test.before(async () => {
  redis = await startRedis(await privateRedisOptions('refusal-cost'));
  admin = new Redis(redis.url);
});

test.after(async () => {
  admin?.disconnect();
  await redis?.stop();
});

test('a refused flood costs no Redis, no token lookup, and a bounded log', async () => {
  // Exactness holds for checks Redis answers: on a loaded host a late answer must not let the worker decide alone.
  const app = await startTestApp(
    {
      REDIS_URL: redis.url,
      THROTTLE_ANON: '20/min',
      TRUST_PROXY_HOPS: '1',
      LOG_LEVEL: 'info',
      THROTTLE_TIMEOUT_MS: '5000',
    },
    'refusal-flood',
    { logger: captureLogger() },
  );
  try {
    const ip = '198.51.100.20';
    for (let i = 0; i < 20; i++) assert.is((await get(app, ip)).status, 200, `admission ${i + 1}`);
    assert.is((await get(app, ip)).status, 429, 'refused by Redis');
    // Its first two unknown tokens while refused are still looked up (a real user may share the address).
    for (let i = 0; i < 2; i++) assert.is((await get(app, ip, randomToken())).status, 429, `strike ${i + 1}`);
    // The census of web workers is no request's cost: a script call every 2 s (docs/throttling.md "When Redis is
    // unreachable").
    await app.deps.alone?.census.close();
    // Nor is the reading of plans and overrides: an epoch read every 250 ms (docs/throttling.md "Plans and overrides").
    app.deps.limits?.close();
    const commands = await commandsRun();
    const [flushed, floodStarted] = [await flushes(), performance.now()];
    const scans = await tokenScans(app.databaseUrl);
    const logged = lines.length;
    for (let round = 0; round < 50; round++) {
      const responses = await Promise.all(
        Array.from({ length: 20 }, (_, i) => get(app, ip, i % 2 === 0 ? randomToken() : undefined)),
      );
      for (const response of responses) {
        assert.is(response.status, 429);
        const seconds = Number(response.headers.get('retry-after'));
        assert.ok(seconds >= 1 && seconds <= 60, `Retry-After ${seconds}`);
        assert.equal(response.body, {
          detail: `Request was throttled. Expected available in ${seconds} ${seconds === 1 ? 'second' : 'seconds'}.`,
        });
        assert.is(response.headers.get('ratelimit'), `"anon";r=0;t=${seconds}`);
        assert.is(response.headers.get('ratelimit-policy'), '"anon";q=20;w=60');
      }
    }
    assert.is((await commandsRun()) - commands, 0, 'Redis commands for 1,000 refused requests');
    // docs/throttling.md "How many": the refused clients reach Redis at most once a second, not per refusal.
    const seconds = (performance.now() - floodStarted) / 1000;
    assert.ok((await flushes()) - flushed <= Math.ceil(seconds) + 1, 'distinct-refused flushes: one a second at most');
    await app.deps.db.destroy(); // its connections end, so their statistics reach pg_stat
    await new Promise((resolve) => setTimeout(resolve, 500));
    // The two strikes' lookups may reach pg_stat only now (statistics are flushed late): none beyond them.
    const lookups = (await tokenScans(app.databaseUrl)) - scans;
    assert.ok(lookups <= 2, `${lookups} token lookups for 1,000 refused requests and the 2 strikes`);
    const floodLines = lines.slice(logged);
    assert.ok(floodLines.length <= 2, `${floodLines.length} log lines for 1,000 refused requests`);
    const first = lines.find((line) => line.status === 429);
    assert.is(first?.scope, 'anon', 'the refusal line names the scope');
    assert.is(first?.client, `ip:${ip}`, 'and the client');
    assert.ok(Number(first?.retryAfterS) >= 1, 'and the Retry-After');
    assert.is(first?.pseudonym, pseudonymOf(app.deps.cursorSecret, `ip:${ip}`), 'and the pseudonym the metrics use');
  } finally {
    await app.close().catch(() => {});
  }
});

// The lookups a flood of random tokens may cost (src/edge/authenticate.ts `identify`): one per request its address's
// budget admits (20), one for the request that learns the refusal, MAX_STRIKES while refused, and at most one per
// request of the real user (5: its token is remembered, but a loaded host's epoch read may come too late to trust).
const MAX_LOOKUPS = 20 + 1 + MAX_STRIKES + 5;

test(`3,000 random tokens from one address: at most ${MAX_LOOKUPS} token lookups, and a real user is served throughout`, async () => {
  const app = await startTestApp(
    { REDIS_URL: redis.url, THROTTLE_ANON: '20/min', TRUST_PROXY_HOPS: '1' },
    'refusal-tokens',
  );
  try {
    const token = await app.login('rider');
    const scans = await tokenScans(app.databaseUrl);
    const statuses = new Map<number, number>();
    for (let round = 0; round < 150; round++) {
      const responses = await Promise.all(Array.from({ length: 20 }, () => get(app, '198.51.100.30', randomToken())));
      for (const { status } of responses) statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (round % 30 === 0) assert.is((await get(app, '198.51.100.31', token)).status, 200, `the user, round ${round}`);
    }
    assert.is(statuses.get(401), 20, 'the address budget answers 401 to the tokens it admitted');
    assert.is(statuses.get(429), 2_980, 'and refuses the rest');
    await app.deps.db.destroy();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const lookups = (await tokenScans(app.databaseUrl)) - scans;
    assert.ok(lookups <= MAX_LOOKUPS, `${lookups} token lookups for 3,000 random tokens`);
  } finally {
    await app.close().catch(() => {});
  }
});

test('a token found unknown is answered 401 without a lookup for a few seconds, then looked up again', async () => {
  const app = await startTestApp({ REDIS_URL: redis.url }, 'refusal-unknown');
  try {
    await app.login('issuer');
    const token = randomToken();
    assert.is((await get(app, '198.51.100.40', token)).status, 401, 'unknown');
    const { id } = await app.deps.db
      .selectFrom('users')
      .select('id')
      .where('username', '=', 'issuer')
      .executeTakeFirstOrThrow();
    const expires = new Date(Date.now() + 3_600_000);
    await app.deps.db
      .insertInto('tokens')
      .values({ token_hash: hashToken(token), user_id: id, expires_at: expires })
      .execute();
    assert.is((await get(app, '198.51.100.40', token)).status, 401, 'still remembered as unknown');
    const real = app.deps.clock;
    app.deps.clock = { now: () => new Date(real.now().getTime() + 6_000) };
    assert.is((await get(app, '198.51.100.40', token)).status, 200, 'looked up again once the memory expired');
  } finally {
    await app.close();
  }
});

test.run();
