import { createHash, type Hash } from 'node:crypto';
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/database.js';
import { BACKED_UP, primaryKeys, sequenceValues, tableColumns, unclassifiedTables } from './backup-tables.js';
import { FORMAT, FORMAT_VERSION, rowLine, type BackupHeader } from './backup-format.js';

/** Rows fetched from the cursor at a time: memory holds one batch, whatever the size of the log. */
const FETCH = 2_000;

export interface ExportSummary {
  position: number;
  takenAt: string;
  rows: Record<string, number>;
}

export type ExportOutcome = ({ ok: true } & ExportSummary) | { ok: false; reason: string };

/**
 * Writes a backup of `db` to `sink`, gzip-compressed (docs/operations.md "Backup and restore"):
 * every backed-up table read in ONE read-only REPEATABLE READ transaction, so the file is the
 * database as of one instant, whatever commits meanwhile; each table through a cursor in key
 * order. `onProgress(done, total)` counts events. Refuses (as a value) while the database holds a
 * table this release neither backs up nor rebuilds.
 */
export async function exportSnapshot(
  db: Kysely<Database>,
  sink: Writable,
  onProgress: (done: number, total: number) => void = () => {},
): Promise<ExportOutcome> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const unknown = await unclassifiedTables(trx);
      if (unknown.length > 0)
        return {
          ok: false,
          reason: `table ${unknown.join(', ')} is neither backed up nor rebuilt by this release: no backup written`,
        };
      const header = await readHeader(trx);
      const rows: Record<string, number> = {};
      const hash = createHash('sha256');
      await pipeline(
        streamLines(trx, header, hash, rows, (done) => onProgress(done, header.rows.events ?? 0)),
        createGzip(),
        sink,
      );
      return { ok: true, position: header.position, takenAt: header.taken_at, rows };
    });
}

async function readHeader(trx: Transaction<Database>): Promise<BackupHeader> {
  const { rows } = await sql<{ position: number; taken_at: Date; migrations: string[] | null }>`
    select (select coalesce(max(position), 0) from events)::bigint as position, now() as taken_at,
      (select array_agg(name order by name) from kysely_migration) as migrations`.execute(trx);
  const { position, taken_at, migrations } = rows[0]!;
  const columns = await tableColumns(trx);
  return {
    format: FORMAT,
    version: FORMAT_VERSION,
    position: Number(position),
    taken_at: taken_at.toISOString(),
    migrations: migrations ?? [],
    tables: Object.fromEntries(BACKED_UP.map((t) => [t.name, columns[t.name] ?? []])),
    sequences: await sequenceValues(trx),
    rows: await countRows(trx),
  };
}

async function countRows(trx: Transaction<Database>): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const { name } of BACKED_UP) {
    const { rows } = await sql<{ n: number }>`select count(*)::bigint as n from ${sql.table(name)}`.execute(trx);
    counts[name] = Number(rows[0]?.n ?? 0);
  }
  return counts;
}

/**
 * The file's text: the header, each table's rows in key order (a cursor, `FETCH` rows per chunk),
 * the trailer. Counts rows into `rows`; `hash` takes every byte before the trailer.
 */
async function* streamLines(
  trx: Transaction<Database>,
  header: BackupHeader,
  hash: Hash,
  rows: Record<string, number>,
  onEvents: (done: number) => void,
): AsyncGenerator<string> {
  const keys = await primaryKeys(trx);
  const first = `${JSON.stringify(header)}\n`;
  hash.update(first);
  yield first;
  let lines = 1;
  for (const { name } of BACKED_UP) {
    rows[name] = 0;
    if (name === 'events') onEvents(0);
    const columns = sql.join(header.tables[name]!.map((column) => sql.ref(column)));
    const key = sql.join((keys[name] ?? []).map((column) => sql.ref(column)));
    // Newlines can only be whitespace between JSON tokens (inside strings they are escaped): one row, one line.
    await sql`declare backup_rows no scroll cursor for
      select replace(replace(row_to_json(r)::text, E'\n', ' '), E'\r', ' ') as line
      from (select ${columns} from ${sql.table(name)} order by ${key}) r`.execute(trx);
    for (;;) {
      const batch = await sql<{ line: string }>`fetch forward ${sql.lit(FETCH)} from backup_rows`.execute(trx);
      if (batch.rows.length === 0) break;
      const chunk = batch.rows.map((row) => rowLine(name, row.line)).join('');
      hash.update(chunk);
      rows[name] += batch.rows.length;
      lines += batch.rows.length;
      if (name === 'events') onEvents(rows[name]);
      yield chunk;
    }
    await sql`close backup_rows`.execute(trx);
  }
  yield `${JSON.stringify({ trailer: { rows, lines, sha256: hash.digest('hex') } })}\n`;
}
