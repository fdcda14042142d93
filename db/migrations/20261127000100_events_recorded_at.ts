import type { Kysely } from 'kysely';

/**
 * `events (recorded_at, position)`: a report finds the first position recorded on or after its
 * `from` day with one index range read, and starts there instead of at position 0
 * (docs/architecture.md "Bounded work").
 */
export async function up(db: Kysely<any>): Promise<void> {
  // ifNotExists: on a large log an operator may build it first with CREATE INDEX CONCURRENTLY.
  await db.schema
    .createIndex('events_recorded_at_idx')
    .ifNotExists()
    .on('events')
    .columns(['recorded_at', 'position'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('events_recorded_at_idx').ifExists().execute();
}
