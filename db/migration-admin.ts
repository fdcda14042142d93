import { Migrator, sql, type Kysely, type MigrationProvider, type MigrationResultSet } from 'kysely';
import type { Database } from './database.js';
import { MIGRATION_LOCK } from './migrate.js';
import { migrationProvider } from './migrations/index.js';

/** One migration as `migrate:status` shows it (docs/operations.md "Migrations"). */
export interface MigrationState {
  name: string;
  /** When it was applied; undefined while it is pending. */
  appliedAt?: Date;
  /** False for a migration the database has and this release does not (a newer release applied it). */
  known: boolean;
}

/** Every migration this release knows and every one the database has applied, oldest first. */
export async function listMigrations(
  db: Kysely<Database>,
  provider: MigrationProvider = migrationProvider,
): Promise<MigrationState[]> {
  const known = await new Migrator({ db, provider }).getMigrations();
  const states: MigrationState[] = known.map((m) => ({ name: m.name, appliedAt: m.executedAt, known: true }));
  for (const [name, appliedAt] of await appliedMigrations(db))
    if (!known.some((m) => m.name === name)) states.push({ name, appliedAt, known: false });
  return states.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export type DownPlan = { ok: true; undo: MigrationState[] } | { ok: false; reason: string };

/**
 * What `migrate:down` would undo, newest first: the last applied migration, or with `to` every
 * one applied after it (`to` stays). Refused while the database has a migration this release
 * does not know: only the release that added it can undo it.
 */
export function planMigrateDown(states: readonly MigrationState[], to?: string): DownPlan {
  const applied = states.filter((s) => s.appliedAt);
  const unknown = applied.filter((s) => !s.known).map((s) => s.name);
  if (unknown.length > 0)
    return {
      ok: false,
      reason:
        `the database has migrations this release does not know (${unknown.join(', ')}): ` +
        'undo them with the release that added them',
    };
  if (to === undefined)
    return applied.length > 0
      ? { ok: true, undo: applied.slice(-1) }
      : { ok: false, reason: 'no migration is applied' };
  const index = applied.findIndex((s) => s.name === to);
  if (index < 0)
    return {
      ok: false,
      reason: `"${to}" is not an applied migration (applied: ${applied.map((s) => s.name).join(', ') || 'none'})`,
    };
  return { ok: true, undo: applied.slice(index + 1).reverse() };
}

/**
 * Runs the `down` of the last applied migration (`to` undefined) or of every one after `to`,
 * newest first, under the migration lock `migrateToLatest` takes. Returns the names undone.
 */
export async function migrateDown(
  db: Kysely<Database>,
  to?: string,
  provider: MigrationProvider = migrationProvider,
): Promise<string[]> {
  return withMigrationLock(db, (conn) => {
    const migrator = new Migrator({ db: conn, provider });
    return to === undefined ? migrator.migrateDown() : migrator.migrateTo(to);
  });
}

/**
 * Applies this release's migrations up to and including `name` (an import rebuilds the schema
 * its backup was taken with before loading it). Refuses a database already past `name`.
 */
export async function migrateUpTo(
  db: Kysely<Database>,
  name: string,
  provider: MigrationProvider = migrationProvider,
): Promise<string[]> {
  return withMigrationLock(db, async (conn) => {
    const past = [...(await appliedMigrations(conn)).keys()].filter((applied) => applied > name);
    if (past.length > 0) throw new Error(`the database has migrations after ${name}: ${past.join(', ')}`);
    return new Migrator({ db: conn, provider }).migrateTo(name);
  });
}

/** The names and times in Kysely's migration table (none before the first migration). */
export async function appliedMigrations(db: Kysely<Database>): Promise<Map<string, Date>> {
  const { rows } = await sql<{ present: boolean }>`
    select to_regclass('kysely_migration') is not null as present`.execute(db);
  if (!rows[0]?.present) return new Map();
  const { rows: applied } = await sql<{ name: string; timestamp: string }>`
    select name, timestamp from kysely_migration order by name`.execute(db);
  return new Map(applied.map((row) => [row.name, new Date(row.timestamp)]));
}

async function withMigrationLock(
  db: Kysely<Database>,
  run: (conn: Kysely<Database>) => Promise<MigrationResultSet>,
): Promise<string[]> {
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`.execute(conn);
    try {
      const { error, results } = await run(conn);
      if (error) throw error instanceof Error ? error : new Error(String(error));
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`.execute(conn);
    }
  });
}
