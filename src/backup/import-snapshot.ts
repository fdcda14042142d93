import type { Readable } from 'node:stream';
import { sql, type Kysely, type MigrationProvider, type Transaction } from 'kysely';
import type { Database } from '../../db/database.js';
import { migrateToLatest } from '../../db/migrate.js';
import { appliedMigrations, migrateUpTo } from '../../db/migration-admin.js';
import { migrationProvider } from '../../db/migrations/index.js';
import { parseHeader, type BackupHeader } from './backup-format.js';
import { BACKED_UP, restoreSequences, tableColumns } from './backup-tables.js';
import { loadRows, Refusal } from './load-rows.js';
import { DamagedFileError, readGzipLines } from './read-lines.js';

export type ImportOutcome =
  { ok: true; header: BackupHeader; rows: Record<string, number> } | { ok: false; reason: string };

/**
 * Loads a backup (docs/operations.md "Backup and restore") into an empty database: the schema
 * its migrations describe, then every row in ONE transaction that keeps writers out, committed
 * only once the trailer's counts and checksum match; then every later migration of this release.
 * Sequences are left where the source had them. Projections are NOT rebuilt here: the caller
 * runs `rebuildProjections` next. A refusal is a value saying why; nothing is loaded then.
 */
export async function importSnapshot(
  db: Kysely<Database>,
  source: Readable,
  onProgress: (done: number, total: number) => void = () => {},
  provider: MigrationProvider = migrationProvider,
): Promise<ImportOutcome> {
  const lines = readGzipLines(source);
  try {
    const first = await lines.next();
    const header = parseHeader(first.done ? undefined : first.value);
    if (typeof header === 'string') return { ok: false, reason: header };
    const refused = (await checkSchema(db, header, provider)) ?? (await checkEmpty(db));
    if (refused) return { ok: false, reason: refused };
    const last = header.migrations.at(-1);
    if (last) await migrateUpTo(db, last, provider);
    const rows = await db.transaction().execute(async (trx) => {
      await sql`lock table ${sql.join(BACKED_UP.map((t) => sql.table(t.name)))} in exclusive mode`.execute(trx);
      const occupied = await checkEmpty(trx);
      if (occupied) throw new Refusal(occupied);
      await checkColumns(trx, header);
      const loaded = await loadRows(trx, header, first.value!, lines, onProgress);
      await restoreSequences(trx, header.sequences);
      return loaded;
    });
    await migrateToLatest(db, provider);
    return { ok: true, header, rows };
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, reason: `${error.message}; nothing was imported` };
    if (error instanceof DamagedFileError)
      return { ok: false, reason: `it is damaged or truncated (${error.message}); nothing was imported` };
    throw error;
  } finally {
    await lines.return(undefined);
  }
}

/** Why the backup cannot go into this database's schema, if it cannot. */
async function checkSchema(
  db: Kysely<Database>,
  header: BackupHeader,
  provider: MigrationProvider,
): Promise<string | undefined> {
  const known = Object.keys(await provider.getMigrations());
  const newer = header.migrations.filter((name) => !known.includes(name));
  if (newer.length > 0)
    return `it was taken by a newer release (migrations ${newer.join(', ')}): import it with that release`;
  const ahead = [...(await appliedMigrations(db)).keys()].filter((name) => !header.migrations.includes(name));
  if (ahead.length > 0)
    return `the database has migrations the backup predates (${ahead.join(', ')}): import into a new, empty database`;
  return undefined;
}

/** Why the database is not empty, if it is not: any row in a backed-up table or in `tasks`. */
async function checkEmpty(db: Kysely<Database>): Promise<string | undefined> {
  const occupied: string[] = [];
  for (const name of [...BACKED_UP.map((t) => t.name), 'tasks']) {
    const { rows } = await sql<{ present: boolean }>`select to_regclass(${name}) is not null as present`.execute(db);
    if (!rows[0]?.present) continue;
    const { rows: found } = await sql<{ any: boolean }>`
      select exists (select 1 from ${sql.table(name)}) as any`.execute(db);
    if (found[0]?.any) occupied.push(name);
  }
  if (occupied.length === 0) return undefined;
  return `the database is not empty (rows in ${occupied.join(', ')}): import into a new, empty database`;
}

/** Refuses a backup whose rows carry a column the database lacks. */
async function checkColumns(trx: Transaction<Database>, header: BackupHeader): Promise<void> {
  const present = await tableColumns(trx);
  for (const [table, columns] of Object.entries(header.tables)) {
    if (!BACKED_UP.some((t) => t.name === table))
      throw new Refusal(`it holds table ${table}, which this release does not back up`);
    const missing = columns.filter((column) => !present[table]?.includes(column));
    if (missing.length > 0)
      throw new Refusal(`its table ${table} has columns the database lacks (${missing.join(', ')})`);
  }
}
