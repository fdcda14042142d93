import { Migrator, sql, type Kysely, type MigrationProvider } from 'kysely';
import type { Database } from './database.js';
import { migrationProvider } from './migrations/index.js';

/** Arbitrary constant naming the migration lock among PostgreSQL advisory locks. */
export const MIGRATION_LOCK = 7_310_001;

/** What a migration run did: the migrations it applied, and those the database has that this release does not know. */
export interface MigrationRun {
  applied: string[];
  newer: string[];
}

/**
 * Brings the schema to the latest migration. Safe to call from many processes or hosts at once:
 * a session-level advisory lock lets one run while the others wait and then find nothing to do.
 * A database that already holds every migration of this release and some of a newer one (a
 * rolling deploy under way, docs/scaling.md "Zero-downtime deploy") is left as it is: migrations only add
 * what the release before them still works with. A database that lacks one of this release's
 * migrations while holding newer ones is refused.
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  provider: MigrationProvider = migrationProvider,
): Promise<MigrationRun> {
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`.execute(conn);
    try {
      const known = Object.keys(await provider.getMigrations());
      const executed = await executedMigrations(conn);
      const newer = executed.filter((name) => !known.includes(name));
      if (newer.length > 0) {
        const missing = known.filter((name) => !executed.includes(name));
        if (missing.length > 0)
          throw new Error(
            `the database has migrations this release does not know (${newer.join(', ')}) but lacks ${missing.join(', ')}`,
          );
        return { applied: [], newer };
      }
      const { error, results } = await new Migrator({ db: conn, provider }).migrateToLatest();
      if (error) throw error instanceof Error ? error : new Error(String(error));
      return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName), newer: [] };
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`.execute(conn);
    }
  });
}

/** The names in Kysely's migration table (none before the first migration). */
async function executedMigrations(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{
    present: boolean;
  }>`select to_regclass('kysely_migration') is not null as present`.execute(db);
  if (!rows[0]?.present) return [];
  return (await sql<{ name: string }>`select name from kysely_migration`.execute(db)).rows.map((row) => row.name);
}
