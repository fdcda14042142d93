import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { appendBatch } from '../../../src/events/store/append-batch.js';
import { evolve } from '../../../src/events/domain/evolve.js';
import { GroupCommitter } from '../../../src/events/store/group-commit.js';
import type { Actor, TaskCommand, TaskEvent, TaskState } from '../../../src/events/domain/task.events.js';
import { rowToTask } from '../../../src/events/store/task.rows.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

let app: TestApp;
const tokens: Record<string, string> = {};

const as = (user: string, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  request(app.base, method, path, { token: tokens[user], body, headers });

async function create(user: string, title: string): Promise<number> {
  const response = await as(user, 'POST', '/api/tasks/', { title });
  assert.is(response.status, 201, response.text);
  return response.body.id as number;
}

async function expectStatus(status: number, pending: Promise<{ status: number; text: string }>): Promise<void> {
  const response = await pending;
  assert.is(response.status, status, response.text);
}

/** What the store holds: every event in position order, the tasks projection, the counters. */
async function readStore() {
  const { db } = app.deps;
  const [events, rows, counters] = await Promise.all([
    db.selectFrom('events').selectAll().orderBy('position').execute(),
    db.selectFrom('tasks').selectAll().orderBy('id').execute(),
    db.selectFrom('counters').selectAll().execute(),
  ]);
  return {
    events,
    tasks: rows.map(rowToTask),
    counter: (name: string) => counters.find((c) => c.name === name)?.value,
  };
}

/** Replays every event, in position order, through `evolve`. */
function replay(events: Awaited<ReturnType<typeof readStore>>['events']): Map<number, TaskState | null> {
  const streams = new Map<number, TaskState | null>();
  for (const e of events) {
    const event = { type: e.type, data: e.data } as TaskEvent;
    streams.set(
      e.stream_id,
      evolve(streams.get(e.stream_id) ?? null, event, {
        streamId: e.stream_id,
        version: e.version,
        recordedAt: e.recorded_at,
      }),
    );
  }
  return streams;
}

const Replay = suite('the event log is the truth: replaying it gives the projection');

Replay.before(async () => {
  app = await startTestApp({}, 'event-store');
  for (const user of ['alice', 'bob', 'carol']) tokens[user] = await app.login(user);
});
Replay.after(() => app.close());

Replay('a scripted day of several users: replay equals the tasks table and the count counter', async () => {
  const [a1, a2, a3, b1, b2, c1] = await Promise.all([
    create('alice', 'A1'),
    create('alice', 'A2'),
    create('alice', 'A3'),
    create('bob', 'B1'),
    create('bob', 'B2'),
    create('carol', 'C1'),
  ]);
  await Promise.all([
    (async () => {
      await expectStatus(200, as('alice', 'PATCH', `/api/tasks/${a1}/`, { title: 'A1 renamed' }));
      await expectStatus(200, as('alice', 'PATCH', `/api/tasks/${a1}/`, { description: 'details' }));
      await expectStatus(200, as('alice', 'PATCH', `/api/tasks/${a1}/`, { completed: true }));
      await expectStatus(200, as('alice', 'PATCH', `/api/tasks/${a1}/`, { completed: false }));
    })(),
    expectStatus(
      200,
      as('bob', 'PATCH', `/api/tasks/${b1}/`, { title: 'B1 done', description: 'all of it', completed: true }),
    ),
    expectStatus(200, as('carol', 'PUT', `/api/tasks/${c1}/`, { title: 'C1 replaced', completed: true })),
    expectStatus(204, as('bob', 'DELETE', `/api/tasks/${b2}/`)),
    expectStatus(403, as('bob', 'PATCH', `/api/tasks/${a3}/`, { title: 'not yours' })),
  ]);
  await Promise.all([
    expectStatus(204, as('alice', 'DELETE', `/api/tasks/${a2}/`)),
    expectStatus(200, as('carol', 'PATCH', `/api/tasks/${c1}/`, { completed: false, description: 'again' })),
    create('bob', 'B3'),
    expectStatus(404, as('bob', 'PATCH', `/api/tasks/${b2}/`, { title: 'gone' })),
  ]);
  await Promise.all([create('carol', 'C2'), expectStatus(404, as('alice', 'DELETE', `/api/tasks/${a2}/`))]);

  const { events, tasks, counter } = await readStore();
  const replayed = replay(events);
  const live = [...replayed.values()].filter((t): t is TaskState => t !== null).sort((x, y) => x.id - y.id);
  assert.equal(live, tasks);
  assert.is(tasks.length, 6);
  assert.is(counter('tasks.count'), tasks.length);
  assert.is(counter('tasks.last_id'), Math.max(...replayed.keys()));
  assert.is(counter('events.last_position'), events.length);
  assert.equal(
    tasks.find((t) => t.id === a1),
    { ...tasks.find((t) => t.id === a1)!, title: 'A1 renamed', description: 'details', completed: false, version: 5 },
  );
  assert.equal([replayed.get(a2), replayed.get(b2)], [null, null]);
});

Replay("positions are 1..N without gaps; each stream's versions are 1..n; metadata names the actor", async () => {
  const { events } = await readStore();
  assert.equal(
    events.map((e) => e.position),
    events.map((_, i) => i + 1),
  );
  const versions = new Map<number, number[]>();
  for (const e of events) versions.set(e.stream_id, [...(versions.get(e.stream_id) ?? []), e.version]);
  for (const [stream, list] of versions)
    assert.equal(
      list,
      list.map((_, i) => i + 1),
      `stream ${stream}`,
    );
  for (const e of events) {
    if (e.type === 'TaskCreated') assert.is((e.data as { owner: string }).owner, e.metadata.actor);
    assert.ok(typeof e.metadata.request_id === 'string' && e.metadata.request_id.length > 0);
  }
  // Task ids follow creation order in the log: a task never appears after one with a larger id.
  const created = events.filter((e) => e.type === 'TaskCreated').map((e) => e.stream_id);
  assert.equal(
    created,
    [...created].sort((x, y) => x - y),
  );
});

Replay('two PATCHes with the same If-Match at once: exactly one 200, one 412, one event', async () => {
  for (let round = 0; round < 5; round += 1) {
    const id = await create('alice', `Race ${round}`);
    const before = (await readStore()).events.length;
    const responses = await Promise.all(
      ['left', 'right'].map((side) =>
        as('alice', 'PATCH', `/api/tasks/${id}/`, { title: `${side} ${round}` }, { 'If-Match': `"${id}-1"` }),
      ),
    );
    assert.equal(responses.map((r) => r.status).sort(), [200, 412], `round ${round}`);
    const winner = responses.find((r) => r.status === 200)!.body;
    const { events, tasks } = await readStore();
    assert.is(events.length, before + 1, `round ${round}`);
    assert.equal([tasks.find((t) => t.id === id)?.title, tasks.find((t) => t.id === id)?.version], [winner.title, 2]);
  }
});

const Group = suite('group commit: many concurrent commands, one ordered log');

Group.before(async () => {
  app = await startTestApp({ DATABASE_POOL_SIZE: '10' }, 'event-store-group');
  for (const user of ['alice', 'bob']) tokens[user] = await app.login(user);
});
Group.after(() => app.close());

Group('200 parallel POSTs get ids 1..200, each task exactly once, in shared transactions', async () => {
  const titles = Array.from({ length: 200 }, (_, i) => `Parallel ${i}`);
  // Both tokens known to the app first: 200 lookups of a new token from one address take turns, each bounded by
  // DATABASE_WAIT_MS (docs/architecture.md "Bounded work"), which is not what this test is about.
  for (const user of ['alice', 'bob'] as const) assert.is((await as(user, 'GET', '/api/tasks/')).status, 200);
  const responses = await Promise.all(
    titles.map((title, k) => as(k % 2 ? 'bob' : 'alice', 'POST', '/api/tasks/', { title })),
  );
  assert.equal([...new Set(responses.map((r) => r.status))], [201]);
  const idOf = new Map(responses.map((r) => [r.body.title as string, r.body.id as number]));
  assert.is(idOf.size, 200);
  assert.equal(
    [...idOf.values()].sort((x, y) => x - y),
    Array.from({ length: 200 }, (_, k) => k + 1),
  );
  const { events, tasks, counter } = await readStore();
  assert.equal(
    tasks.map((t) => [t.id, t.title]),
    [...idOf.entries()].map(([title, id]) => [id, title]).sort((x, y) => (x[0] as number) - (y[0] as number)),
  );
  assert.equal(
    events.map((e) => [e.position, e.stream_id]),
    tasks.map((t) => [t.id, t.id]),
  );
  assert.is(counter('tasks.count'), 200);
  const batches =
    (await app.deps.metrics.appendBatchSize.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
  assert.ok(batches < 200, `200 commands took ${batches} transactions: nothing was grouped`);
});

Group('a rejected command among concurrent creates fails only itself', async () => {
  const store = await readStore();
  const before = store.counter('tasks.last_id')!;
  const alicesTask = store.tasks.find((t) => t.owner === 'alice')!;
  const [forbidden, missing, ...created] = await Promise.all([
    as('bob', 'PATCH', `/api/tasks/${alicesTask.id}/`, { title: "bob edits alice's" }),
    as('alice', 'DELETE', '/api/tasks/99999/'),
    ...Array.from({ length: 30 }, (_, k) => as('alice', 'POST', '/api/tasks/', { title: `Mixed ${k}` })),
  ]);
  assert.equal([forbidden!.status, missing!.status], [403, 404]);
  assert.equal(
    created.map((r) => r.status),
    created.map(() => 201),
  );
  assert.equal(
    created.map((r) => r.body.id).sort((x, y) => x - y),
    Array.from({ length: 30 }, (_, k) => before + k + 1),
  );
  const { events } = await readStore();
  assert.equal(
    events.map((e) => e.position),
    events.map((_, k) => k + 1),
  );
});

const actor = (userId: number, username: string): Actor => ({ userId, username });
const createCommand = (title: string, who = actor(1, 'alice')): TaskCommand => ({
  type: 'CreateTask',
  actor: who,
  fields: { title, description: '', completed: false },
});

Group('one transaction for a mixed batch: each command is decided on its own, the rest commit', async () => {
  const { db } = app.deps;
  const start = (await readStore()).counter('tasks.last_id')!;
  const outcomes = await appendBatch(db, [
    createCommand('Batch one'),
    { type: 'ChangeTask', actor: actor(2, 'bob'), taskId: start + 1, fields: { title: 'bob was here' } },
    {
      type: 'ChangeTask',
      actor: actor(1, 'alice'),
      taskId: start + 1,
      fields: { completed: true },
      expectedVersion: 1,
    },
    { type: 'ChangeTask', actor: actor(1, 'alice'), taskId: start + 1, fields: { title: 'stale' }, expectedVersion: 1 },
    { type: 'DeleteTask', actor: actor(1, 'alice'), taskId: 999_999 },
    createCommand('Batch two'),
  ]);
  assert.equal(
    outcomes.map((o) => (o.ok ? 'ok' : o.error)),
    ['ok', 'forbidden', 'ok', 'version_conflict', 'not_found', 'ok'],
  );
  const { events, tasks } = await readStore();
  const appended = events.filter((e) => e.stream_id > start);
  assert.equal(
    appended.map((e) => [e.stream_id, e.version, e.type]),
    [
      [start + 1, 1, 'TaskCreated'],
      [start + 1, 2, 'TaskCompleted'],
      [start + 2, 1, 'TaskCreated'],
    ],
  );
  assert.equal(
    tasks.filter((t) => t.id > start).map((t) => [t.title, t.completed]),
    [
      ['Batch one', true],
      ['Batch two', false],
    ],
  );
});

Group('a batch the database refuses is retried command by command: only the bad one fails, no id is lost', async () => {
  const { db } = app.deps;
  const start = (await readStore()).counter('tasks.last_id')!;
  const sizes: number[] = [];
  const committer = new GroupCommitter(
    (batch) => appendBatch(db, batch),
    256,
    (size) => sizes.push(size),
  );
  // PostgreSQL text cannot hold NUL: this command fails the whole transaction it is in.
  const poison = createCommand('bad \u0000 title');
  const settled = await Promise.allSettled(
    [createCommand('G0'), createCommand('G1'), poison, createCommand('G2')].map((c) => committer.execute(c)),
  );
  await committer.close();
  assert.equal(sizes, [1, 3]);
  assert.equal(
    settled.map((s) => s.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
  );
  const ids = settled.flatMap((s) => (s.status === 'fulfilled' && s.value.ok && s.value.task ? [s.value.task.id] : []));
  assert.equal(ids, [start + 1, start + 2, start + 3]);
  const { events, counter } = await readStore();
  assert.equal(
    events.map((e) => e.position),
    events.map((_, k) => k + 1),
  );
  assert.is(counter('tasks.last_id'), start + 3);
  const late = await committer.execute(createCommand('after close')).then(
    () => 'accepted',
    () => 'refused',
  );
  assert.is(late, 'refused');
});

Group('a keyed create keeps its task in its record, written in its own transaction: both or neither', async () => {
  const { db } = app.deps;
  const keyed = (title: string): TaskCommand => ({
    type: 'CreateTask',
    actor: actor(1, 'alice'),
    fields: { title, description: '', completed: false },
    idempotency: { key: 'store-key', requestHash: `hash of ${title}` },
  });
  const record = () => db.selectFrom('idempotency_keys').selectAll().where('key', '=', 'store-key').executeTakeFirst();
  const last = (await readStore()).counter('tasks.last_id');
  const refused = await appendBatch(db, [keyed('Rolled back')], async () => {
    throw new Error('not published');
  }).then(
    () => 'committed',
    (error: Error) => error.message,
  );
  assert.is(refused, 'not published');
  assert.is(await record(), undefined, 'no record without its task');
  assert.is((await readStore()).counter('tasks.last_id'), last, 'no task without its record');

  const [created, again] = await appendBatch(db, [keyed('Kept'), keyed('Kept')]);
  if (!created?.ok || !created.task) throw new Error(`not created: ${JSON.stringify(created)}`);
  const task = created.task;
  assert.equal(again, { ok: true, replayed: { created: task } }, 'a repeat in the same batch gets the task');
  const row = await record();
  assert.equal([row?.status, row?.body, row?.resource_path], [null, null, null], 'the record holds no HTTP answer');
  await appendBatch(db, [
    { type: 'ChangeTask', actor: actor(1, 'alice'), taskId: task.id, fields: { title: 'Changed since' } },
  ]);
  const [later] = await appendBatch(db, [keyed('Kept')]);
  assert.equal(later, { ok: true, replayed: { created: task } }, 'a later repeat gets the task as it was created');
});

Replay.run();
Group.run();
