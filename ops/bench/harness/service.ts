import cluster, { type Worker } from 'node:cluster';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { connectDatabase } from '../../../db/connect.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';
import { createBenchDatabase, startBenchRedis } from '../../../test/helpers/bench-stores.js';
import { childPids, startCluster, type Launch, type RunningCluster } from '../../../test/helpers/cluster.js';
import { defer, scratchDir } from './run.js';
import { cpuMicros, workersCpuUs } from './workers.js';
export { childPids, type RunningCluster };

export interface Stores {
  /** The migrated database the benchmark seeds and serves. */
  databaseUrl: string;
  /** The server's own `postgres` database: for creating others and for monitoring. */
  adminUrl: string;
  redisUrl: string;
  /** A connection to Redis for reading its counters. */
  admin: Redis;
  postgresVersion: string;
}

interface StoreOptions {
  /** fsync on, as deployed (the default); off for a bench that does not measure commits. */
  persistent?: boolean;
  /** PostgreSQL with pg_stat_statements loaded and the extension in the database. */
  statements?: boolean;
  database?: string;
}

/**
 * A throwaway PostgreSQL and Redis (nothing on disk, its password and the service's ACL user, as `npm start` runs
 * it) on free ports, with a migrated, empty database; stopped and removed when the benchmark ends. With
 * `statements`, pg_stat_statements counts every statement as it ends (pg_stat_database's xact_commit is published
 * only when a backend reports its counters, which an idle one may put off for 10 s).
 */
export async function startStores(options: StoreOptions = {}): Promise<Stores> {
  const { persistent = true, statements = false, database = 'bench' } = options;
  const root = await scratchDir('bench');
  const pgOptions = { dataDir: join(root, 'pg'), port: await findFreePort(), persistent, database: 'postgres' };
  if (statements) {
    const first = await startEmbeddedPostgres(pgOptions);
    const setup = connectDatabase(first.url, 1);
    await sql`alter system set shared_preload_libraries = 'pg_stat_statements'`.execute(setup);
    await setup.destroy();
    await first.stop();
  }
  const postgres = await startEmbeddedPostgres(pgOptions);
  defer(() => postgres.stop());
  const { redisUrl, admin } = await startRedisStore(root);
  // A benchmark that forks node:cluster workers leaves none behind, whatever ends it.
  defer(() => Object.values(cluster.workers ?? {}).forEach((worker) => worker?.process.kill('SIGKILL')));
  const { url: databaseUrl, db } = await createBenchDatabase(postgres.url, database);
  if (statements) await sql`create extension pg_stat_statements`.execute(db);
  const { rows } = await sql<{ server_version: string }>`show server_version`.execute(db);
  await db.destroy();
  return { databaseUrl, adminUrl: postgres.url, redisUrl, admin, postgresVersion: rows[0]!.server_version };
}

/** A throwaway Redis under `root` and a connection to it for its counters, stopped when the benchmark ends. */
export async function startRedisStore(root: string): Promise<{ redisUrl: string; admin: Redis }> {
  const redis = await startBenchRedis(root);
  defer(() => redis.stop());
  const admin = new Redis(redis.url);
  defer(() => admin.disconnect());
  return { redisUrl: redis.url, admin };
}

/** A copy of the stores' database (seeded or not) named `name`, made from it as a template. */
export async function copyDatabase(stores: Stores, name: string): Promise<string> {
  const admin = connectDatabase(stores.adminUrl, 1);
  const from = new URL(stores.databaseUrl).pathname.slice(1);
  await sql`create database ${sql.id(name)} template ${sql.id(from)}`.execute(admin);
  await admin.destroy();
  return stores.databaseUrl.replace(/\/[^/]*$/, `/${name}`);
}

/**
 * The compiled service (`node dist/src/main.js`, built beforehand), two web workers, no job worker, the default
 * logging (a line per request, read and dropped as a log shipper would) on `env`'s stores, up; stopped at the end.
 */
export async function startService(env: Record<string, string>, launch: Launch = 'dist'): Promise<RunningCluster> {
  const service = await startCluster(
    { WEB_CONCURRENCY: '2', JOB_CONCURRENCY: '0', ROLE: 'web', LOG_LEVEL: 'info', ...env },
    120_000,
    launch,
  );
  defer(() => service.stop('SIGTERM'));
  const workers = Number(env.WEB_CONCURRENCY ?? 2);
  for (let waited = 0; childPids(service.child.pid!).length < workers; waited += 100) {
    if (waited > 60_000) throw new Error(`the service did not fork its web workers:\n${service.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  service.child.stdout!.removeAllListeners('data');
  service.child.stdout!.resume();
  return service;
}

const BARE_SERVER = fileURLToPath(new URL('../read-path/bare-server.mjs', import.meta.url));

/** A process tree the benchmark started: a primary and the workers it forked. */
export interface Tree {
  base: string;
  primary: number;
  /** The last 20,000 characters it wrote to stderr (stdout, a service's access log, is read and dropped). */
  output(): string;
}

/**
 * Spawns `binary args` on `port` with `env` over this process's, and resolves once `ready()` says so (polled every
 * 200 ms, two minutes at most); SIGTERM when the benchmark ends, SIGKILL 30 s later.
 */
export async function startTree(
  binary: string,
  args: string[],
  port: number,
  env: Record<string, string>,
  ready: (tree: Tree & { stdout: () => string }) => Promise<boolean>,
): Promise<Tree> {
  const child = spawn(binary, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(child, 'exit');
  defer(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  });
  let [output, stdout] = ['', ''];
  child.stdout!.on('data', (chunk: Buffer) => (stdout = (stdout + chunk.toString()).slice(-1000)));
  child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
  child.on('error', (error) => (output += `\n${error.message}`));
  const tree = { base: `http://127.0.0.1:${port}`, primary: child.pid ?? -1, output: () => output };
  for (let waited = 0; !(await ready({ ...tree, stdout: () => stdout })); waited += 200) {
    if (child.exitCode !== null || waited > 120_000) throw new Error(`${args.join(' ')} did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return tree;
}

/** The read-path bench's bare node:http (or Koa) cluster of 2 workers answering `bodyFile`'s bytes, on `binary`. */
export async function startBare(
  bodyFile: string,
  contentType: string,
  framework: 'node' | 'koa' = 'node',
  binary = process.execPath,
): Promise<Tree> {
  const port = await findFreePort();
  const args = [BARE_SERVER, String(port), '2', bodyFile, contentType, framework];
  return startTree(binary, args, port, {}, async (tree) => tree.stdout().includes('listening'));
}

/** `read()` of a process's /proc entries, or `fallback` once it has exited. */
function fromProc<T>(fallback: T, read: () => T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

/** Resident memory of a process in MiB, from /proc (NaN once it has exited). */
export const rssMiB = (pid: number): number =>
  fromProc(NaN, () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024);

/** CPU time (user + system, every thread) a process has used, in seconds (0 once it has exited). */
export const cpuSeconds = (pid: number): number =>
  fromProc(0, () => {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // Linux' USER_HZ
  });

/** The same over a primary and its children. */
export const treeCpuSeconds = (primary: number): number =>
  [primary, ...childPids(primary)].reduce((sum, pid) => sum + cpuSeconds(pid), 0);

/** The soft open-file limit of a process (`self`: this one), from /proc (Infinity: unlimited; NaN once it has exited). */
export const fileLimit = (pid: number | 'self' = 'self'): number =>
  fromProc(NaN, () => {
    const soft = /^Max open files\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))?.[1];
    return soft === 'unlimited' ? Infinity : Number(soft);
  });

/** The binary a running process executes, from /proc (undefined once it has exited). */
export const executableOf = (pid: number): string | undefined =>
  fromProc(undefined, () => realpathSync(readlinkSync(`/proc/${pid}/exe`)));

/** How many file descriptors a process holds, from /proc (NaN once it has exited). */
export const openFds = (pid: number): number => fromProc(NaN, () => readdirSync(`/proc/${pid}/fd`).length);

/** Redis's counters: commands processed (INFO commandstats, its INFO calls left out), of them script calls, by name. */
export async function redisCommands(
  redis: Redis,
): Promise<{ commands: number; scripts: number; byCommand: Record<string, number> }> {
  const byCommand: Record<string, number> = {};
  let [commands, scripts] = [0, 0];
  for (const [, name, calls] of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (name === 'info') continue;
    byCommand[name!] = Number(calls);
    commands += Number(calls);
    if (name === 'evalsha' || name === 'eval') scripts += Number(calls);
  }
  return { commands, scripts, byCommand };
}

/** CPU time (µs, user + system) redis-server has used so far (INFO cpu). */
export async function redisCpuUs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6;
}

/** The Redis server's version. */
export const redisVersion = async (redis: Redis): Promise<string> =>
  /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1] ?? 'unknown';

const COSTS = ['commands', 'scripts', 'redisCpuUs', 'workersCpuUs', 'loaderCpuUs'] as const;
/** What a stretch of load cost: Redis commands and script calls, and CPU µs of Redis, the workers and this process. */
export type Costs = Record<(typeof COSTS)[number], number>;

/**
 * Runs `work`, waits `settleMs` (what was still in flight belongs to it), and resolves with its result and what it
 * cost: Redis's counters through `admin` (none without), CPU of `workers` and of this process (the load generator).
 */
export async function withCosts<T extends object>(
  admin: Redis | undefined,
  workers: Worker[],
  work: () => Promise<T>,
  settleMs = 0,
): Promise<T & Costs> {
  const read = async (): Promise<Costs> => ({
    ...(admin ? await redisCommands(admin) : { commands: 0, scripts: 0 }),
    redisCpuUs: admin ? await redisCpuUs(admin) : 0,
    workersCpuUs: workers.length > 0 ? await workersCpuUs(workers) : 0,
    loaderCpuUs: cpuMicros(),
  });
  const before = await read();
  const result = await work();
  await sleep(settleMs);
  const after = await read();
  return { ...result, ...(Object.fromEntries(COSTS.map((key) => [key, after[key] - before[key]])) as Costs) };
}
