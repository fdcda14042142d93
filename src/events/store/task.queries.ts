import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { Database, TasksTable } from '../../../db/database.js';
import type { Ordering, PageSource } from '../../pagination/types.js';
import { COUNTER_NAMES } from './batch-state.js';
import type { TaskState } from '../domain/task.events.js';
import { RANGE_SIZE } from './task-ranges.js';
import { rowToTask } from './task.rows.js';

type PageRow = { total: number } & (Selectable<TasksTable> | { id: null });

/**
 * The rows at [offset, offset + limit) of the task list in `ordering`, with the exact total, as
 * ONE statement, so the count, the range counts and the rows come from one snapshot (all three
 * are written by the same append transaction). It never skips rows with OFFSET from the start:
 * - `ranges`: the live tasks before each id range in walk order, a running sum over every row of
 *   `task_ranges` (ids issued / RANGE_SIZE rows: 1,000 small rows at 1M tasks, well under a
 *   millisecond, paid by shallow pages too);
 * - `start`: the one range holding the `offset`-th live task (none when the offset is past the
 *   end: the lateral read then finds nothing, and the count still comes back from `counters`);
 * - the page: an index range scan from that range's edge, skipping fewer than RANGE_SIZE rows.
 */
export function tasksPageQuery(offset: number, limit: number, ordering: Ordering): RawBuilder<PageRow> {
  const direction = sql.raw(ordering === 'asc' ? 'asc' : 'desc');
  const fromRange =
    ordering === 'asc' ? sql`t.id >= s.range_id * ${RANGE_SIZE}` : sql`t.id < (s.range_id + 1) * ${RANGE_SIZE}`;
  return sql<PageRow>`
    with ranges as (
      select range_id, live, sum(live) over (order by range_id ${direction}) - live as before
      from task_ranges
    ),
    start as (
      select range_id, before from ranges where before <= ${offset}::bigint and ${offset}::bigint < before + live
    )
    select c.value as total, p.*
    from counters c
    left join start s on true
    left join lateral (
      select t.* from tasks t where ${fromRange}
      order by t.id ${direction} offset ${offset}::bigint - s.before limit ${limit}::bigint
    ) p on true
    where c.name = ${COUNTER_NAMES.taskCount}`;
}

/** The task list as a paginated collection keyed by id. */
export function tasksSource(db: Kysely<Database>): PageSource<TaskState> {
  return {
    keyOf: (task) => task.id,
    async page(offset, limit, ordering) {
      const { rows } = await tasksPageQuery(offset, limit, ordering).execute(db);
      const items = rows.filter((r): r is PageRow & Selectable<TasksTable> => r.id !== null).map(rowToTask);
      return { count: rows[0]?.total ?? 0, items };
    },
    async seek(key, limit, ordering) {
      let query = db.selectFrom('tasks').selectAll().orderBy('id', ordering).limit(limit);
      if (key !== null) query = query.where('id', ordering === 'asc' ? '>' : '<', key);
      return (await query.execute()).map(rowToTask);
    },
  };
}

export async function findTask(db: Kysely<Database>, id: number): Promise<TaskState | null> {
  const row = await db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? rowToTask(row) : null;
}

/** An event as read back from the store; `data` and `metadata` as recorded. */
export interface RecordedEvent {
  position: number;
  streamId: number;
  version: number;
  type: string;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  recordedAt: Date;
}

export const eventColumns = ['position', 'stream_id', 'version', 'type', 'data', 'metadata', 'recorded_at'] as const;

export function rowToEvent(row: {
  position: number;
  stream_id: number;
  version: number;
  type: string;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  recorded_at: Date;
}): RecordedEvent {
  return {
    position: row.position,
    streamId: row.stream_id,
    version: row.version,
    type: row.type,
    data: row.data,
    metadata: row.metadata,
    recordedAt: row.recorded_at,
  };
}

/**
 * One task's history as a paginated collection keyed by version. A stream's versions are gapless
 * (1..v, docs/architecture.md "Events"), so its count is its last version and any page is a
 * version range: page and offset styles seek by key as task lists do, never OFFSET or count(*).
 */
export function taskEventsSource(db: Kysely<Database>, taskId: number): PageSource<RecordedEvent> {
  const stream = () => db.selectFrom('events').select(eventColumns).where('stream_id', '=', taskId);
  return {
    keyOf: (event) => event.version,
    async page(offset, limit, ordering) {
      const { rows } = await historyPageQuery(taskId, offset, limit, ordering).execute(db);
      const items = rows.filter((r): r is HistoryRow & EventRow => r.version !== null).map(rowToEvent);
      return { count: Number(rows[0]?.total ?? 0), items };
    },
    async seek(key, limit, ordering) {
      let query = stream().orderBy('version', ordering).limit(limit);
      if (key !== null) query = query.where('version', ordering === 'asc' ? '>' : '<', key);
      return (await query.execute()).map(rowToEvent);
    },
  };
}

type EventRow = Parameters<typeof rowToEvent>[0];
type HistoryRow = { total: number } & (EventRow | { version: null });

/**
 * The events at [offset, offset + limit) of one stream in `ordering`, with the stream's length, as
 * ONE statement: the last version (one index probe), then the version range those places hold.
 * A row with a null version carries the length alone (a page past the end).
 */
export function historyPageQuery(
  taskId: number,
  offset: number,
  limit: number,
  ordering: Ordering,
): RawBuilder<HistoryRow> {
  const direction = sql.raw(ordering === 'asc' ? 'asc' : 'desc');
  // Places are 0-based; version = place + 1 ascending, last version - place descending.
  const range =
    ordering === 'asc'
      ? sql`e.version > ${offset}::int and e.version <= ${offset}::int + ${limit}::int`
      : sql`e.version <= h.total - ${offset}::int and e.version > h.total - ${offset}::int - ${limit}::int`;
  return sql<HistoryRow>`
    with h as (
      select coalesce((select version from events where stream_id = ${taskId} order by version desc limit 1), 0) as total
    )
    select h.total, p.*
    from h
    left join lateral (
      select ${sql.join(eventColumns.map((c) => sql.ref(`e.${c}`)))} from events e
      where e.stream_id = ${taskId} and ${range}
      order by e.version ${direction}
    ) p on true`;
}

/** Who owns a task stream (from its `TaskCreated`), and whether its last event deleted it. */
export interface StreamFacts {
  ownerId: number | null;
  deleted: boolean;
}

/**
 * The facts of the streams among `taskIds` that exist (a stream with no event is absent): two
 * index lookups per stream, its first version and its last, however long its history.
 */
export async function streamFacts(db: Kysely<Database>, taskIds: readonly number[]): Promise<Map<number, StreamFacts>> {
  const facts = new Map<number, StreamFacts>();
  if (taskIds.length === 0) return facts;
  const { rows } = await sql<{ stream_id: number; owner_id: number | null; last_type: string }>`
    select e.stream_id, (e.data->>'owner_id')::bigint as owner_id,
      (select l.type from events l where l.stream_id = e.stream_id order by l.version desc limit 1) as last_type
    from events e
    where e.stream_id = any(${[...taskIds]}::bigint[]) and e.version = 1`.execute(db);
  for (const row of rows)
    facts.set(Number(row.stream_id), {
      ownerId: row.owner_id === null ? null : Number(row.owner_id),
      deleted: row.last_type === 'TaskDeleted',
    });
  return facts;
}
