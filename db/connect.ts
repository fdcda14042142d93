import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './database.js';

// int8 columns (ids, positions, counters) stay below 2^53; read them as numbers, not strings.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export interface ConnectOptions {
  /**
   * pg's `statement_timeout` on every connection of the pool; unset: none. Serving processes set
   * it (DATABASE_STATEMENT_TIMEOUT_MS); migrations and the CLI (rebuild) leave it unset, as they
   * may run long statements.
   */
  statementTimeoutMs?: number;
  /** The longest a query waits for a connection of the pool before it fails (default 10 s). */
  connectionTimeoutMs?: number;
  /**
   * pg's client-side `query_timeout`: the longest the client waits for any query's answer, even
   * from a server that stopped answering (which no `statement_timeout` ends). Unset: none.
   */
  queryTimeoutMs?: number;
}

/** Opens a pooled kysely handle. `destroy()` on it closes the pool. */
export function connectDatabase(url: string, poolSize: number, applicationName = 'paceline', options: ConnectOptions = {}): Kysely<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    application_name: applicationName,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
    ...(options.statementTimeoutMs !== undefined ? { statement_timeout: options.statementTimeoutMs } : {}),
    ...(options.queryTimeoutMs !== undefined ? { query_timeout: options.queryTimeoutMs } : {}),
  });
  pool.on('error', () => {
    // An idle client lost its connection; the pool replaces it on next use.
  });
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/**
 * pg's messages when no connection of the pool was free within `connectionTimeoutMs`, or a new
 * connection was not established within it.
 */
const WAIT_MESSAGES: ReadonlySet<unknown> = new Set(['timeout exceeded when trying to connect', 'Connection terminated due to connection timeout']);

/**
 * Whether a query failed because it waited too long, with nothing written: no pool connection in
 * time, its statement cancelled by `statement_timeout` (57014), or a lock not granted within
 * `lock_timeout` (55P03). The database rolled back whatever transaction it ran in.
 */
export function isDatabaseTimeout(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (e?.code === '57014' || e?.code === '55P03') return true;
  return error instanceof Error && e?.code === undefined && WAIT_MESSAGES.has(e?.message);
}
