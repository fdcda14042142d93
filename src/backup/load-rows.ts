import { createHash } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import type { Database } from '../../db/database.js';
import { parseTrailer, tableOfLine, type BackupHeader, type BackupTrailer } from './backup-format.js';

/** Why a backup is not loaded: the transaction that loads it rolls back, and the caller says why. */
export class Refusal extends Error {}

/** Lines inserted per statement, or fewer once they hold this many characters. */
const BATCH_LINES = 1_000;
const BATCH_CHARS = 4_000_000;

/**
 * Inserts the row lines that follow the header, a batch of one table's lines per statement
 * (PostgreSQL parses each line, so `json` values keep their very text), hashing every line as
 * it goes. Throws Refusal when the file ends without its trailer, or its counts or checksum do
 * not match, or a line is not a row of a table the header names. Returns rows per table.
 */
export async function loadRows(
  trx: Transaction<Database>,
  header: BackupHeader,
  headerLine: string,
  lines: AsyncIterator<string>,
  onProgress: (done: number, total: number) => void,
): Promise<Record<string, number>> {
  const hash = createHash('sha256').update(`${headerLine}\n`);
  const rows: Record<string, number> = Object.fromEntries(Object.keys(header.tables).map((table) => [table, 0]));
  const total = header.rows.events ?? 0;
  let count = 1;
  let batch: { table: string; lines: string[]; chars: number } = { table: '', lines: [], chars: 0 };
  const flush = async () => {
    if (batch.lines.length === 0) return;
    await insertLines(trx, batch.table, header.tables[batch.table]!, batch.lines, count);
    rows[batch.table]! += batch.lines.length;
    if (batch.table === 'events') onProgress(rows.events!, total);
    batch = { table: '', lines: [], chars: 0 };
  };
  onProgress(0, total);
  for (;;) {
    const next = await lines.next();
    if (next.done) throw new Refusal(`it ends after ${count} lines without its trailer: the file is truncated`);
    const trailer = parseTrailer(next.value);
    if (trailer) {
      await flush();
      checkTrailer(trailer, count, hash.digest('hex'), rows);
      const after = await lines.next();
      if (!after.done) throw new Refusal('it has lines after its trailer: the file was altered');
      return rows;
    }
    const table = tableOfLine(next.value);
    if (!table || !Object.hasOwn(header.tables, table))
      throw new Refusal(`line ${count + 1} is not a row of a table its header names: the file was altered`);
    hash.update(`${next.value}\n`);
    count += 1;
    if (batch.table !== table || batch.lines.length >= BATCH_LINES || batch.chars >= BATCH_CHARS) await flush();
    batch.table = table;
    batch.lines.push(next.value);
    batch.chars += next.value.length;
  }
}

function checkTrailer(
  trailer: BackupTrailer['trailer'],
  lines: number,
  sha256: string,
  rows: Record<string, number>,
): void {
  if (trailer.lines !== lines)
    throw new Refusal(
      `it holds ${lines} lines before its trailer, which counts ${trailer.lines}: the file was altered`,
    );
  if (trailer.sha256 !== sha256) throw new Refusal('its checksum does not match its lines: the file was altered');
  for (const [table, n] of Object.entries(rows))
    if ((trailer.rows[table] ?? 0) !== n)
      throw new Refusal(`it holds ${n} rows of ${table}, which its trailer counts ${trailer.rows[table]}`);
}

/** One statement: PostgreSQL reads each line's `row` into the table's record type and inserts the columns named. */
async function insertLines(
  trx: Transaction<Database>,
  table: string,
  columns: string[],
  lines: string[],
  lastLine: number,
): Promise<void> {
  const names = sql.join(columns.map((column) => sql.ref(column)));
  const picked = sql.join(columns.map((column) => sql.ref(`r.${column}`)));
  try {
    await sql`
      insert into ${sql.table(table)} (${names}) overriding system value
      select ${picked} from unnest(${lines}::text[]) as l(line),
        json_populate_record(null::${sql.table(table)}, l.line::json -> 'row') as r`.execute(trx);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Refusal(`its ${table} rows up to line ${lastLine} do not load (${reason}): the file was altered`);
  }
}
