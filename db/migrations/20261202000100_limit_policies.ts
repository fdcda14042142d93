import { sql, type Kysely } from 'kysely';

/**
 * Plans and per-client overrides of the throttle's limits (docs/throttling.md "Plans and overrides"): every
 * user has a plan (`default`: the settings' rates); an override gives one user, address or prefix other rates
 * until a set time; every change an operator makes to either is a row of `limit_audit`.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('users')
    .addColumn('plan', 'text', (c) => c.notNull().defaultTo('default'))
    .execute();
  await db.schema
    .createTable('limit_overrides')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    // `user` with the user's id, or `address` with an address or CIDR prefix.
    .addColumn('target_kind', 'text', (c) => c.notNull().check(sql`target_kind in ('user', 'address')`))
    .addColumn('user_id', 'bigint', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('address', 'text')
    .addColumn('rates', 'jsonb', (c) => c.notNull())
    .addColumn('until', 'timestamptz', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('removed_at', 'timestamptz')
    .addCheckConstraint(
      'limit_overrides_target',
      sql`(target_kind = 'user' and user_id is not null and address is null) or (target_kind = 'address' and user_id is null and address is not null)`,
    )
    .execute();
  await db.schema
    .createIndex('limit_overrides_live_idx')
    .on('limit_overrides')
    .column('until')
    .where(sql.ref('removed_at'), 'is', null)
    .execute();
  await db.schema
    .createTable('limit_audit')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('target', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('before', 'jsonb')
    .addColumn('after', 'jsonb')
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('limit_audit').ifExists().execute();
  await db.schema.dropTable('limit_overrides').ifExists().execute();
  await db.schema.alterTable('users').dropColumn('plan').execute();
}
