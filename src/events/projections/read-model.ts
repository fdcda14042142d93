import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../../db/database.js';
import { COUNTER_NAMES } from '../store/batch-state.js';
import { eventFacts } from './read-model-facts.js';

/** The checkpoint row of the per-owner task counts read model. */
const OWNER_COUNTS = 'owner_task_counts';

export interface ApplyOutcome {
  /** Events whose effect this call wrote (0 when all were already applied). */
  applied: number;
  /** The checkpoint after this call: every event up to it is counted, none after it. */
  checkpoint: number;
}

/**
 * Applies delivered feed events to the per-owner counts with an exactly-once effect. Delivery
 * is at least once: a batch may repeat or overlap one already applied, here or by another
 * process. In ONE transaction that holds the checkpoint row, events at or below the checkpoint
 * are dropped, the run that continues the checkpoint without a gap is applied, and the counts and
 * the new checkpoint are written together. Nothing else is applied; the caller reads on from the
 * returned checkpoint.
 */
export async function applyEvents(
  db: Kysely<Database>,
  delivered: ReadonlyArray<{ position: number }>,
): Promise<ApplyOutcome> {
  return db.transaction().execute(async (trx) => {
    const checkpoint = await lockCheckpoint(trx);
    const positions = new Set(delivered.map((e) => e.position));
    let upTo = checkpoint;
    while (positions.has(upTo + 1)) upTo += 1;
    if (upTo === checkpoint) return { applied: 0, checkpoint };
    await applyRange(trx, checkpoint, upTo);
    await setCheckpoint(trx, upTo);
    return { applied: upTo - checkpoint, checkpoint: upTo };
  });
}

/** The checkpoint, locked until the transaction ends so no other writer applies the same events. */
export async function lockCheckpoint(trx: Transaction<Database>): Promise<number> {
  const row = await trx
    .selectFrom('projection_checkpoints')
    .select('position')
    .where('name', '=', OWNER_COUNTS)
    .forUpdate()
    .executeTakeFirst();
  if (row) return row.position;
  await trx
    .insertInto('projection_checkpoints')
    .values({ name: OWNER_COUNTS, position: 0 })
    .onConflict((oc) => oc.doNothing())
    .execute();
  return lockCheckpoint(trx);
}

export async function setCheckpoint(trx: Transaction<Database>, position: number): Promise<void> {
  await trx
    .updateTable('projection_checkpoints')
    .set({ position, updated_at: sql`now()` })
    .where('name', '=', OWNER_COUNTS)
    .execute();
}

/** Adds the effect of the events in (`after`, `upTo`] to the counts; owners left with nothing are removed. */
export async function applyRange(trx: Transaction<Database>, after: number, upTo: number): Promise<void> {
  const { rows } = await sql<{ owner: string }>`
    insert into owner_task_counts (owner, open, completed)
    select owner, sum(open_delta), sum(completed_delta) from (${eventFacts(after, upTo)}) f group by owner
    on conflict (owner) do update
      set open = owner_task_counts.open + excluded.open, completed = owner_task_counts.completed + excluded.completed
    returning owner, open, completed`.execute(trx);
  const emptied = (rows as Array<{ owner: string; open: number; completed: number }>)
    .filter((r) => r.open === 0 && r.completed === 0)
    .map((r) => r.owner);
  if (emptied.length > 0) await trx.deleteFrom('owner_task_counts').where('owner', 'in', emptied).execute();
}

export interface OwnerCounts {
  /** Position of the last event counted. */
  as_of_position: number;
  /** Position of the last event appended; the difference is how far the read model lags. */
  last_position: number;
  results: Array<{ owner: string; open: number; completed: number }>;
}

/** The per-owner counts by owner name (one owner when `owner` is given), with how current they are. */
export async function readOwnerCounts(db: Kysely<Database>, owner?: string): Promise<OwnerCounts> {
  return db.transaction().execute(async (trx) => {
    await sql`set transaction isolation level repeatable read, read only`.execute(trx);
    let query = trx.selectFrom('owner_task_counts').select(['owner', 'open', 'completed']).orderBy('owner');
    if (owner !== undefined) query = query.where('owner', '=', owner);
    const [results, checkpoint, last] = await Promise.all([
      query.execute(),
      trx.selectFrom('projection_checkpoints').select('position').where('name', '=', OWNER_COUNTS).executeTakeFirst(),
      trx.selectFrom('counters').select('value').where('name', '=', COUNTER_NAMES.lastPosition).executeTakeFirst(),
    ]);
    return { as_of_position: checkpoint?.position ?? 0, last_position: last?.value ?? 0, results };
  });
}

/** The checkpoint as last committed, without locking it. */
export async function readCheckpoint(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('projection_checkpoints')
    .select('position')
    .where('name', '=', OWNER_COUNTS)
    .executeTakeFirst();
  return row?.position ?? 0;
}
