import { join } from 'node:path';
import { sql } from 'kysely';
import { connectDatabase } from '../../../db/connect.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';
import { createBenchDatabase, startBenchRedis } from '../../../test/helpers/bench-stores.js';
import type { Stores } from '../read-path/processes.js';

export const BENCH_DATABASE = 'bench_abuse';

/**
 * A throwaway PostgreSQL (fsync on, as deployed) with pg_stat_statements loaded, and a Redis,
 * under `root`, with a migrated, empty `bench_abuse` database that has the extension.
 *
 * pg_stat_statements counts a statement as it ends; pg_stat_database's xact_commit is only
 * published when a backend reports its counters, which an idle one may put off for 10 s (and
 * did: a row's transactions landed in the next row's count).
 */
export async function startCountingStores(root: string): Promise<Stores> {
  const options = { dataDir: join(root, 'pg'), port: await findFreePort(), persistent: true, database: 'postgres' };
  const first = await startEmbeddedPostgres(options);
  const setup = connectDatabase(first.url, 1);
  await sql`alter system set shared_preload_libraries = 'pg_stat_statements'`.execute(setup);
  await setup.destroy();
  await first.stop();
  const postgres = await startEmbeddedPostgres(options);
  const redis = await startBenchRedis(root).catch(async (error) => {
    await postgres.stop();
    throw error;
  });
  const stop = async () => {
    await redis.stop();
    await postgres.stop();
  };
  try {
    const { url: databaseUrl, db } = await createBenchDatabase(postgres.url, BENCH_DATABASE);
    await sql`create extension pg_stat_statements`.execute(db);
    const { rows } = await sql<{ server_version: string }>`show server_version`.execute(db);
    await db.destroy();
    return { databaseUrl, redisUrl: redis.url, postgresVersion: rows[0]!.server_version, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
