import { sql, type Kysely } from 'kysely';

/** Ids per range; the value of RANGE_SIZE (src/events/store/task-ranges.ts) when this was written. */
const RANGE_SIZE = 1024;
/** The append lock of src/events/store/append-batch.ts. */
const APPEND_LOCK = 7_310_002;

/**
 * `task_ranges`: live tasks per fixed range of ids (range = floor(id / RANGE_SIZE)), so a page at
 * any offset finds its starting range from cumulative counts instead of skipping rows. Backfilled
 * from `tasks` under the append lock, so no append lands between the count and the commit: one
 * row per range from 0 to the last issued id's, as the append path and the rebuild keep it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_ranges')
    .addColumn('range_id', 'bigint', (c) => c.primaryKey())
    .addColumn('live', 'integer', (c) => c.notNull())
    .execute();
  await sql`select pg_advisory_xact_lock(${APPEND_LOCK})`.execute(db);
  await sql`
    insert into task_ranges (range_id, live)
    select r.range_id, coalesce(n.live, 0)
    from counters c
    cross join lateral generate_series(0, c.value / ${sql.lit(RANGE_SIZE)}) as r(range_id)
    left join (select id / ${sql.lit(RANGE_SIZE)} as range_id, count(*)::integer as live from tasks group by 1) n on n.range_id = r.range_id
    where c.name = 'tasks.last_id' and c.value > 0`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_ranges').ifExists().execute();
}
