import { sql } from 'kysely';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { eventFacts } from '../../../../src/events/projections/read-model-facts.js';
import { rebuildProjections } from '../../../../src/events/projections/rebuild.js';
import { aggregateReport } from '../../../../src/reports/aggregate.js';
import { startTestApp, type TestApp } from '../../../helpers/app.js';

// docs/architecture.md "Bounded work": a report reads the log from the first position recorded
// on or after its `from` day, not from position 0, and its numbers are the ones a read of the
// whole log gives (open tasks at the start included), for every owner and range.

const DAYS = 40;
const DAY_MS = 86_400_000;
const START = Date.parse('2026-09-01T00:00:00Z');
const OWNERS = ['ann', 'ben'];

const Bounds = suite<{ app: TestApp; upTo: number }>('a report reads from its from day');

/** 40 days of creates, completions, reopenings and deletions; one event recorded out of position order. */
Bounds.before(async (ctx) => {
  ctx.app = await startTestApp({}, 'report-bounds');
  type Row = {
    position: number;
    stream_id: number;
    version: number;
    type: string;
    data: string;
    metadata: string;
    recorded_at: string;
  };
  const rows: Row[] = [];
  const versions = new Map<number, number>();
  const state = new Map<number, 'open' | 'done' | 'gone'>();
  const add = (task: number, type: string, at: number, data: Record<string, unknown> = {}) => {
    versions.set(task, (versions.get(task) ?? 0) + 1);
    rows.push({
      position: rows.length + 1,
      stream_id: task,
      version: versions.get(task)!,
      type,
      data: JSON.stringify(data),
      metadata: JSON.stringify({ actor: 'x' }),
      recorded_at: new Date(at).toISOString(),
    });
  };
  let next = 1;
  for (let day = 0; day < DAYS; day++) {
    const at = (n: number) => START + day * DAY_MS + n * 60_000;
    for (let i = 0; i < 6; i++, next++) {
      const owner = OWNERS[next % 2];
      add(next, 'TaskCreated', at(i), {
        title: `T${next}`,
        description: '',
        completed: next % 5 === 0,
        owner_id: 1,
        owner,
      });
      state.set(next, next % 5 === 0 ? 'done' : 'open');
    }
    for (const [task, now] of [...state].filter(([t]) => t % 7 === day % 7)) {
      const type = now === 'open' ? 'TaskCompleted' : now === 'done' ? 'TaskReopened' : undefined;
      if (type) add(task, type, at(10 + task));
      if (type) state.set(task, now === 'open' ? 'done' : 'open');
    }
    for (const [task] of [...state].filter(([t, s]) => s !== 'gone' && t % 11 === day % 11).slice(0, 2)) {
      add(task, 'TaskDeleted', at(30 + task));
      state.set(task, 'gone');
    }
  }
  // Appended after the first event of day 20 but stamped the evening before (a transaction that
  // took its time to commit): it belongs to day 19.
  const dayTwenty = rows.findIndex((r) => String(r.recorded_at).startsWith('2026-09-21'));
  add(next, 'TaskCreated', START + 20 * DAY_MS - 1_000, {
    title: 'late',
    description: '',
    completed: false,
    owner_id: 1,
    owner: 'ann',
  });
  const late = rows.pop()!;
  rows.splice(dayTwenty + 1, 0, late);
  rows.forEach((row, i) => (row.position = i + 1));
  await ctx.app.deps.db.insertInto('events').values(rows).execute();
  await rebuildProjections(ctx.app.deps.db);
  ctx.upTo = rows.length;
});
Bounds.after(({ app }) => app?.close());

/** The numbers from a read of the whole log, as reports were made before. */
async function fromTheWholeLog(app: TestApp, upTo: number, from: string, to: string, owner: string | null) {
  const { rows } = await sql<{
    day: string;
    created: number;
    completed: number;
    reopened: number;
    deleted: number;
    open_delta: number;
  }>`
    select to_char(recorded_at at time zone 'UTC', 'YYYY-MM-DD') as day,
      count(*) filter (where type = 'TaskCreated')::int as created,
      count(*) filter (where type = 'TaskCompleted')::int as completed,
      count(*) filter (where type = 'TaskReopened')::int as reopened,
      count(*) filter (where type = 'TaskDeleted')::int as deleted,
      sum(open_delta)::int as open_delta
    from (${eventFacts(0, upTo)}) f where ${owner === null ? sql`true` : sql`owner = ${owner}`}
    group by 1 order by 1`.execute(app.deps.db);
  let open = rows.filter((r) => r.day < from).reduce((sum, r) => sum + r.open_delta, 0);
  const openAtStart = open;
  const days = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += DAY_MS) {
    const date = new Date(t).toISOString().slice(0, 10);
    const r = rows.find((row) => row.day === date);
    open += r?.open_delta ?? 0;
    days.push({
      date,
      created: r?.created ?? 0,
      completed: r?.completed ?? 0,
      reopened: r?.reopened ?? 0,
      deleted: r?.deleted ?? 0,
      open_at_end: open,
    });
  }
  return { openAtStart, days };
}

Bounds('every range and owner: the numbers of a read of the whole log', async ({ app, upTo }) => {
  for (const [from, to] of [
    ['2026-08-20', '2026-09-03'],
    ['2026-09-05', '2026-09-05'],
    ['2026-09-20', '2026-09-22'],
    ['2026-09-21', '2026-09-21'],
    ['2026-10-09', '2026-10-15'],
    ['2026-10-20', '2026-10-25'],
  ] as const) {
    for (const owner of [null, ...OWNERS]) {
      const report = await aggregateReport(app.deps.db, { from, to, owner }, { batchSize: 7 });
      const expected = await fromTheWholeLog(app, upTo, from, to, owner);
      const label = `${from}..${to} ${owner ?? 'everyone'}`;
      assert.is(report.open_at_start, expected.openAtStart, `${label}: open at start`);
      assert.equal(report.days, expected.days, label);
      assert.is(report.as_of_position, upTo);
    }
  }
});

Bounds('a report of the last days reads only the positions from its first day on', async ({ app, upTo }) => {
  const from = '2026-10-05';
  const { rows } = await sql<{ first: number }>`
    select min(position)::int as first from events where recorded_at >= ${new Date(`${from}T00:00:00Z`)}`.execute(
    app.deps.db,
  );
  const first = rows[0]!.first;
  assert.ok(first > upTo * 0.7, `the range starts late in the log: ${first} of ${upTo}`);
  const batches: number[] = [];
  await aggregateReport(
    app.deps.db,
    { from, to: '2026-10-10', owner: null },
    {
      batchSize: 10,
      onBatch: (position) => void batches.push(position),
    },
  );
  assert.ok(batches[0]! < first + 10, `the first batch ends near position ${first}: ${batches[0]}`);
  assert.ok(batches.length <= Math.ceil((upTo - first + 1) / 10), `${batches.length} batches`);
});

Bounds.run();
