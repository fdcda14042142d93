import type { Kysely } from 'kysely';

/**
 * `reports.seq`: a monotonic number in creation order, the key of the report list's pages and
 * cursors (report ids are random UUIDs, which cannot be walked in order). Existing rows are
 * numbered as PostgreSQL adds the column, in no promised order; reports created afterwards are
 * numbered as they are inserted.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('reports')
    .addColumn('seq', 'bigint', (c) => c.generatedAlwaysAsIdentity().notNull())
    .execute();
  await db.schema.createIndex('reports_user_seq_idx').on('reports').columns(['user_id', 'seq']).unique().execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('reports_user_seq_idx').ifExists().execute();
  await db.schema.alterTable('reports').dropColumn('seq').execute();
}
