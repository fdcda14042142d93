import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { connectDatabase } from '../../../db/connect.js';
import { migrateToLatest } from '../../../db/migrate.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';
import { newRedisPassword, startRedis } from '../../../src/embedded/redis.js';
import { childPids, startCluster, type RunningCluster } from '../../../test/helpers/cluster.js';
export { childPids };

export interface Stores {
  databaseUrl: string;
  redisUrl: string;
  postgresVersion: string;
  stop(): Promise<void>;
}

/**
 * A throwaway PostgreSQL (fsync on, as deployed) and Redis (nothing on disk) under `root`, with a
 * migrated, empty `bench_read_path` database.
 */
export async function startStores(root: string): Promise<Stores> {
  const postgres = await startEmbeddedPostgres({
    dataDir: join(root, 'pg'),
    port: await findFreePort(),
    persistent: true,
    database: 'postgres',
  });
  const redis = await startRedis({
    dataDir: join(root, 'redis'),
    port: await findFreePort(),
    persistent: false,
    password: newRedisPassword(),
    log: () => {},
  }).catch(async (error) => {
    await postgres.stop();
    throw error;
  });
  const stop = async () => {
    await redis.stop();
    await postgres.stop();
  };
  try {
    const admin = connectDatabase(postgres.url, 1);
    await sql`create database bench_read_path`.execute(admin);
    const { rows } = await sql<{ server_version: string }>`show server_version`.execute(admin);
    await admin.destroy();
    const databaseUrl = postgres.url.replace(/\/[^/]*$/, '/bench_read_path');
    const db = connectDatabase(databaseUrl, 1);
    await migrateToLatest(db);
    await db.destroy();
    return { databaseUrl, redisUrl: redis.url, postgresVersion: rows[0]!.server_version, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * The compiled service (`node dist/src/main.js`, built beforehand) with two web workers and no
 * job worker, on the given stores; resolves once both web workers are up.
 */
export async function startService(env: Record<string, string>): Promise<RunningCluster> {
  const service = await startCluster(
    { WEB_CONCURRENCY: '2', JOB_CONCURRENCY: '0', ROLE: 'web', LOG_LEVEL: 'info', ...env },
    120_000,
    'dist',
  );
  for (let waited = 0; childPids(service.child.pid!).length < 2; waited += 100) {
    if (waited > 60_000) throw new Error(`the service did not fork its two web workers:\n${service.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // The default logging writes a line per request: read and dropped, as a log shipper would take it, not kept.
  service.child.stdout!.removeAllListeners('data');
  service.child.stdout!.resume();
  return service;
}

/** Resident memory of a process in MiB, from /proc (NaN once it has exited). */
export function rssMiB(pid: number): number {
  try {
    const kib = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return Number(kib) / 1024;
  } catch {
    return NaN;
  }
}

/** The bare node:http (or bare Koa) cluster of `workers` processes answering `bodyFile`'s bytes on `port`. */
export async function startBare(
  port: number,
  workers: number,
  bodyFile: string,
  contentType: string,
  framework: 'node' | 'koa' = 'node',
): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('./bare-server.mjs', import.meta.url)),
      String(port),
      String(workers),
      bodyFile,
      contentType,
      framework,
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  await Promise.race([
    new Promise<void>((resolve) => child.stdout!.on('data', () => output.includes('listening') && resolve())),
    once(child, 'exit').then(([code]) => Promise.reject(new Error(`the bare server exited (code ${code})`))),
  ]);
  return child;
}
