import { sql, type Transaction } from 'kysely';
import type { Database } from '../../../db/database.js';

/**
 * Ids per row of `task_ranges` (range = floor(id / RANGE_SIZE)). A page at offset O costs the sum
 * over every range row (ids issued / RANGE_SIZE rows) plus at most RANGE_SIZE - 1 skipped index
 * entries inside the range that holds O. The two balance near sqrt(tasks): 1024 keeps both around
 * a thousand small rows at 1M tasks, and consecutive new ids land in one or two ranges per batch.
 * The first migration that creates the table copies this value; changing it needs a rebuild.
 */
export const RANGE_SIZE = 1024;

const rangeOf = (id: number) => Math.floor(id / RANGE_SIZE);

/**
 * Net change of live tasks per range for one batch: +1 per created id, -1 per deleted id (a task
 * created and deleted in the same batch nets 0). Every range that received a new id keeps an
 * entry, even at 0, so the table holds one row per range of ids ever issued, as a rebuild does.
 */
function rangeDeltas(created: readonly number[], gone: readonly number[]): Map<number, number> {
  const deltas = new Map<number, number>();
  for (const id of created) deltas.set(rangeOf(id), (deltas.get(rangeOf(id)) ?? 0) + 1);
  for (const id of gone) deltas.set(rangeOf(id), (deltas.get(rangeOf(id)) ?? 0) - 1);
  return deltas;
}

/**
 * Applies a batch's range deltas in one statement. Runs in the append transaction, under the
 * append lock, so the counts move with the tasks they count and no two writers race on a range.
 */
export async function writeRangeDeltas(
  trx: Transaction<Database>,
  created: readonly number[],
  gone: readonly number[],
): Promise<void> {
  const deltas = rangeDeltas(created, gone);
  if (deltas.size === 0) return;
  await sql`
    insert into task_ranges (range_id, live)
    select * from unnest(${[...deltas.keys()]}::bigint[], ${[...deltas.values()]}::integer[])
    on conflict (range_id) do update set live = task_ranges.live + excluded.live`.execute(trx);
}

/**
 * Recomputes `task_ranges` from `tasks`: one row per range from 0 to the last issued id's, zero
 * where every task of the range is gone, exactly what the live path leaves.
 */
export async function rebuildTaskRanges(trx: Transaction<Database>, lastTaskId: number): Promise<void> {
  await trx.deleteFrom('task_ranges').execute();
  if (lastTaskId <= 0) return;
  await sql`
    insert into task_ranges (range_id, live)
    select r.range_id, coalesce(n.live, 0)
    from generate_series(0, ${lastTaskId}::bigint / ${RANGE_SIZE}) as r(range_id)
    left join (select id / ${RANGE_SIZE} as range_id, count(*)::integer as live from tasks group by 1) n
      on n.range_id = r.range_id`.execute(trx);
}
