import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { sql } from 'kysely';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { rebuildProjections } from '../../../../src/events/projections/rebuild.js';
import { bullPrefix, REPORTS_QUEUE } from '../../../../src/reports/report-queue.js';
import { startProcessors } from '../../../../workers/processors.js';
import { startTestApp, type TestApp } from '../../../helpers/app.js';
import { request } from '../../../helpers/http.js';

let app: TestApp;
let alice: string;
let processors: { close(): Promise<void> };

/** Polls a report until it is finished (done or failed), for at most 30 s. */
async function finished(location: string, token = alice) {
  for (let i = 0; i < 300; i += 1) {
    const response = await request(app.base, 'GET', location, { token });
    if (response.status !== 200 || ['done', 'failed'].includes(response.body.status)) return response;
    await sleep(100);
  }
  throw new Error(`report ${location} did not finish`);
}

async function runReport(body: object, token = alice) {
  const accepted = await request(app.base, 'POST', '/api/reports/', { token, body });
  assert.is(accepted.status, 202, accepted.text);
  return finished(new URL(accepted.headers.get('location')!).pathname, token);
}

/**
 * Writes a known history straight into the log (the live path stamps events with the current
 * time; reports need days): [day, type, task, extra data]. Owners: tasks 1, 2, 5, 6 alice's, 3, 4 bob's.
 */
async function seedHistory(): Promise<void> {
  const owners: Record<number, string> = { 1: 'alice', 2: 'alice', 3: 'bob', 4: 'bob', 5: 'alice', 6: 'alice' };
  const history: Array<[string, string, number, Record<string, unknown>?]> = [
    ['2026-10-31T09:00:00Z', 'TaskCreated', 1],
    ['2026-10-31T10:00:00Z', 'TaskCreated', 2],
    ['2026-10-31T23:59:59Z', 'TaskCreated', 3, { completed: true }],
    ['2026-11-01T00:00:00Z', 'TaskCompleted', 1],
    ['2026-11-01T08:00:00Z', 'TaskCreated', 4],
    ['2026-11-01T23:00:00Z', 'TaskCreated', 5],
    ['2026-11-02T01:00:00Z', 'TaskReopened', 1],
    ['2026-11-02T02:00:00Z', 'TaskDeleted', 2],
    ['2026-11-02T03:00:00Z', 'TaskCompleted', 4],
    ['2026-11-04T05:00:00Z', 'TaskDeleted', 3],
    ['2026-11-04T06:00:00Z', 'TaskDetailsChanged', 5, { title: 'renamed' }],
    ['2026-11-04T23:59:59.999Z', 'TaskCompleted', 5],
    ['2026-11-05T00:00:00Z', 'TaskCreated', 6],
  ];
  const versions = new Map<number, number>();
  const rows = history.map(([at, type, task, extra], i) => {
    versions.set(task, (versions.get(task) ?? 0) + 1);
    const data =
      type === 'TaskCreated'
        ? { title: `T${task}`, description: '', completed: false, owner_id: 1, owner: owners[task], ...extra }
        : (extra ?? {});
    return {
      position: i + 1,
      stream_id: task,
      version: versions.get(task)!,
      type,
      data: JSON.stringify(data),
      metadata: JSON.stringify({ actor: owners[task] }),
      recorded_at: at,
    };
  });
  await app.deps.db.insertInto('events').values(rows).execute();
  // The projections (tasks, counters) follow from the log, as after `npm run rebuild`.
  await rebuildProjections(app.deps.db);
}

const day = (
  date: string,
  created: number,
  completed: number,
  reopened: number,
  deleted: number,
  open_at_end: number,
) => ({
  date,
  created,
  completed,
  reopened,
  deleted,
  open_at_end,
});

const Numbers = suite('reports over a known history');

Numbers.before(async () => {
  app = await startTestApp({ REPORT_BATCH_SIZE: '4', READ_MODEL_POLL_MS: '50' }, 'reports');
  alice = await app.login('alice');
  await seedHistory();
  processors = await startProcessors(app.deps);
});
Numbers.after(async () => {
  await processors.close();
  await app.close();
});

Numbers('every owner: counts per UTC day and open tasks at the end of each day', async () => {
  const report = await runReport({ from: '2026-11-01', to: '2026-11-04' });
  assert.is(report.body.status, 'done', report.text);
  const { as_of, ...result } = report.body.result;
  assert.ok(Date.parse(as_of) <= Date.parse(report.body.finished_at), `as_of ${as_of} is when the job read the log`);
  assert.equal(result, {
    from: '2026-11-01',
    to: '2026-11-04',
    owner: null,
    open_at_start: 2,
    days: [
      day('2026-11-01', 2, 1, 0, 0, 3),
      day('2026-11-02', 0, 1, 1, 1, 2),
      day('2026-11-03', 0, 0, 0, 0, 2),
      day('2026-11-04', 0, 1, 0, 1, 1),
    ],
    totals: { created: 2, completed: 3, reopened: 1, deleted: 2 },
    as_of_position: 13,
  });
  assert.is(report.body.attempts, 1);
  assert.ok(Date.parse(report.body.finished_at) >= Date.parse(report.body.started_at));
});

Numbers("one owner: only that owner's tasks count", async () => {
  const alices = await runReport({ from: '2026-11-01', to: '2026-11-04', owner: 'alice' });
  assert.equal(alices.body.result.days, [
    day('2026-11-01', 1, 1, 0, 0, 2),
    day('2026-11-02', 0, 0, 1, 1, 2),
    day('2026-11-03', 0, 0, 0, 0, 2),
    day('2026-11-04', 0, 1, 0, 0, 1),
  ]);
  const bobs = await runReport({ from: '2026-11-01', to: '2026-11-05', owner: 'bob' });
  assert.is(bobs.body.result.open_at_start, 0);
  assert.equal(
    bobs.body.result.days.map((d: { open_at_end: number }) => d.open_at_end),
    [1, 0, 0, 0, 0],
  );
  assert.equal(bobs.body.result.totals, { created: 1, completed: 1, reopened: 0, deleted: 1 });
});

Numbers("a report over today's live writes matches the tasks table", async () => {
  const created = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      request(app.base, 'POST', '/api/tasks/', { token: alice, body: { title: `live ${i}` } }),
    ),
  );
  const ids = created.map((r) => r.body.id as number);
  const [a, b, c] = ids;
  // Created concurrently: ids follow commit order, not the order of the array.
  const first = Math.min(...ids);
  await request(app.base, 'PATCH', `/api/tasks/${a}/`, { token: alice, body: { completed: true } });
  await request(app.base, 'PATCH', `/api/tasks/${b}/`, { token: alice, body: { completed: true } });
  await request(app.base, 'PATCH', `/api/tasks/${b}/`, { token: alice, body: { completed: false } });
  await request(app.base, 'DELETE', `/api/tasks/${c}/`, { token: alice });
  const today = new Date().toISOString().slice(0, 10);
  const report = await runReport({ from: today, to: today, owner: 'alice' });
  const { rows } = await sql<{
    open: number;
  }>`select count(*)::int as open from tasks where owner = 'alice' and not completed and id >= ${first}`.execute(
    app.deps.db,
  );
  assert.is(rows[0]!.open, 4);
  const { open_at_start, days } = report.body.result;
  assert.equal(days, [day(today, 6, 2, 1, 1, open_at_start + rows[0]!.open)]);
});

Numbers('a range that ends in the future stops at the day the report was made', async () => {
  const day0 = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
  const report = await runReport({ from: day0(-1), to: day0(10) });
  assert.is(report.body.status, 'done', report.text);
  const { days, as_of } = report.body.result;
  const today = as_of.slice(0, 10);
  assert.equal(
    days.map((d: { date: string }) => d.date),
    [day0(-1), today],
  );
});

Numbers('only the creator can read a report', async () => {
  const accepted = await request(app.base, 'POST', '/api/reports/', {
    token: alice,
    body: { from: '2026-11-01', to: '2026-11-01' },
  });
  const path = new URL(accepted.headers.get('location')!).pathname;
  const bob = await app.login('bob');
  assert.is((await request(app.base, 'GET', path, { token: bob })).status, 404);
  assert.is((await request(app.base, 'GET', path)).status, 401);
  assert.is((await request(app.base, 'GET', '/api/reports/not-a-uuid/', { token: alice })).status, 404);
  assert.is((await finished(path)).body.status, 'done');
});

Numbers('bad ranges get DRF-style field errors', async () => {
  const cases: Array<[unknown, Record<string, string[]>]> = [
    [{}, { from: ['This field is required.'], to: ['This field is required.'] }],
    [
      { from: '2026-11-31', to: '11/30/2026' },
      {
        from: ['Date has wrong format. Use one of these formats instead: YYYY-MM-DD.'],
        to: ['Date has wrong format. Use one of these formats instead: YYYY-MM-DD.'],
      },
    ],
    [{ from: '2026-11-30', to: '2026-11-01' }, { to: ['Ensure this date is on or after "from".'] }],
    [{ from: '2026-01-01', to: '2027-01-02' }, { to: ['Ensure the range spans no more than 366 days.'] }],
    [{ from: '2026-01-01', to: '2026-01-02', owner: { name: 'alice' } }, { owner: ['Not a valid string.'] }],
    [[], { non_field_errors: ['Invalid data. Expected a dictionary, but got list.'] }],
  ];
  for (const [body, errors] of cases) {
    const response = await request(app.base, 'POST', '/api/reports/', { token: alice, body });
    assert.is(response.status, 400, JSON.stringify(body));
    assert.equal(response.body, errors);
  }
  assert.is(
    (await request(app.base, 'POST', '/api/reports/', { body: { from: '2026-11-01', to: '2026-11-01' } })).status,
    401,
  );
});

const Failures = suite('a report that keeps failing');

Failures.before(async () => {
  app = await startTestApp({ JOB_ATTEMPTS: '2', JOB_BACKOFF_MS: '50' }, 'reports-failing');
  alice = await app.login('alice');
  processors = await startProcessors(app.deps);
});
Failures.after(async () => {
  await processors.close();
  await app.close();
});

Failures('is retried with back-off, ends failed with its error, and its job stays in the failed set', async () => {
  await request(app.base, 'POST', '/api/tasks/', { token: alice, body: { title: 'something to count' } });
  // The event log is unreachable for the whole run, so every attempt fails in PostgreSQL.
  await sql`alter table events rename to events_away`.execute(app.deps.db);
  const accepted = await request(app.base, 'POST', '/api/reports/', {
    token: alice,
    body: { from: '2026-11-01', to: '2026-11-02' },
  });
  const id = accepted.body.id as string;
  const report = await finished(`/api/reports/${id}/`);
  await sql`alter table events_away rename to events`.execute(app.deps.db);
  assert.is(report.body.status, 'failed');
  assert.is(report.body.attempts, 2);
  assert.ok(report.body.error.length > 0);
  assert.is(report.body.result, null);
  const queue = new Queue(REPORTS_QUEUE, {
    connection: { url: process.env.TEST_REDIS_URL },
    prefix: bullPrefix(app.deps.config),
  });
  try {
    const job = await queue.getJob(id);
    assert.is(await job?.getState(), 'failed');
    assert.is(job?.attemptsMade, 2);
  } finally {
    await queue.close();
  }
});

const Throttle = suite('the reports scope');

Throttle.before(async () => {
  app = await startTestApp({ THROTTLE_REPORTS: '2/min', THROTTLE_USER: '100/min' }, 'reports-throttle');
  alice = await app.login('alice');
});
Throttle.after(() => app.close());

Throttle(
  'POST /api/reports/ takes its own budget: 2 per minute, then the exact 429; polling keeps the general rate',
  async () => {
    const body = { from: '2026-11-01', to: '2026-11-02' };
    const first = await request(app.base, 'POST', '/api/reports/', { token: alice, body });
    const second = await request(app.base, 'POST', '/api/reports/', { token: alice, body });
    assert.equal([first.status, second.status], [202, 202]);
    assert.is(first.headers.get('ratelimit-policy'), '"reports";q=2;w=60');

    const third = await request(app.base, 'POST', '/api/reports/', { token: alice, body });
    assert.is(third.status, 429);
    const wait = Number(third.headers.get('retry-after'));
    assert.ok(wait >= 1 && wait <= 60, `Retry-After ${wait}`);
    assert.equal(third.body, {
      detail: `Request was throttled. Expected available in ${wait} second${wait === 1 ? '' : 's'}.`,
    });

    for (let i = 0; i < 5; i += 1) {
      const poll = await request(app.base, 'GET', new URL(first.headers.get('location')!).pathname, { token: alice });
      assert.is(poll.status, 200);
      assert.is(poll.headers.get('ratelimit-policy'), '"user";q=100;w=60');
    }
    const tasks = await request(app.base, 'POST', '/api/tasks/', { token: alice, body: { title: 'still allowed' } });
    assert.is(tasks.status, 201, 'the rest of the API keeps the general rate');
    assert.is(
      await app.deps.db
        .selectFrom('reports')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
        .then((r) => Number(r.n)),
      2,
    );
  },
);

const Listing = suite('GET /api/reports/');

Listing.before(async () => {
  app = await startTestApp({ PAGE_SIZE: '2', THROTTLE_REPORTS: '100/min' }, 'reports-list');
  alice = await app.login('alice');
});
Listing.after(() => app.close());

Listing("lists only one's own reports, in creation order, paginated in every style", async () => {
  const bob = await app.login('bob');
  const ids: string[] = [];
  for (const day of ['01', '02', '03']) {
    const accepted = await request(app.base, 'POST', '/api/reports/', {
      token: alice,
      body: { from: `2026-11-${day}`, to: `2026-11-${day}` },
    });
    assert.is(accepted.status, 202, accepted.text);
    ids.push(accepted.body.id);
  }
  assert.is(
    (await request(app.base, 'POST', '/api/reports/', { token: bob, body: { from: '2026-11-01', to: '2026-11-01' } }))
      .status,
    202,
  );

  assert.is((await request(app.base, 'GET', '/api/reports/')).status, 401);
  const first = await request(app.base, 'GET', '/api/reports/', { token: alice });
  assert.is(first.status, 200, first.text);
  assert.is(first.body.count, 3);
  assert.equal(
    first.body.results.map((r: { id: string }) => r.id),
    ids.slice(0, 2),
  );
  assert.equal(Object.keys(first.body.results[0]), [
    'id',
    'status',
    'params',
    'created_at',
    'started_at',
    'finished_at',
    'attempts',
    'result',
    'error',
  ]);
  assert.is(first.body.next, `${app.base}/api/reports/?page=2`);
  const second = await request(app.base, 'GET', new URL(first.body.next).pathname + new URL(first.body.next).search, {
    token: alice,
  });
  assert.equal(
    second.body.results.map((r: { id: string }) => r.id),
    [ids[2]],
  );

  const newest = await request(app.base, 'GET', '/api/reports/?ordering=-created_at&limit=1', { token: alice });
  assert.equal(
    newest.body.results.map((r: { id: string }) => r.id),
    [ids[2]],
  );
  const cursor = await request(app.base, 'GET', '/api/reports/?cursor=&page_size=2', { token: alice });
  assert.equal(
    cursor.body.results.map((r: { id: string }) => r.id),
    ids.slice(0, 2),
  );
  const rest = new URL(cursor.body.next);
  const after = await request(app.base, 'GET', rest.pathname + rest.search, { token: alice });
  assert.equal(
    after.body.results.map((r: { id: string }) => r.id),
    [ids[2]],
  );
  assert.is((await request(app.base, 'GET', '/api/reports/?ordering=id', { token: alice })).status, 400);
  const bobs = await request(app.base, 'GET', '/api/reports/', { token: bob });
  assert.is(bobs.body.count, 1);
});

Numbers.run();
Failures.run();
Throttle.run();
Listing.run();
