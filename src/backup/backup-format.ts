/**
 * A backup file (docs/operations.md "Backup and restore"): gzip-compressed JSON lines. The first
 * line is the header, then one line per row (`{"table":"events","row":{…}}`, each row as
 * PostgreSQL's `row_to_json` writes it, so timestamps keep their microseconds and `json` values
 * their very text), then the trailer: rows per table, the number of lines before it and the
 * SHA-256 of every byte before it, so a truncated or altered file is refused.
 */
export const FORMAT = 'paceline-backup';
export const FORMAT_VERSION = 1;

export interface BackupHeader {
  format: typeof FORMAT;
  version: typeof FORMAT_VERSION;
  /** The last event position in the snapshot: the backup holds every event up to it and none after. */
  position: number;
  /** When the snapshot's transaction began (ISO 8601). */
  taken_at: string;
  /** The migrations applied to the database it came from, oldest first. */
  migrations: string[];
  /** Each table in the file, in load order, with the columns its rows carry. */
  tables: Record<string, string[]>;
  /** The last value each sequence had issued (`users.id` → 12). */
  sequences: Record<string, number>;
  /** Rows per table in the snapshot (the trailer counts what the file holds). */
  rows: Record<string, number>;
}

export interface BackupTrailer {
  trailer: { rows: Record<string, number>; lines: number; sha256: string };
}

/** One row's line, from its JSON text; the JSON ends on the line's last character. */
export function rowLine(table: string, rowJson: string): string {
  return `{"table":${JSON.stringify(table)},"row":${rowJson}}\n`;
}

const ROW_PREFIX = /^\{"table":"([a-z_]+)","row":\{/;

/** The table a row line belongs to, or undefined for a line that is not a row. */
export function tableOfLine(line: string): string | undefined {
  return ROW_PREFIX.exec(line)?.[1];
}

/** The header of a file's first line, or a reason it is not one. */
export function parseHeader(line: string | undefined): BackupHeader | string {
  let header: Partial<BackupHeader>;
  try {
    header = JSON.parse(line ?? '') as Partial<BackupHeader>;
  } catch {
    return 'it is not a Paceline backup (no header line)';
  }
  if (header?.format !== FORMAT) return 'it is not a Paceline backup (no header line)';
  if (header.version !== FORMAT_VERSION)
    return `it is a Paceline backup of format ${String(header.version)}, which this release does not read`;
  const valid =
    Number.isSafeInteger(header.position) &&
    typeof header.taken_at === 'string' &&
    Array.isArray(header.migrations) &&
    typeof header.tables === 'object' &&
    typeof header.sequences === 'object' &&
    typeof header.rows === 'object';
  return valid ? (header as BackupHeader) : 'its header is damaged';
}

/** The trailer a line holds, or undefined when it is not one. */
export function parseTrailer(line: string): BackupTrailer['trailer'] | undefined {
  if (!line.startsWith('{"trailer":')) return undefined;
  try {
    const { trailer } = JSON.parse(line) as BackupTrailer;
    return typeof trailer?.sha256 === 'string' && Number.isSafeInteger(trailer.lines) ? trailer : undefined;
  } catch {
    return undefined;
  }
}
