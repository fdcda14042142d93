import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('users')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('username', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('tokens_expires_at_idx').on('tokens').column('expires_at').execute();

  await db.schema
    .createTable('events')
    .addColumn('position', 'bigint', (c) => c.primaryKey())
    .addColumn('stream_id', 'bigint', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .addColumn('metadata', 'jsonb', (c) => c.notNull())
    .addColumn('recorded_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('events_stream_version_key', ['stream_id', 'version'])
    .execute();

  await db.schema
    .createTable('tasks')
    .addColumn('id', 'bigint', (c) => c.primaryKey())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('completed', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('counters')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'bigint', (c) => c.notNull())
    .execute();
  await db
    .insertInto('counters')
    .values([
      { name: 'tasks.count', value: 0 },
      { name: 'tasks.last_id', value: 0 },
      { name: 'events.last_position', value: 0 },
    ])
    .execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('user_id', 'bigint', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('body', 'jsonb', (c) => c.notNull())
    .addColumn('resource_path', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('idempotency_keys_pkey', ['user_id', 'key'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['idempotency_keys', 'counters', 'tasks', 'events', 'tokens', 'users']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
