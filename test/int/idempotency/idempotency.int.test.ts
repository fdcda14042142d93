import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { sweepExpiredClaims } from '../../../src/idempotency/idempotency.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';

let app: TestApp;
let alice: string;
let bob: string;

const post = (path: string, body: unknown, key: string, token = alice) =>
  request(app.base, 'POST', path, { token, body, headers: { 'Idempotency-Key': key } });

const countOf = async (table: 'events' | 'tasks' | 'reports') =>
  Number(
    (
      await app.deps.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

/** What a client can compare between two answers: status, the body's exact bytes, and the headers it acts on. */
const visible = (r: TestResponse) => ({
  status: r.status,
  text: r.text,
  location: r.headers.get('location'),
  etag: r.headers.get('etag'),
});

const Tasks = suite('Idempotency-Key on POST /api/tasks/');

Tasks.before(async () => {
  // No jobs child runs here: reports stay pending, which is all these tests need.
  app = await startTestApp({}, 'idempotency');
  alice = await app.login('alice');
  bob = await app.login('bob');
});
Tasks.after(() => app.close());

Tasks('50 concurrent POSTs with one key create one task and get 50 identical answers', async () => {
  const responses = await Promise.all(
    Array.from({ length: 50 }, () => post('/api/tasks/', { title: 'Once' }, 'key-concurrent')),
  );
  assert.is(await countOf('tasks'), 1);
  assert.is(await countOf('events'), 1);
  const first = visible(responses[0]!);
  assert.is(first.status, 201, responses[0]!.text);
  for (const response of responses) assert.equal(visible(response), first);
  assert.is(
    responses.filter((r) => r.headers.get('idempotent-replayed') !== 'true').length,
    1,
    'exactly one answer created the task',
  );
});

Tasks('a later repeat replays the original answer byte for byte and appends nothing', async () => {
  const original = await post('/api/tasks/', { title: 'Buy milk', description: 'two litres' }, 'key-repeat');
  const events = await countOf('events');
  await request(app.base, 'PATCH', `/api/tasks/${original.body.id}/`, {
    token: alice,
    body: { title: 'Changed since' },
  });
  const repeat = await post('/api/tasks/', { title: 'Buy milk', description: 'two litres' }, 'key-repeat');
  assert.equal(visible(repeat), visible(original));
  assert.is(repeat.headers.get('idempotent-replayed'), 'true');
  assert.is(await countOf('events'), events + 1, 'only the PATCH appended');
});

Tasks('the same key with a different body is a 422 that says so', async () => {
  await post('/api/tasks/', { title: 'First' }, 'key-mismatch');
  const tasks = await countOf('tasks');
  const other = await post('/api/tasks/', { title: 'Second' }, 'key-mismatch');
  assert.is(other.status, 422);
  assert.equal(other.body, { detail: 'Idempotency-Key was already used with a different request body or endpoint.' });
  assert.is(await countOf('tasks'), tasks);
});

Tasks('keys belong to their user', async () => {
  const mine = await post('/api/tasks/', { title: 'Same key' }, 'key-shared', alice);
  const theirs = await post('/api/tasks/', { title: 'Same key' }, 'key-shared', bob);
  assert.is(theirs.status, 201);
  assert.is(theirs.headers.get('idempotent-replayed'), null);
  assert.is.not(theirs.body.id, mine.body.id);
});

Tasks('after 24 hours a key is forgotten and creates again', async () => {
  const first = await post('/api/tasks/', { title: 'Daily' }, 'key-expiring');
  await sql`update idempotency_keys set created_at = now() - interval '24 hours 1 minute' where key = 'key-expiring'`.execute(
    app.deps.db,
  );
  const again = await post('/api/tasks/', { title: 'Daily' }, 'key-expiring');
  assert.is(again.status, 201);
  assert.is(again.headers.get('idempotent-replayed'), null);
  assert.is(again.body.id, first.body.id + 1);
});

Tasks('the sweep deletes only records past 24 hours, in batches of the size asked', async () => {
  for (const key of ['sweep-a', 'sweep-b', 'sweep-c', 'sweep-live']) await post('/api/tasks/', { title: key }, key);
  await sql`update idempotency_keys set created_at = now() - interval '24 hours 1 minute' where key in ('sweep-a', 'sweep-b', 'sweep-c')`.execute(
    app.deps.db,
  );
  const keys = async () =>
    (
      await app.deps.db
        .selectFrom('idempotency_keys')
        .select('key')
        .where('key', 'like', 'sweep-%')
        .orderBy('key')
        .execute()
    ).map((r) => r.key);
  assert.is(await sweepExpiredClaims(app.deps.db, 2), 2);
  assert.is((await keys()).length, 2);
  assert.is(await sweepExpiredClaims(app.deps.db, 2), 1);
  assert.equal(await keys(), ['sweep-live']);
  assert.is(await sweepExpiredClaims(app.deps.db, 2), 0);
  const repeat = await post('/api/tasks/', { title: 'sweep-live' }, 'sweep-live');
  assert.is(repeat.headers.get('idempotent-replayed'), 'true', 'a live key still replays');
});

Tasks('a record that holds a rendered answer (written before records kept the task) still replays it', async () => {
  const original = await post('/api/tasks/', { title: 'Older record' }, 'key-rendered');
  // What a record of the release before 20261128000100_idempotency_resource holds.
  await sql`update idempotency_keys
    set status = 201, body = ${original.text}::json, resource_path = ${`/api/tasks/${original.body.id}/`},
      resource = null
    where key = 'key-rendered'`.execute(app.deps.db);
  await request(app.base, 'DELETE', `/api/tasks/${original.body.id}/`, { token: alice });
  const repeat = await post('/api/tasks/', { title: 'Older record' }, 'key-rendered');
  assert.equal(visible(repeat), visible(original));
  assert.is(repeat.headers.get('idempotent-replayed'), 'true');
});

Tasks('a key longer than 255 characters is refused', async () => {
  const response = await post('/api/tasks/', { title: 'Long key' }, 'k'.repeat(256));
  assert.is(response.status, 400);
});

const Reports = suite('Idempotency-Key on POST /api/reports/');

Reports.before(async () => {
  app = await startTestApp({}, 'idempotency-reports');
  alice = await app.login('alice');
  bob = await app.login('bob');
});
Reports.after(() => app.close());

const range = { from: '2026-11-01', to: '2026-11-30' };

Reports('20 concurrent requests with one key record one report and answer alike', async () => {
  const responses = await Promise.all(Array.from({ length: 20 }, () => post('/api/reports/', range, 'report-key')));
  assert.is(await countOf('reports'), 1);
  const first = visible(responses[0]!);
  assert.is(first.status, 202, responses[0]!.text);
  for (const response of responses) assert.equal(visible(response), first);
  assert.ok(first.location?.endsWith(`/api/reports/${responses[0]!.body.id}/`));
});

Reports('a repeat replays, a different range is a 422, and another user gets their own report', async () => {
  const original = await post('/api/reports/', { ...range, owner: 'alice' }, 'report-repeat');
  const repeat = await post('/api/reports/', { ...range, owner: 'alice' }, 'report-repeat');
  assert.equal(visible(repeat), visible(original));
  assert.is(repeat.headers.get('idempotent-replayed'), 'true');

  const different = await post('/api/reports/', { ...range, owner: 'bob' }, 'report-repeat');
  assert.is(different.status, 422);
  assert.equal(different.body, {
    detail: 'Idempotency-Key was already used with a different request body or endpoint.',
  });

  const theirs = await post('/api/reports/', { ...range, owner: 'alice' }, 'report-repeat', bob);
  assert.is(theirs.status, 202);
  assert.is.not(theirs.body.id, original.body.id);
  assert.is(await countOf('reports'), 3);
});

Reports('a repeat after the report is done still replays the answer it first got', async () => {
  const original = await post('/api/reports/', range, 'report-done');
  await app.deps.db
    .updateTable('reports')
    .set({ status: 'done', attempts: 1, result: JSON.stringify({ done: true }), finished_at: new Date() })
    .where('id', '=', original.body.id)
    .execute();
  const repeat = await post('/api/reports/', range, 'report-done');
  assert.equal(visible(repeat), visible(original));
  assert.is(repeat.body.status, 'pending');
  assert.is(repeat.headers.get('idempotent-replayed'), 'true');
});

Reports('a key used for a task cannot be reused for a report', async () => {
  await post('/api/tasks/', { title: 'Keyed' }, 'one-key-two-uses');
  const report = await post('/api/reports/', range, 'one-key-two-uses');
  assert.is(report.status, 422);
});

Tasks.run();
Reports.run();
