import { copyFile, mkdir } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { newRedisPassword, startRedis } from '../../../src/embedded/redis.js';
import { createTestDatabase } from '../../helpers/database.js';

// docs/architecture.md "Read cache": a read that starts after a write was acknowledged reflects
// it, on every worker of every host. Host A writes; host B's workers keep every kind of read hot
// in their caches; after each acknowledged write every list style, the count, the task and its
// history read on B (each on a new connection, so any of B's workers answers) must show it. Then
// the same with Redis killed mid-run (reads fall back to PostgreSQL, writes are refused and not
// made), restarted empty (the head is lost), and restarted from an older snapshot (the head goes
// back): an old answer must never be taken as current.

const test = suite('read your writes across hosts, with Redis lost and restored');
const scratch = process.env.TEST_TMP_DIR ?? '/tmp';
let hosts: RunningCluster[] = [];
let dropDatabase: () => Promise<void> = async () => {};
let databaseUrl = '';
let token = '';
let redis: Awaited<ReturnType<typeof startRedis>> | undefined;
let redisPort = 0;
/** The private Redis's password: the same across its restarts, as the embedded one's. */
const REDIS_PASSWORD = newRedisPassword();
const OPERATOR_PASSWORD = newRedisPassword();
const redisDir = join(scratch, 'ryw-redis');
/** The private Redis, each time it is (re)started: its port, data and passwords stay. */
const redisOptions = () => ({
  dataDir: redisDir,
  port: redisPort,
  persistent: false,
  password: REDIS_PASSWORD,
  operatorPassword: OPERATOR_PASSWORD,
});
let stopHot = false;
let pauseHot = false;
let hot: Promise<void> = Promise.resolve();

interface Task {
  title: string;
  version: number;
  events: number;
}
const live = new Map<number, Task>();
const history = new Map<number, number>();
const stale: string[] = [];
let checks = 0;

interface Answer {
  status: number;
  body: any;
}

/** One request on a connection of its own, so the OS may hand it to any worker of the host. */
function call(base: string, method: string, path: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const req = httpRequest(new URL(path, base), { method, agent: false, headers }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
      res.on('error', () => resolve({ status: 0, body: null }));
    });
    req.on('error', () => resolve({ status: 0, body: null }));
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const [hostA, hostB] = [() => hosts[0]!.base, () => hosts[1]!.base];

/** The reads every check makes on B, kept hot meanwhile so a stale answer would be at hand. */
function readsOf(id: number): string[] {
  return [
    '/api/tasks/?ordering=-id',
    '/api/tasks/?ordering=-id&limit=5',
    '/api/tasks/?ordering=-id&cursor=',
    '/api/tasks/?limit=3&offset=2',
    `/api/tasks/${id}/`,
    `/api/tasks/${id}/events/`,
  ];
}

function keepHot(ids: () => number[]): Promise<void> {
  return (async () => {
    while (!stopHot) {
      if (pauseHot) {
        await sleep(20);
        continue;
      }
      const some = ids().slice(-4);
      await Promise.all(some.flatMap((id) => readsOf(id)).map((path) => call(hostB(), 'GET', path)));
      await sleep(5);
    }
  })();
}

/** Compares what B answers for `id` and the lists with what the acknowledged writes say. */
async function checkOnB(id: number, label: string): Promise<void> {
  const ids = [...live.keys()].sort((x, y) => y - x);
  const [page, limited, cursor, offset, detail, events] = await Promise.all(
    readsOf(id).map((path) => call(hostB(), 'GET', path)),
  );
  const expectTop = (answer: Answer, n: number, what: string) => {
    const got = (answer.body?.results ?? []).map(
      (t: { id: number; title: string; version: number }) => `${t.id}:${t.title}:${t.version}`,
    );
    const want = ids.slice(0, n).map((i) => `${i}:${live.get(i)!.title}:${live.get(i)!.version}`);
    if (JSON.stringify(got) !== JSON.stringify(want))
      stale.push(`${label} ${what}: got ${got.join(',')} want ${want.join(',')}`);
  };
  expectTop(page!, 10, 'page-number');
  expectTop(limited!, 5, 'limit/offset');
  expectTop(cursor!, 10, 'cursor');
  if (page!.body?.count !== live.size) stale.push(`${label} count: got ${page!.body?.count} want ${live.size}`);
  const asc = [...live.keys()].sort((x, y) => x - y).slice(2, 5);
  const gotAsc = (offset!.body?.results ?? []).map((t: { id: number }) => t.id);
  if (JSON.stringify(gotAsc) !== JSON.stringify(asc) || offset!.body?.count !== live.size)
    stale.push(`${label} offset page: got ${gotAsc} want ${asc}`);
  const task = live.get(id);
  const detailOk = task
    ? detail!.status === 200 && detail!.body.title === task.title && detail!.body.version === task.version
    : detail!.status === 404;
  if (!detailOk) stale.push(`${label} detail ${id}: ${detail!.status} ${JSON.stringify(detail!.body)}`);
  if (events!.body?.count !== history.get(id))
    stale.push(`${label} history ${id}: got ${events!.body?.count} want ${history.get(id)}`);
  checks += 1;
}

/** One write on A, chosen by `step`; returns the task it touched, or undefined when A refused it. */
async function writeOnA(step: number): Promise<number | undefined> {
  const ids = [...live.keys()];
  const target = ids[ids.length - 1 - (step % Math.min(5, ids.length))]!;
  if (step % 3 === 0 || ids.length < 8) {
    const created = await call(hostA(), 'POST', '/api/tasks/', { title: `t${step}` });
    if (created.status !== 201) return undefined;
    live.set(created.body.id, { title: created.body.title, version: created.body.version, events: 1 });
    history.set(created.body.id, 1);
    return created.body.id;
  }
  if (step % 3 === 1) {
    const changed = await call(hostA(), 'PATCH', `/api/tasks/${target}/`, { title: `t${step}` });
    if (changed.status !== 200) return undefined;
    live.set(target, { ...live.get(target)!, title: changed.body.title, version: changed.body.version });
    history.set(target, history.get(target)! + 1);
    return target;
  }
  const deleted = await call(hostA(), 'DELETE', `/api/tasks/${target}/`);
  if (deleted.status !== 204) return undefined;
  live.delete(target);
  history.set(target, history.get(target)! + 1);
  return target;
}

async function trials(from: number, count: number, label: string): Promise<number> {
  let made = 0;
  for (let step = from; step < from + count; step += 1) {
    const id = await writeOnA(step);
    if (id === undefined) continue;
    made += 1;
    await checkOnB(id, `${label} step ${step}`);
  }
  return made;
}

test.before(async () => {
  const database = await createTestDatabase('ryw');
  dropDatabase = database.drop;
  databaseUrl = database.url;
  redisPort = await findFreePort();
  await mkdir(redisDir, { recursive: true });
  redis = await startRedis(redisOptions());
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    REDIS_PREFIX: 'ryw:',
    CURSOR_SECRET: 'read-your-writes-test-secret',
    WEB_CONCURRENCY: '2',
    THROTTLE_ANON: '100000/s',
    THROTTLE_USER: '100000/s',
    THROTTLE_FAILURE_MODE: 'open',
    DATABASE_POOL_SIZE: '4',
  };
  hosts = await Promise.all([startCluster(env, 120_000), startCluster(env, 120_000)]);
  const db = connectDatabase(database.url, 1);
  await createUser(db, 'writer', 'a-long-password');
  token = (await issueToken(db, 'writer', 'a-long-password', 3_600_000, new Date()))!.token;
  await db.destroy();
  for (let i = 0; i < 12; i += 1) await writeOnA(0);
  hot = keepHot(() => [...live.keys()]);
});

test.after(async () => {
  stopHot = true;
  await hot;
  await Promise.all(hosts.map((host) => host.stop()));
  await redis?.stop();
  await dropDatabase();
});

test('every acknowledged write on A is in every read on B, trial after trial', async () => {
  const made = await trials(1, 150, 'steady');
  assert.ok(made >= 140, `only ${made} writes were acknowledged`);
  assert.equal(stale, [], `${stale.length} stale answers of ${checks} checks`);
});

test('Redis killed: reads fall back to PostgreSQL, writes are refused and not made; restarted empty, nothing old is current', async () => {
  await trials(200, 10, 'before kill');
  pauseHot = true;
  await sleep(200);
  const lastId = [...live.keys()].at(-1)!;
  for (let i = 0; i < 4; i += 1) await checkOnB(lastId, 'before the last write');
  // Acknowledged just before Redis goes: B, whose answers predate it, must still show it.
  const changed = await writeOnA(202);
  assert.ok(changed !== undefined);
  process.kill(redis!.pid, 'SIGKILL');
  await sleep(300);
  for (let i = 0; i < 4; i += 1) await checkOnB(changed!, 'redis down');
  const refused = await call(hostA(), 'POST', '/api/tasks/', { title: 'while redis is down' });
  assert.is(refused.status, 503, JSON.stringify(refused.body));
  const db = connectDatabase(databaseUrl, 1);
  const made = await db
    .selectFrom('events')
    .select('position')
    .where(sql<boolean>`data->>'title' = 'while redis is down'`)
    .execute();
  await db.destroy();
  assert.is(made.length, 0, 'a refused write is not in the event log');
  redis = await startRedis(redisOptions());
  // Long enough for every worker to have reconnected (its retries are at most 1 s apart).
  await sleep(2_500);
  for (let i = 0; i < 4; i += 1) await checkOnB(changed!, 'after empty restart');
  pauseHot = false;
  await trials(300, 60, 'after empty restart');
  assert.equal(stale, [], `${stale.length} stale answers of ${checks} checks`);
});

/** The read head stored in the Redis snapshot `rdb`, read by a throwaway Redis loading it. */
async function headInSnapshot(rdb: string): Promise<number> {
  const dataDir = join(scratch, `ryw-snapshot-${Date.now()}`);
  await mkdir(dataDir, { recursive: true });
  await copyFile(rdb, join(dataDir, 'dump.rdb'));
  const probe = await startRedis({
    dataDir,
    port: await findFreePort(),
    persistent: false,
    password: newRedisPassword(),
  });
  const client = new Redis(probe.url, { maxRetriesPerRequest: 1 });
  try {
    return Number(await client.get('ryw:{read}:head'));
  } finally {
    client.disconnect();
    await probe.stop();
  }
}

test('Redis restarted from an older snapshot (the head goes back): old answers are never current', async () => {
  await trials(400, 30, 'before snapshot');
  // B's answers are current at the snapshot's head; then A writes and B does not read again
  // until Redis has come back with the snapshot's (older) head.
  pauseHot = true;
  await sleep(200);
  const lastId = [...live.keys()].at(-1)!;
  for (let i = 0; i < 4; i += 1) await checkOnB(lastId, 'at snapshot');
  const tagged = await fetch(`${hostB()}/api/tasks/?ordering=-id`);
  const heldTag = tagged.headers.get('etag')!;
  await tagged.arrayBuffer();
  const admin = new Redis(redis!.operatorUrl!, { maxRetriesPerRequest: 1 }); // SAVE is the operator's
  await admin.save();
  await copyFile(join(redisDir, 'dump.rdb'), join(scratch, 'ryw-old.rdb'));
  const changed = await writeOnA(401);
  assert.ok(changed !== undefined, 'A acknowledged a write after the snapshot');
  const before = Number(await admin.get('ryw:{read}:head'));
  admin.disconnect();
  process.kill(redis!.pid, 'SIGKILL');
  await sleep(200);
  await copyFile(join(scratch, 'ryw-old.rdb'), join(redisDir, 'dump.rdb'));
  // The snapshot holds an older head, read from a Redis of its own: the workers reconnect to the
  // restarted one at once and may put the head back from PostgreSQL before this test could look.
  const after = await headInSnapshot(join(scratch, 'ryw-old.rdb'));
  assert.ok(after < before, `the snapshot's head (${after}) is older than the last published (${before})`);
  redis = await startRedis(redisOptions());
  // Long enough for every worker to have reconnected (its retries are at most 1 s apart).
  await sleep(2_500);
  for (let i = 0; i < 4; i += 1) await checkOnB(changed!, 'old snapshot');
  // A client holding the page from before the write asks whether it changed: it did.
  for (let i = 0; i < 4; i += 1) {
    const revalidated = await fetch(`${hostB()}/api/tasks/?ordering=-id`, { headers: { 'If-None-Match': heldTag } });
    await revalidated.arrayBuffer();
    if (revalidated.status !== 200) stale.push(`old snapshot: If-None-Match ${heldTag} answered ${revalidated.status}`);
  }
  pauseHot = false;
  await trials(500, 30, 'after old snapshot');
  assert.equal(stale, [], `${stale.length} stale answers of ${checks} checks`);
});

test.run();
