import { mkdtemp } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import type { Database } from '../../../db/database.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { concurrencyKey } from '../../../src/throttle/concurrency.js';
import { childPids, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request, type TestResponse } from '../../helpers/http.js';
import { scrape, sumOf } from '../../helpers/metrics.js';
import { outcomeName } from '../../helpers/answers.js';

// docs/throttling.md "Concurrency limits": two hosts (one web worker each) share Redis, with
// THROTTLE_CONCURRENCY=user=2. A user's uploads whose bodies are still arriving are requests in
// progress: with two of them on one host, the same user is refused on the other while another
// user is served; a client that goes away gives its slots back at once. Host A counts an entry
// 4 s at most (and gives up on a request body after 4 s): when its worker is killed mid-upload,
// nobody gives those slots back, and they stop counting once the 4 s have passed.

const LIMIT = 2;
const SHORT_EXPIRY_MS = 4_000;
const POLICY = `"user:concurrent";q=${LIMIT};qu="concurrent-requests"`;

const test = suite('per-client concurrency limits across two hosts');
let hosts: RunningCluster[] = [];
let db: Kysely<Database> | undefined;
let redis: Redis | undefined;
let prefix = '';
let dropDatabase: () => Promise<void> = async () => {};
const users = new Map<string, { id: number; token: string }>();

/** `name`'s bearer token and the key of its requests in progress in the `user` scope. */
const tokenOf = (name: string) => users.get(name)!.token;
const keyOf = (name: string) => concurrencyKey(prefix, 'user', `user:${users.get(name)!.id}`);

interface Upload {
  /** Resolves with the status line the server sent, if any, once the connection is closed. */
  closed: Promise<string>;
  /** The client goes away mid-body. */
  abort(): void;
}

/**
 * A POST /api/tasks/ by `name` whose body never arrives in full: its request stays in progress
 * until the server gives up on the body (408 at HTTP_REQUEST_TIMEOUT_MS), its worker dies, or the
 * client aborts.
 */
function startUpload(host: RunningCluster, name: string): Upload {
  const socket = connect({ port: host.port, host: '127.0.0.1' });
  let answer = '';
  socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
  socket.on('error', () => {});
  socket.write(
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${tokenOf(name)}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{"title": "a slow',
  );
  const closed = new Promise<string>((resolve) => socket.on('close', () => resolve(answer.split('\r\n')[0] ?? '')));
  return { closed, abort: () => socket.destroy() };
}

/** The moments (ms of Redis's clock) the entries at `key` stop counting. */
async function expiries(key: string): Promise<number[]> {
  // [member, score] pairs (RESP3) or a flat list (RESP2).
  const listed = (await redis!.call('ZRANGE', key, '0', '-1', 'WITHSCORES')) as unknown[];
  return listed
    .flat()
    .filter((_, i) => i % 2 === 1)
    .map(Number);
}

/** Redis's clock in ms. */
async function redisNowMs(): Promise<number> {
  const [seconds, micros] = await redis!.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Waits (bounded) until `key` holds `count` entries; returns how many it held last. */
async function untilHeld(key: string, count: number): Promise<number> {
  let held = await redis!.zcard(key);
  for (let i = 0; i < 100 && held !== count; i += 1) {
    await sleep(100);
    held = await redis!.zcard(key);
  }
  return held;
}

const list = (host: RunningCluster, name: string): Promise<TestResponse> =>
  request(host.base, 'GET', '/api/tasks/', { token: tokenOf(name) });

test.before(async () => {
  const database = await createTestDatabase('throttle_concurrency');
  dropDatabase = database.drop;
  const stores = testStoresEnv('throttle-concurrency', database.url);
  prefix = stores.REDIS_PREFIX as string;
  redis = new Redis(stores.REDIS_URL as string);
  const env = {
    ...stores,
    WEB_CONCURRENCY: '1',
    THROTTLE_USER: '100000/min',
    THROTTLE_CONCURRENCY: `user=${LIMIT}`,
    // Exactness holds for checks Redis answers; a loaded host must not decide alone.
    THROTTLE_TIMEOUT_MS: '5000',
    ACCESS_LOG: 'errors',
  };
  const dataDir = await mkdtemp(join(process.env.TEST_TMP_DIR!, 'concurrency-'));
  const short = String(SHORT_EXPIRY_MS);
  hosts = await Promise.all([
    startCluster(
      {
        ...env,
        DATA_DIR: `${dataDir}/a`,
        THROTTLE_CONCURRENCY_EXPIRY_MS: short,
        HTTP_REQUEST_TIMEOUT_MS: short,
        HTTP_HEADERS_TIMEOUT_MS: short,
      },
      120_000,
    ),
    startCluster({ ...env, DATA_DIR: `${dataDir}/b` }, 120_000),
  ]);
  db = connectDatabase(database.url, 2);
  for (const name of ['alice', 'bob', 'carol']) {
    const created = await createUser(db, name, 'a-long-password');
    assert.ok(created.ok);
    const issued = await issueToken(db, name, 'a-long-password', 3_600_000, new Date());
    users.set(name, { id: created.user.id, token: issued!.token });
  }
});

test.after(async () => {
  await Promise.allSettled(hosts.map((host) => host.stop()));
  redis?.disconnect();
  await db?.destroy();
  await dropDatabase();
});

test('two uploads in progress on host B: the same user is refused on host A, another user is served', async () => {
  const [a, b] = hosts as [RunningCluster, RunningCluster];
  const uploads = [startUpload(b, 'alice'), startUpload(b, 'alice')];
  assert.is(await untilHeld(keyOf('alice'), LIMIT), LIMIT, 'both uploads hold a slot');

  const refused = await list(a, 'alice');
  assert.is(refused.status, 429);
  assert.equal(refused.body, { detail: 'Request was throttled. Expected available in 1 second.' });
  assert.is(refused.headers.get('retry-after'), '1');
  assert.is(refused.headers.get('ratelimit-policy'), POLICY);
  assert.is(refused.headers.get('ratelimit'), '"user:concurrent";r=0');

  // One request after another: each ends, and gives its slot back, before the next.
  for (let i = 0; i < LIMIT + 1; i += 1) {
    const served = await list(a, 'bob');
    assert.is(served.status, 200);
    assert.is(served.headers.get('ratelimit-policy'), `"user";q=100000;w=60, ${POLICY}`);
    assert.match(served.headers.get('ratelimit') ?? '', /^"user";r=\d+;t=\d+, "user:concurrent";r=1$/);
  }
  assert.is(await redis!.exists(keyOf('bob')), 0, "bob's requests ended and took their entries");

  // The client goes away mid-body: each request ends with an error and gives its slot back.
  const expires = Math.min(...(await expiries(keyOf('alice'))));
  for (const upload of uploads) upload.abort();
  assert.is(await untilHeld(keyOf('alice'), 0), 0);
  assert.ok((await redisNowMs()) < expires, 'given back by the requests, long before their entries expire');
  assert.is((await list(a, 'alice')).status, 200);

  const { samples } = await scrape(a.metricsBase);
  const decisions = (decision: string) =>
    sumOf(samples, 'paceline_throttle_decisions_total', { scope: 'user:concurrent', decision });
  assert.equal([decisions('throttled'), decisions('allowed')], [1, LIMIT + 2]);
});

test('a worker killed mid-upload: its slots still count, then stop counting after the expiry bound', async () => {
  const [a, b] = hosts as [RunningCluster, RunningCluster];
  const uploads = [startUpload(a, 'carol'), startUpload(a, 'carol')];
  assert.is(await untilHeld(keyOf('carol'), LIMIT), LIMIT);
  // Carol may start a request again once either entry has stopped counting.
  const held = await expiries(keyOf('carol'));
  const [expires, lastExpires] = [Math.min(...held), Math.max(...held)];
  const workers = childPids(a.child.pid!);
  assert.is(workers.length, 1, 'host A runs one web worker');
  process.kill(workers[0]!, 'SIGKILL');
  assert.equal(await Promise.all(uploads.map((upload) => upload.closed)), ['', ''], 'closed unanswered');

  // Nobody gave those slots back: on host B carol is refused while the entries count.
  let answer = await list(b, 'carol');
  if ((await redisNowMs()) < expires) assert.is(answer.status, 429, "the dead worker's entries still count");
  let refusals = answer.status === 429 ? 1 : 0;
  for (let i = 0; i < 100 && answer.status !== 200; i += 1) {
    await sleep(200);
    answer = await list(b, 'carol');
    assert.ok([200, 429].includes(answer.status), `carol's request was decided: ${outcomeName(answer)}`);
    if (answer.status === 429) refusals += 1;
  }
  assert.is(answer.status, 200, 'served once the entries have expired');
  assert.ok(refusals >= 1, 'refused while they counted');
  // The two dead entries expire the milliseconds apart their uploads started: a request between them sees one.
  assert.match(answer.headers.get('ratelimit') ?? '', /, "user:concurrent";r=[01]$/);
  // A request served between the two (a loaded host's uploads may start far apart) leaves the later one counting
  // until it expires: one more request past it finds it gone.
  const waitMs = lastExpires - (await redisNowMs());
  if (waitMs >= 0) {
    await sleep(waitMs + 50);
    assert.is((answer = await list(b, 'carol')).status, 200, outcomeName(answer));
  }
  assert.is(await redis!.exists(keyOf('carol')), 0, 'the expired entries are gone, and the last request took its own');
});

test.run();
