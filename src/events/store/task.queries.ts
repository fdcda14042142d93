import { sql, type Kysely } from 'kysely';
import type { Database } from '../../../db/database.js';
import type { PageSource } from '../../pagination/types.js';
import { COUNTER_NAMES } from './batch-state.js';
import type { TaskState } from '../domain/task.events.js';
import { rowToTask } from './task.rows.js';

/** The task list as a paginated collection keyed by id. */
export function tasksSource(db: Kysely<Database>): PageSource<TaskState> {
  return {
    keyOf: (task) => task.id,
    async page(offset, limit, ordering) {
      // One statement, so the count (kept by the append transaction) and the rows come from one
      // snapshot; the lateral join still yields the count when the page is empty.
      const rows = await db
        .selectFrom('counters as c')
        .leftJoinLateral(
          (eb) => eb.selectFrom('tasks').selectAll().orderBy('id', ordering).limit(limit).offset(offset).as('t'),
          (join) => join.onTrue(),
        )
        .select(['c.value as total'])
        .select(['t.id', 't.title', 't.description', 't.completed', 't.owner_id', 't.owner', 't.created_at', 't.updated_at', 't.version'])
        .where('c.name', '=', COUNTER_NAMES.taskCount)
        .execute();
      const count = rows[0]?.total ?? 0;
      const items = rows.filter((r) => r.id !== null).map((r) => rowToTask(r as Parameters<typeof rowToTask>[0]));
      return { count, items };
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

/** One task's history as a paginated collection keyed by version. */
export function taskEventsSource(db: Kysely<Database>, taskId: number): PageSource<RecordedEvent> {
  const stream = () => db.selectFrom('events').select(eventColumns).where('stream_id', '=', taskId);
  return {
    keyOf: (event) => event.version,
    async page(offset, limit, ordering) {
      const [rows, total] = await Promise.all([
        stream().orderBy('version', ordering).limit(limit).offset(offset).execute(),
        db
          .selectFrom('events')
          .select(sql<number>`count(*)::int`.as('n'))
          .where('stream_id', '=', taskId)
          .executeTakeFirstOrThrow(),
      ]);
      return { count: total.n, items: rows.map(rowToEvent) };
    },
    async seek(key, limit, ordering) {
      let query = stream().orderBy('version', ordering).limit(limit);
      if (key !== null) query = query.where('version', ordering === 'asc' ? '>' : '<', key);
      return (await query.execute()).map(rowToEvent);
    },
  };
}

export async function streamExists(db: Kysely<Database>, taskId: number): Promise<boolean> {
  const row = await db.selectFrom('events').select('position').where('stream_id', '=', taskId).limit(1).executeTakeFirst();
  return row !== undefined;
}
