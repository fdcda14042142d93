import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './database.js';

// int8 columns (ids, positions, counters) stay below 2^53; read them as numbers, not strings.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/** Opens a pooled kysely handle. `destroy()` on it closes the pool. */
export function connectDatabase(url: string, poolSize: number, applicationName = 'paceline'): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, application_name: applicationName, connectionTimeoutMillis: 10_000 });
  pool.on('error', () => {
    // An idle client lost its connection; the pool replaces it on next use.
  });
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}
