import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../../db/connect.js';
import type { Database } from '../../../../db/database.js';
import * as taskRangesMigration from '../../../../db/migrations/20261124000100_task_ranges.js';
import { seedCompletedHistory } from '../../../helpers/seed-events.js';
import { rebuildProjections } from '../../../../src/events/projections/rebuild.js';
import { appendBatch } from '../../../../src/events/store/append-batch.js';
import { RANGE_SIZE } from '../../../../src/events/store/task-ranges.js';
import { tasksPageQuery, tasksSource } from '../../../../src/events/store/task.queries.js';
import type { Actor, TaskCommand } from '../../../../src/events/domain/task.events.js';
import type { Ordering } from '../../../../src/pagination/types.js';
import { startTestApp, type TestApp } from '../../../helpers/app.js';
import { request } from '../../../helpers/http.js';
import { random } from '../../../helpers/random.js';

// Page-number and limit/offset pages read from the id range that holds their offset
// (`task_ranges`) instead of skipping every row before it: same rows as OFFSET, exact count, with
// deletes anywhere, and at most one range of skipped rows at any depth.

const actor: Actor = { userId: 1, username: 'pager' };
const createTask = (title: string): TaskCommand => ({
  type: 'CreateTask',
  actor,
  fields: { title, description: '', completed: false },
});
const deleteTask = (taskId: number): TaskCommand => ({ type: 'DeleteTask', actor, taskId });

/** Runs commands through the append path, `size` per transaction; fails on any refusal. */
async function append(db: Kysely<Database>, commands: TaskCommand[], size = 500): Promise<void> {
  for (let i = 0; i < commands.length; i += size) {
    const outcomes = await appendBatch(db, commands.slice(i, i + size));
    assert.ok(
      outcomes.every((o) => o.ok),
      JSON.stringify(outcomes.find((o) => !o.ok)),
    );
  }
}

/** What plain OFFSET gives: the reference every page is compared with. */
async function offsetPage(db: Kysely<Database>, offset: number, limit: number, ordering: Ordering) {
  const [items, total] = await Promise.all([
    db.selectFrom('tasks').select('id').orderBy('id', ordering).offset(offset).limit(limit).execute(),
    db
      .selectFrom('tasks')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow(),
  ]);
  return { count: Number(total.n), ids: items.map((t) => t.id) };
}

async function expectSameAsOffset(
  db: Kysely<Database>,
  offset: number,
  limit: number,
  ordering: Ordering,
): Promise<void> {
  const page = await tasksSource(db).page(offset, limit, ordering);
  const expected = await offsetPage(db, offset, limit, ordering);
  assert.equal(
    { count: page.count, ids: page.items.map((t) => t.id) },
    expected,
    `offset ${offset} limit ${limit} ${ordering}`,
  );
}

/** Live tasks before each range in ascending walk order: where range boundaries fall as offsets. */
async function rangeBoundaries(db: Kysely<Database>): Promise<number[]> {
  const ranges = await db.selectFrom('task_ranges').select('live').orderBy('range_id').execute();
  let before = 0;
  return ranges.map((r) => (before += r.live) - r.live);
}

let app: TestApp;
const Exact = suite('deep pages equal the OFFSET result, with deletes anywhere');

Exact.before(async () => {
  app = await startTestApp({}, 'deep-pages');
  const next = random(20261124);
  await append(
    app.deps.db,
    Array.from({ length: 4_000 }, (_, i) => createTask(`task ${i + 1}`)),
  );
  // A random third anywhere, every task of one whole range, and the first and last ids.
  const doomed = new Set([1, 4_000]);
  for (let id = 1; id <= 4_000; id += 1)
    if (next() < 0.33 || (id >= RANGE_SIZE * 2 && id < RANGE_SIZE * 3)) doomed.add(id);
  await append(app.deps.db, [...doomed].sort(() => next() - 0.5).map(deleteTask), 300);
  // A task created and deleted within one batch, next to ones that stay.
  await append(app.deps.db, [createTask('stays'), createTask('goes'), deleteTask(4_002), createTask('stays too')]);
});
Exact.after(() => app.close());

Exact('the range counts match the tasks table, one row per range of issued ids', async () => {
  const db = app.deps.db;
  const ranges = await db.selectFrom('task_ranges').selectAll().orderBy('range_id').execute();
  const { rows } = await sql<{
    range_id: number;
    live: number;
  }>`select id / ${RANGE_SIZE} as range_id, count(*)::int as live from tasks group by 1`.execute(db);
  const counted = new Map(rows.map((r) => [r.range_id, r.live]));
  assert.equal(
    ranges.map((r) => r.range_id),
    Array.from({ length: Math.floor(4_003 / RANGE_SIZE) + 1 }, (_, i) => i),
  );
  for (const r of ranges) assert.is(r.live, counted.get(r.range_id) ?? 0, `range ${r.range_id}`);
  assert.is(ranges.find((r) => r.range_id === 2)!.live, 0);
});

Exact("the migration's backfill gives what the append path kept", async () => {
  const db = app.deps.db;
  const kept = await db.selectFrom('task_ranges').selectAll().orderBy('range_id').execute();
  await db.transaction().execute(async (trx) => {
    await taskRangesMigration.down(trx);
    await taskRangesMigration.up(trx);
  });
  assert.equal(await db.selectFrom('task_ranges').selectAll().orderBy('range_id').execute(), kept);
});

Exact('random pages, range boundaries, the ends and past them: same rows as OFFSET, exact count', async () => {
  const db = app.deps.db;
  const { count } = await offsetPage(db, 0, 0, 'asc');
  const next = random(7);
  const cases: Array<[number, number, Ordering]> = [];
  for (const ordering of ['asc', 'desc'] as const) {
    for (const edge of [0, 1, count - 1, count, count + 1, count + 1_000_000, Number.MAX_SAFE_INTEGER])
      cases.push([edge, 10, ordering], [edge, 0, ordering]);
    for (const b of await rangeBoundaries(db)) {
      const mirrored = count - b;
      for (const at of [b - 1, b, b + 1, mirrored - 1, mirrored, mirrored + 1])
        if (at >= 0) cases.push([at, 7, ordering]);
      if (b >= 3) cases.push([b - 3, 10, ordering], [b - 3, RANGE_SIZE + 5, ordering]);
    }
  }
  for (let i = 0; i < 250; i += 1)
    cases.push([Math.floor(next() * (count + 20)), 1 + Math.floor(next() * 120), next() < 0.5 ? 'asc' : 'desc']);
  for (const [offset, limit, ordering] of cases) await expectSameAsOffset(db, offset, limit, ordering);
});

Exact('over HTTP, page numbers and limit/offset in both orderings', async () => {
  const db = app.deps.db;
  const { count } = await offsetPage(db, 0, 0, 'asc');
  for (const [query, offset, limit, ordering] of [
    ['?page=150&page_size=10', 1_490, 10, 'asc'],
    ['?page=2&page_size=100&ordering=-id', 100, 100, 'desc'],
    [`?page=${Math.ceil(count / 10)}`, Math.floor((count - 1) / 10) * 10, 10, 'asc'],
    ['?limit=10&offset=1360', 1_360, 10, 'asc'],
    ['?limit=50&offset=2000&ordering=-id', 2_000, 50, 'desc'],
    [`?limit=10&offset=${count + 5}`, count + 5, 10, 'asc'],
  ] as const) {
    const response = await request(app.base, 'GET', `/api/tasks/${query}`);
    assert.is(response.status, 200, `${query}: ${response.text}`);
    const expected = await offsetPage(db, offset, limit, ordering);
    assert.equal(
      { count: response.body.count, ids: response.body.results.map((t: { id: number }) => t.id) },
      expected,
      query,
    );
  }
  assert.is((await request(app.base, 'GET', `/api/tasks/?page=${Math.ceil(count / 10) + 1}`)).status, 404);
});

Exact.run();

const Cost = suite('at 100,000 tasks a deep page reads at most one range of skipped rows');
const TASKS = 100_000;
let big: TestApp;
let client: pg.Client;

Cost.before(async () => {
  big = await startTestApp({}, 'deep-pages-cost');
  // Seeded over a connection of its own with no statement timeout, as the CLI's rebuild runs: writing 100,000
  // tasks may take longer than a request's timeout on a loaded host.
  const seeder = connectDatabase(big.databaseUrl, 2);
  try {
    await seedCompletedHistory(seeder, {
      tasks: TASKS,
      owner: { id: actor.userId, username: actor.username },
      start: new Date('2026-11-01T00:00:00Z'),
      spanMs: 86_400_000,
    });
    await rebuildProjections(seeder, { batchSize: 50_000 });
    // Deletes through the append path, scattered over the whole id space.
    const next = random(11);
    const doomed = new Set(Array.from({ length: 3_000 }, () => 1 + Math.floor(next() * TASKS)));
    await append(seeder, [...doomed].map(deleteTask), 1_000);
  } finally {
    await seeder.destroy();
  }
  client = new pg.Client({ connectionString: big.databaseUrl });
  await client.connect();
  await client.query('analyze tasks; analyze task_ranges');
});
Cost.after(async () => {
  await client?.end();
  await big?.close();
});

/**
 * EXPLAIN ANALYZE of a compiled statement with its own parameters bound: the rows the plan's
 * scans of `tasks` produced or filtered away, over all their loops.
 */
async function tasksRowsRead(statement: { sql: string; parameters: readonly unknown[] }): Promise<number> {
  const { rows } = await client.query(`explain (analyze, format json) ${statement.sql}`, [...statement.parameters]);
  let read = 0;
  const visit = (plan: Record<string, any>) => {
    if (plan['Relation Name'] === 'tasks')
      read += (plan['Actual Rows'] + (plan['Rows Removed by Filter'] ?? 0)) * plan['Actual Loops'];
    for (const child of plan.Plans ?? []) visit(child);
  };
  visit(rows[0]['QUERY PLAN'][0].Plan);
  return read;
}

Cost(
  'deep page-number and limit/offset pages, both orderings: same rows as OFFSET, at most RANGE_SIZE + limit rows read',
  async () => {
    const db = big.deps.db;
    const { count } = await offsetPage(db, 0, 0, 'asc');
    assert.ok(count >= TASKS - 3_000 && count < TASKS, `${count} live tasks`);
    for (const [offset, limit, ordering] of [
      [count - 10, 10, 'asc'],
      [95_000, 100, 'asc'],
      [50_017, 10, 'desc'],
      [count - 1, 10, 'desc'],
    ] as const) {
      await expectSameAsOffset(db, offset, limit, ordering);
      const read = await tasksRowsRead(tasksPageQuery(offset, limit, ordering).compile(db));
      assert.ok(read <= RANGE_SIZE + limit, `offset ${offset} ${ordering}: ${read} rows of tasks read`);
      const old = await tasksRowsRead(
        db.selectFrom('tasks').selectAll().orderBy('id', ordering).offset(offset).limit(limit).compile(),
      );
      assert.ok(old >= offset, `the same measurement sees OFFSET read every skipped row: ${old}`);
    }
  },
);

Cost.run();
