import { sql, type Kysely } from 'kysely';

/**
 * User administration (docs/operations.md "Users"): a user may be disabled, a token is marked
 * revoked rather than deleted (so its 401 can say so until it expires and is swept), and every
 * change an operator makes is a row of `user_audit`.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('users').addColumn('disabled_at', 'timestamptz').execute();
  await db.schema.alterTable('tokens').addColumn('revoked_at', 'timestamptz').execute();
  await db.schema.createIndex('tokens_user_id_idx').on('tokens').column('user_id').execute();
  await db.schema
    .createTable('user_audit')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('user_id', 'bigint', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('tokens_revoked', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('actor', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('user_audit').ifExists().execute();
  await db.schema.dropIndex('tokens_user_id_idx').ifExists().execute();
  // Revoked tokens were kept only to be named in their 401; before this migration they were deleted.
  await db.deleteFrom('tokens').where('revoked_at', 'is not', null).execute();
  await db.schema.alterTable('tokens').dropColumn('revoked_at').execute();
  await db.schema.alterTable('users').dropColumn('disabled_at').execute();
}
