import { Migrator, sql, type Kysely } from 'kysely';
import type { Database } from './database.js';
import { migrationProvider } from './migrations/index.js';

/** Arbitrary constant naming the migration lock among PostgreSQL advisory locks. */
const MIGRATION_LOCK = 7_310_001;

/**
 * Brings the schema to the latest migration. Safe to call from many processes or hosts at once:
 * a session-level advisory lock lets one run while the others wait and then find nothing to do.
 */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`.execute(conn);
    try {
      const { error, results } = await new Migrator({ db: conn, provider: migrationProvider }).migrateToLatest();
      if (error) throw error instanceof Error ? error : new Error(String(error));
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`.execute(conn);
    }
  });
}
