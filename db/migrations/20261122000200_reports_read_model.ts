import { sql, type Kysely } from 'kysely';

/**
 * Reports (state of each aggregation job, kept in PostgreSQL so it survives the loss of Redis),
 * the per-owner task counts read model and the checkpoints of asynchronous projections.
 * Idempotency bodies become `json`, which keeps the text as written, so a replay answers with the
 * very bytes of the original response (`jsonb` reorders keys).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('reports')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('pending', 'running', 'done', 'failed')`))
    .addColumn('params', 'jsonb', (c) => c.notNull())
    .addColumn('result', 'jsonb')
    .addColumn('error', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await db.schema
    .createIndex('reports_pending_idx')
    .on('reports')
    .column('created_at')
    .where(sql.ref('status'), 'in', ['pending', 'running'])
    .execute();

  await db.schema
    .createTable('owner_task_counts')
    .addColumn('owner', 'text', (c) => c.primaryKey())
    .addColumn('open', 'integer', (c) => c.notNull())
    .addColumn('completed', 'integer', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('projection_checkpoints')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('position', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.insertInto('projection_checkpoints').values({ name: 'owner_task_counts', position: 0 }).execute();

  await db.schema
    .alterTable('idempotency_keys')
    .alterColumn('body', (c) => c.setDataType('json'))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('idempotency_keys')
    .alterColumn('body', (c) => c.setDataType('jsonb'))
    .execute();
  for (const table of ['projection_checkpoints', 'owner_task_counts', 'reports']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
