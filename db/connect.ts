import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './database.js';
import { boundAnswers, DatabaseDeadlineError } from './deadline.js';

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
   * The longest the client waits for any query's answer, even from a server that stopped
   * answering (which no `statement_timeout` ends); past it the connection is destroyed
   * (`boundAnswers`, db/deadline.ts). Unset: none.
   */
  answerDeadlineMs?: number;
}

/** How long a pool keeps a connection no query has used: long enough to span a quiet spell. */
const IDLE_CONNECTION_MS = 300_000;

/** Opens a pooled kysely handle. `destroy()` on it closes the pool. */
export function connectDatabase(
  url: string,
  poolSize: number,
  applicationName = 'paceline',
  options: ConnectOptions = {},
): Kysely<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    application_name: applicationName,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
    // pg's default closes a connection idle for 10 s: after a quiet spell, the next burst opened the whole pool
    // again (each with its SCRAM exchange) and stalled half a second (docs/scaling.md "Sizing").
    idleTimeoutMillis: IDLE_CONNECTION_MS,
    ...(options.statementTimeoutMs !== undefined ? { statement_timeout: options.statementTimeoutMs } : {}),
  });
  pool.on('error', () => {
    // An idle client lost its connection; the pool replaces it on next use.
  });
  // pg-pool listens for a client's errors only while it is idle. A server that goes away while a
  // client is checked out between two statements (a transaction waiting on Redis, say) sends its
  // FATAL as an 'error' event nobody hears, which would end the process. The statement that
  // follows fails instead (the request is answered 503, see isDatabaseUnreachable), and the pool
  // drops the client on release because it is no longer queryable.
  pool.on('connect', (client) => {
    client.on('error', () => {});
    if (options.answerDeadlineMs !== undefined) boundAnswers(client, options.answerDeadlineMs);
  });
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/**
 * pg's messages when no connection of the pool was free within `connectionTimeoutMs`, or a new
 * connection was not established within it.
 */
const WAIT_MESSAGES: ReadonlySet<unknown> = new Set([
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
]);

/**
 * Whether a query failed because it waited too long, with nothing written: no pool connection in
 * time, its statement cancelled by `statement_timeout` (57014), a lock not granted within
 * `lock_timeout` (55P03), or no answer within the answer deadline before a COMMIT was sent. The
 * database rolled back, or will roll back, whatever transaction it ran in.
 */
export function isDatabaseTimeout(error: unknown): boolean {
  if (error instanceof DatabaseDeadlineError) return !error.inDoubt;
  const e = error as { code?: unknown; message?: unknown } | null;
  if (e?.code === '57014' || e?.code === '55P03') return true;
  return error instanceof Error && e?.code === undefined && WAIT_MESSAGES.has(e?.message);
}

/**
 * SQLSTATEs of a server that is going away or not yet accepting: admin_shutdown (57P01, also sent
 * when the postmaster died), crash_shutdown (57P02), cannot_connect_now (57P03); and class 08,
 * connection exceptions.
 */
const UNREACHABLE_STATES = /^(57P0[123]|08...)$/;
/** Socket errors of a server that is down or unreachable. */
const UNREACHABLE_ERRNOS: ReadonlySet<unknown> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
/** pg's messages for a connection that ended under a query, or a client used after it did. */
const UNREACHABLE_MESSAGES: ReadonlySet<unknown> = new Set([
  'Connection terminated unexpectedly',
  'Client was closed and is not queryable',
  'Client has encountered a connection error and is not queryable',
]);

/**
 * Whether a query failed because PostgreSQL could not be reached or went away under it. The
 * transaction it ran in was not committed, unless the connection ended while its COMMIT was in
 * flight: that outcome is unknown to us, which is why creates carry an Idempotency-Key to repeat.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && (UNREACHABLE_STATES.test(e.code) || UNREACHABLE_ERRNOS.has(e.code))) return true;
  if (error instanceof AggregateError) return error.errors.some(isDatabaseUnreachable); // a refused connect to every address
  return error instanceof Error && UNREACHABLE_MESSAGES.has(e?.message);
}
