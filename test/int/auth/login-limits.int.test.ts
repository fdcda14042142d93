import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createUser } from '../../../src/auth/users.repository.js';
import { ConfigError, loadConfig } from '../../../src/settings/config.js';
import { isAlive } from '../../../src/cluster/processes.js';
import { startRedis, type RedisOptions } from '../../../src/embedded/redis.js';
import { parseRate } from '../../../src/throttle/index.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';
import { privateRedisOptions } from '../../helpers/private-redis.js';
import { keysMatching } from '../../helpers/redis-keys.js';

// docs/security.md "Password guessing": every login attempt that names a username counts against that
// name's `login` budget, from any address, whether the name exists or not, answered alike for
// both; a refused attempt checks no password; the scope is closed even under
// THROTTLE_FAILURE_MODE=open. Against the real app, PostgreSQL and Redis (a private
// redis-server for the outage), with client addresses varied through a trusted proxy.

const PASSWORD = 'the-right-password';
let nextAddress = 0;

/** A client address not used before in this file: every attempt from a fresh one has the whole per-address budget. */
function freshAddress(): string {
  nextAddress += 1;
  return `198.51.100.${nextAddress}`;
}

function attempt(
  app: TestApp,
  username: string,
  password: string,
  ip = freshAddress(),
  headers: Record<string, string> = {},
): Promise<TestResponse> {
  return request(app.base, 'POST', '/api/auth/token/', {
    body: { username, password },
    headers: { 'X-Forwarded-For': ip, ...headers },
  });
}

const BAD_LOGIN = { non_field_errors: ['Unable to log in with provided credentials.'] };

/**
 * Everything a client receives but the Date: status, each header, the body bytes; with
 * `maskSeconds`, the seconds of the login scope's RateLimit member are left out.
 */
function received(response: TestResponse, maskSeconds = false): string {
  const headers = [...response.headers.entries()]
    .filter(([name]) => name !== 'date')
    .map(([name, value]) => `${name}: ${value}`);
  const text = [String(response.status), ...headers, '', response.text].join('\n');
  return maskSeconds ? text.replace(/("login";r=\d+;t=)\d+/g, '$1…') : text;
}

const Account = suite(
  'the login budget per account (login 4/15min, token-obtain 2/min per address, behind a trusted proxy)',
);
let app: TestApp;

Account.before(async () => {
  app = await startTestApp(
    {
      TRUST_PROXY_HOPS: '1',
      TRUSTED_PROXIES: '127.0.0.1,::1',
      THROTTLE_LOGIN: '4/15min',
      THROTTLE_TOKEN_OBTAIN: '2/min',
    },
    'login-limits',
  );
  for (const name of ['alice', 'bob', 'carol', 'dave', 'frank']) await createUser(app.deps.db, name, PASSWORD);
});
Account.after(() => app?.close());

Account(
  'one account guessed from many addresses is stopped after 4; the right password then gets no token either',
  async () => {
    for (let i = 1; i <= 4; i += 1) {
      const guess = await attempt(app, 'alice', `guess-${i}`);
      assert.equal([guess.status, guess.body], [400, BAD_LOGIN], `guess ${i}`);
      assert.is(guess.headers.get('ratelimit-policy'), '"token-obtain";q=2;w=60, "login";q=4;w=900', `guess ${i}`);
      assert.match(
        guess.headers.get('ratelimit') ?? '',
        new RegExp(`^"token-obtain";r=1;t=60, "login";r=${4 - i};t=(900|899)$`),
        `guess ${i}`,
      );
    }
    const refused = await attempt(app, 'alice', 'guess-5');
    assert.is(refused.status, 429, refused.text);
    const wait = Number(refused.headers.get('retry-after'));
    assert.ok(wait > 850 && wait <= 900, `Retry-After ${wait}: until the first guess leaves the 15-minute window`);
    assert.equal(refused.body, { detail: `Request was throttled. Expected available in ${wait} seconds.` });
    assert.is(refused.headers.get('ratelimit'), `"token-obtain";r=1;t=60, "login";r=0;t=${wait}`);

    const right = await attempt(app, 'alice', PASSWORD);
    assert.is(right.status, 429, 'a refused attempt is not checked: the right password gets no token');
    assert.is(right.body.token, undefined);
    const count = await app.deps.db
      .selectFrom('tokens')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.is(Number(count.n), 0, 'no token was issued');

    const other = await attempt(app, 'bob', PASSWORD);
    assert.is(other.status, 200, `another account keeps its own budget: ${other.text}`);
    assert.match(other.headers.get('ratelimit') ?? '', /^"token-obtain";r=1;t=60, "login";r=3;t=900$/);
  },
);

Account(
  'the per-address budget still applies: one address is stopped after 2 attempts, whatever names it tries',
  async () => {
    const ip = freshAddress();
    assert.is((await attempt(app, 'ghost-1', 'x', ip)).status, 400);
    assert.is((await attempt(app, 'ghost-2', 'x', ip)).status, 400);
    const third = await attempt(app, 'bob', PASSWORD, ip);
    assert.is(third.status, 429, third.text);
    assert.is(
      third.headers.get('ratelimit-policy'),
      '"token-obtain";q=2;w=60',
      'refused by the address before the name is read',
    );
    const fresh = await attempt(app, 'bob', PASSWORD);
    assert.match(
      fresh.headers.get('ratelimit') ?? '',
      /"login";r=2;/,
      'the attempt refused by its address did not count against bob',
    );
  },
);

Account('case, width and surrounding spaces do not make another budget', async () => {
  const variants = ['carol', ' CAROL ', 'Carol', '\uff43\uff41\uff52\uff4f\uff4c'];
  for (const [i, name] of variants.entries()) {
    const guess = await attempt(app, name, 'wrong');
    assert.is(guess.status, 400, `${JSON.stringify(name)}: ${guess.text}`);
    assert.match(guess.headers.get('ratelimit') ?? '', new RegExp(`"login";r=${3 - i};`), JSON.stringify(name));
  }
  for (const name of ['carol', 'cArOl', '  carol'])
    assert.is((await attempt(app, name, PASSWORD)).status, 429, JSON.stringify(name));
  assert.is((await attempt(app, 'dave', PASSWORD)).status, 200, 'dave is untouched');
});

Account('a known and an unknown name get the same answers, byte for byte but the Date, at every step', async () => {
  const known = 'frank';
  const unknown = 'nobody-by-that-name';
  const sameId = { 'X-Request-Id': 'compare-known-unknown' };
  const pair = (password: string) =>
    Promise.all([
      attempt(app, known, password, freshAddress(), sameId),
      attempt(app, unknown, password, freshAddress(), sameId),
    ]);
  for (let i = 1; i <= 4; i += 1) {
    const [a, b] = await pair(i === 4 ? PASSWORD.toUpperCase() : 'wrong');
    assert.is(a.status, 400, a.text);
    // The login member's t counts whole seconds since each name's first attempt, sent a moment
    // apart: compared exactly on the 429s below.
    assert.is(received(a, true), received(b, true), `attempt ${i}`);
  }
  // Each pair is sent at once; their seconds can only differ when the two straddle a second's
  // edge, so a pair that differs is tried again (a real difference would persist).
  let answers = await pair(PASSWORD);
  for (let tries = 1; tries < 4 && received(answers[0]) !== received(answers[1]); tries += 1)
    answers = await pair(PASSWORD);
  assert.is(answers[0].status, 429, answers[0].text);
  assert.is(received(answers[0]), received(answers[1]));
});

Account('the login budget is kept under a hash: no Redis key holds a name', async () => {
  const keys = await keysMatching(app.deps.redis as Redis, `${app.redisPrefix}throttle:v3:{login:*`);
  assert.ok(keys.length >= 6, `one key per name tried: ${keys.length}`);
  for (const key of keys) {
    assert.match(key, /\{login:[A-Za-z0-9_-]{22}\}:login$/);
    assert.not.match(key.toLowerCase(), /alice|bob|carol|dave|frank|nobody/);
  }
});

Account('GET /api/rate-limits/ lists the login scope, keyed by username', async () => {
  const rules = await request(app.base, 'GET', '/api/rate-limits/');
  const { scope, rate, keyed_by, remaining } = rules.body.find((rule: { scope: string }) => rule.scope === 'login');
  assert.equal(
    { scope, rate, keyed_by, remaining },
    { scope: 'login', rate: '4/15min', keyed_by: 'username', remaining: null },
  );
});

const Outage = suite('Redis down: logins are 503 even with THROTTLE_FAILURE_MODE=open, other requests are admitted');
let redisOptions: RedisOptions;
let redis: Awaited<ReturnType<typeof startRedis>> | undefined;
let openApp: TestApp;

Outage.before(async () => {
  redisOptions = await privateRedisOptions('login-limits');
  redis = await startRedis(redisOptions);
  openApp = await startTestApp(
    {
      REDIS_URL: redis.url,
      THROTTLE_FAILURE_MODE: 'open',
      THROTTLE_TIMEOUT_MS: '100',
      TRUST_PROXY_HOPS: '1',
      TRUSTED_PROXIES: '127.0.0.1,::1',
    },
    'login-outage',
  );
  await createUser(openApp.deps.db, 'erin', PASSWORD);
});
Outage.after(async () => {
  await openApp?.close();
  await redis?.stop();
});

async function loginStoreErrors(): Promise<number> {
  const samples = parseMetrics(await openApp.deps.metrics.registry.metrics());
  return sumOf(samples, 'paceline_throttle_decisions_total', { scope: 'login', decision: 'store_error' });
}

Outage(
  'redis-server killed: a login (known or unknown name, right password or not) is 503 with Retry-After; GETs are admitted',
  async () => {
    assert.is((await attempt(openApp, 'erin', PASSWORD)).status, 200, 'before the outage');
    process.kill(redis!.pid, 'SIGKILL');
    while (isAlive(redis!.pid)) await sleep(20);

    const before = await loginStoreErrors();
    for (const [name, password] of [
      ['erin', PASSWORD],
      ['erin', 'wrong'],
      ['nobody-at-all', PASSWORD],
    ]) {
      const refused = await attempt(openApp, name!, password!);
      assert.is(refused.status, 503, `${name}: ${refused.text}`);
      assert.is(refused.headers.get('retry-after'), '5');
      assert.ok(refused.headers.get('content-type')?.startsWith('application/json'));
      assert.match(refused.body.detail, /Logins are temporarily unavailable/);
      assert.is(refused.body.token, undefined);
    }
    assert.is(await loginStoreErrors(), before + 3, 'each counted as a store error of the login scope');
    const page = await request(openApp.base, 'GET', '/api/tasks/', { headers: { 'X-Forwarded-For': freshAddress() } });
    assert.is(page.status, 200, `open mode admits a GET: ${page.text}`);
    assert.is(page.headers.get('ratelimit'), null, 'admitted unchecked');
    const blank = await attempt(openApp, '', PASSWORD);
    assert.equal(
      [blank.status, blank.body],
      [400, { username: ['This field may not be blank.'] }],
      'an attempt naming no one is not a login',
    );

    redis = await startRedis(redisOptions);
    const deadline = Date.now() + 30_000;
    let back = await attempt(openApp, 'erin', PASSWORD);
    while (back.status === 503 && Date.now() < deadline) {
      await sleep(100);
      back = await attempt(openApp, 'erin', PASSWORD);
    }
    assert.is(back.status, 200, `logins come back with Redis: ${back.text}`);
  },
);

const Settings = suite('THROTTLE_LOGIN');

Settings('defaults to 10 attempts in 15 minutes', () => {
  const config = loadConfig({});
  assert.is(config.THROTTLE_LOGIN, '10/15min');
  assert.equal(parseRate(config.THROTTLE_LOGIN), { limit: 10, windowMs: 900_000, text: '10/15min' });
  assert.is(loadConfig({ THROTTLE_LOGIN: ' 3/1h ' }).THROTTLE_LOGIN, '3/1h');
});

Settings('a bad value stops the start with one line naming it', () => {
  for (const bad of ['lots', '0/15min', '10/0min', '10/15', '10/400d', '-1/min', '100001/min']) {
    assert.throws(
      () => loadConfig({ THROTTLE_LOGIN: bad }),
      (error: Error) =>
        error instanceof ConfigError &&
        error.message.startsWith(`invalid THROTTLE_LOGIN=${JSON.stringify(bad)}: invalid rate`) &&
        !error.message.includes('\n'),
      bad,
    );
  }
});

Settings('THROTTLE_RATES cannot set it', () => {
  assert.throws(
    () => loadConfig({ THROTTLE_RATES: 'login=100/min' }),
    /the login scope has its own setting, THROTTLE_LOGIN/,
  );
});

Account.run();
Outage.run();
Settings.run();
