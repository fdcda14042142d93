import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startStreamingPair, type StreamingPair } from '../../helpers/pg-replica.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

/**
 * Reads through a real streaming replica (docs/architecture.md, "Read replicas"): a primary and a
 * hot standby of our own on loopback, replay paused and resumed to make the replica lag.
 */
const Replicas = suite('PostgreSQL read replicas');

let pair: StreamingPair;
let app: TestApp;
let alice: string;
let bob: string;
const runnerAdminUrl = process.env.TEST_DATABASE_URL;

/** `paceline_db_reads_total` of this app, by `target/reason`. */
async function reads(): Promise<Record<string, number>> {
  const { values } = await app.deps.metrics.dbReads.get();
  return Object.fromEntries(values.map((value) => [`${value.labels.target}/${value.labels.reason}`, value.value]));
}

function added(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([key, value]) => [key, value - (before[key] ?? 0)]));
}

const get = (path: string, token = alice) => request(app.base, 'GET', path, { token });

/** Task `id` as the replica itself holds it now (null: not replayed yet). */
async function onReplica(id: number): Promise<string | null> {
  const client = new pg.Client({ connectionString: pair.replicaUrlOf(app.databaseUrl) });
  await client.connect();
  try {
    const { rows } = await client.query<{ title: string }>('SELECT title FROM tasks WHERE id = $1', [id]);
    return rows[0]?.title ?? null;
  } finally {
    await client.end();
  }
}

Replicas.before(async () => {
  pair = await startStreamingPair(join(process.env.TEST_TMP_DIR!, 'replicas'));
  // The app's database lives on our own primary, so that the standby replicates it.
  process.env.TEST_DATABASE_URL = pair.primaryUrl;
  app = await startTestApp({}, 'replicas', {
    databaseEnv: (url) => ({ DATABASE_REPLICA_URLS: pair.replicaUrlOf(url), DATABASE_REPLICA_WAIT_MS: '1000' }),
  });
  alice = await app.login('alice');
  bob = await app.login('bob');
});

Replicas.after(async () => {
  await app?.close();
  await pair?.stop();
  process.env.TEST_DATABASE_URL = runnerAdminUrl;
});

Replicas('a replica that has replayed the published head answers every kind of read', async () => {
  const ids: number[] = [];
  for (const title of ['one', 'two', 'three'])
    ids.push((await request(app.base, 'POST', '/api/tasks/', { token: alice, body: { title } })).body.id);
  await pair.caughtUp();
  const before = await reads();
  const pages = await Promise.all(
    ['/api/tasks/?page_size=2', '/api/tasks/?limit=2&offset=1', '/api/tasks/?cursor=&ordering=-id'].map((path) =>
      get(path),
    ),
  );
  assert.equal(
    pages.map((page) => [page.status, page.body.results.map((task: { title: string }) => task.title)]),
    [
      [200, ['one', 'two']],
      [200, ['two', 'three']],
      [200, ['three', 'two', 'one']],
    ],
  );
  assert.is(pages[0]!.body.count, 3);
  const task = await get(`/api/tasks/${ids[1]}/`);
  assert.is(task.body.title, 'two');
  const history = await get(`/api/tasks/${ids[1]}/events/`);
  assert.equal(
    history.body.results.map((event: { type: string }) => event.type),
    ['TaskCreated'],
  );
  const feed = await get('/api/events/?after=0');
  assert.equal(
    feed.body.results.map((event: { task_id: number }) => event.task_id),
    ids,
  );
  const missing = await get('/api/tasks/999999/');
  assert.is(missing.status, 404);
  const counted = added(before, await reads());
  assert.is(counted['replica/current'], 7, JSON.stringify(counted));
  assert.is(counted['primary/lagging'], 0, JSON.stringify(counted));
});

Replicas('while the replica lags, the primary answers and every client sees the write at once', async () => {
  await pair.pauseReplay();
  try {
    const before = await reads();
    const created = await request(app.base, 'POST', '/api/tasks/', {
      token: alice,
      body: { title: 'written while paused' },
    });
    assert.is(created.status, 201);
    const id = created.body.id as number;
    const own = await get(`/api/tasks/${id}/`);
    assert.is(own.status, 200);
    assert.is(own.body.title, 'written while paused');
    assert.is((await get('/api/tasks/?ordering=-id&page_size=1')).body.results[0].id, id);
    assert.is((await get(`/api/tasks/${id}/events/`)).body.count, 1);
    assert.ok(
      (await get('/api/events/?after=0&limit=100')).body.results.some(
        (event: { task_id: number }) => event.task_id === id,
      ),
    );
    // A second client, after the first one's answer: it sees the write too (from the read cache:
    // alice's read of the same URL kept the answer).
    assert.is((await get(`/api/tasks/${id}/`, bob)).body.title, 'written while paused');
    assert.is((await get('/api/tasks/?limit=1&offset=0&ordering=-id', bob)).body.results[0].id, id);
    // The replica itself does not hold it: a read answered there would have been stale.
    assert.is(await onReplica(id), null);
    const counted = added(before, await reads());
    assert.is(counted['replica/current'], 0, JSON.stringify(counted));
    assert.is(counted['primary/lagging'], 5, JSON.stringify(counted));
  } finally {
    await pair.resumeReplay();
  }
  await pair.caughtUp();
  const before = await reads();
  assert.is((await get('/api/tasks/?page_size=7')).status, 200);
  assert.is(added(before, await reads())['replica/current'], 1);
});

Replicas('no stale answer across write-then-read sequences while replay pauses and resumes', async () => {
  let toggling = true;
  // Replay flips between paused and running every 100–250 ms until the sequences are done.
  const toggler = (async () => {
    for (let round = 0; toggling && round < 400; round += 1) {
      await pair.pauseReplay();
      await sleep(100 + (round % 4) * 50);
      await pair.resumeReplay();
      await sleep(100 + ((round + 2) % 4) * 50);
    }
  })();
  const before = await reads();
  const stale: string[] = [];
  const expect = (what: string, ok: boolean) => void (ok || stale.push(what));
  try {
    for (let i = 0; i < 40; i += 1) {
      const created = await request(app.base, 'POST', '/api/tasks/', { token: alice, body: { title: `seq ${i}` } });
      const id = created.body.id as number;
      expect(`${i}: own task`, (await get(`/api/tasks/${id}/`)).body.title === `seq ${i}`);
      expect(`${i}: own list`, (await get('/api/tasks/?ordering=-id&page_size=1')).body.results[0]?.id === id);
      const changed = await request(app.base, 'PATCH', `/api/tasks/${id}/`, {
        token: alice,
        body: { completed: true },
      });
      expect(`${i}: own change`, changed.status === 200 && (await get(`/api/tasks/${id}/`)).body.completed === true);
      expect(`${i}: own history`, (await get(`/api/tasks/${id}/events/`)).body.count === 2);
      const feed = await get('/api/events/?after=0&limit=1000');
      expect(`${i}: feed`, feed.body.results.filter((event: { task_id: number }) => event.task_id === id).length === 2);
      // Every other round bob reads once the replica has replayed alice's writes (it may be paused
      // again by then: that keeps what it has), so the replica answers some reads however fast
      // the rest runs; in the other rounds it may still lag.
      if (i % 2 === 0) await pair.caughtUp();
      // Another client that read after alice's answers (the task from the read cache, the list from PostgreSQL).
      const seen = await get(`/api/tasks/${id}/`, bob);
      expect(`${i}: other client`, seen.body.completed === true && seen.body.title === `seq ${i}`);
      expect(
        `${i}: other client's list`,
        (await get(`/api/tasks/?limit=1&offset=0&ordering=-id`, bob)).body.results[0]?.completed === true,
      );
    }
  } finally {
    toggling = false;
    await toggler;
    await pair.resumeReplay();
  }
  assert.equal(stale, []);
  const counted = added(before, await reads());
  const replica = counted['replica/current']!;
  const primary =
    counted['primary/lagging']! +
    counted['primary/error']! +
    counted['primary/unhealthy']! +
    counted['primary/head_unknown']!;
  console.log(
    `write-then-read: ${replica} reads on the replica, ${primary} on the primary (${JSON.stringify(counted)})`,
  );
  assert.is(replica + primary, 40 * 6);
  assert.ok(replica > 0, 'the replica answered some reads');
  assert.ok(counted['primary/lagging']! > 0, 'the primary answered while the replica lagged');
});

Replicas('a replica that dies does not fail reads: the primary answers them', async () => {
  await pair.caughtUp();
  await pair.killReplica();
  const before = await reads();
  const began = Date.now();
  for (let i = 0; i < 5; i += 1) {
    const created = await request(app.base, 'POST', '/api/tasks/', {
      token: alice,
      body: { title: `after the crash ${i}` },
    });
    const read = await get(`/api/tasks/${created.body.id}/`);
    assert.is(read.status, 200);
    assert.is(read.body.title, `after the crash ${i}`);
    assert.is((await get('/api/events/?after=0&limit=1000')).status, 200);
  }
  const counted = added(before, await reads());
  console.log(`after the crash: ${JSON.stringify(counted)} in ${Date.now() - began} ms`);
  assert.is(counted['replica/current'], 0);
  assert.ok(counted['primary/error']! >= 1, JSON.stringify(counted));
  assert.is(counted['primary/error']! + counted['primary/unhealthy']!, 10, JSON.stringify(counted));
  assert.ok(Date.now() - began < 30_000, `the reads took ${Date.now() - began} ms`);
});

Replicas.run();
