import { sql, type Transaction } from 'kysely';
import type { Database } from '../../../db/database.js';
import { storeClaims, type UserClaim } from '../../idempotency/idempotency.js';
import { COUNTER_NAMES, type Counters } from './batch-state.js';
import type { StoredEvent, TaskState } from '../domain/task.events.js';
import { writeRangeDeltas } from './task-ranges.js';
import { taskToRow } from './task.rows.js';

/** Everything a batch changes, written in a handful of statements whatever its size. */
export interface BatchWrites {
  events: StoredEvent[];
  tasks: Map<number, TaskState | null>;
  /** Ids of the tasks this batch created (some may be deleted again within it), for `task_ranges`. */
  created: number[];
  /** The records of keyed creates, each with the task as created. */
  idempotency: Array<UserClaim & { resource: TaskState }>;
  counters: Counters;
}

/** Keeps multi-row statements under PostgreSQL's 65,535 bind parameters. */
const CHUNK = 2_000;

export async function writeBatch(
  trx: Transaction<Database>,
  writes: BatchWrites,
  before: Readonly<Counters>,
): Promise<void> {
  for (const chunk of chunks(writes.events)) {
    await trx
      .insertInto('events')
      .values(
        chunk.map((e) => ({
          position: e.position,
          stream_id: e.streamId,
          version: e.version,
          type: e.type,
          data: JSON.stringify(e.data),
          metadata: JSON.stringify(e.metadata),
          recorded_at: e.recordedAt,
        })),
      )
      .execute();
  }
  const live = [...writes.tasks.values()].filter((t): t is TaskState => t !== null);
  const gone = [...writes.tasks.entries()].filter(([, t]) => t === null).map(([id]) => id);
  for (const chunk of chunks(live)) {
    await trx
      .insertInto('tasks')
      .values(chunk.map(taskToRow))
      .onConflict((oc) =>
        oc.column('id').doUpdateSet((eb) => ({
          title: eb.ref('excluded.title'),
          description: eb.ref('excluded.description'),
          completed: eb.ref('excluded.completed'),
          updated_at: eb.ref('excluded.updated_at'),
          version: eb.ref('excluded.version'),
        })),
      )
      .execute();
  }
  if (gone.length > 0) await trx.deleteFrom('tasks').where('id', 'in', gone).execute();
  await writeRangeDeltas(trx, writes.created, gone);
  await storeClaims(trx, writes.idempotency);
  await writeCounters(trx, writes.counters, before);
}

async function writeCounters(trx: Transaction<Database>, after: Counters, before: Readonly<Counters>): Promise<void> {
  const changed = (Object.keys(COUNTER_NAMES) as Array<keyof Counters>).filter((k) => after[k] !== before[k]);
  if (changed.length === 0) return;
  const cases = sql.join(
    changed.map((k) => sql`when ${COUNTER_NAMES[k]} then ${after[k]}::bigint`),
    sql` `,
  );
  await trx
    .updateTable('counters')
    .set({ value: sql`case name ${cases} end` })
    .where(
      'name',
      'in',
      changed.map((k) => COUNTER_NAMES[k]),
    )
    .execute();
}

function* chunks<T>(items: T[]): Generator<T[]> {
  for (let i = 0; i < items.length; i += CHUNK) yield items.slice(i, i + CHUNK);
}
