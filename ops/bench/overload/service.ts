import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../../db/database.js';
import { seedDatabase } from '../harness/seed.js';
import {
  copyDatabase,
  startService,
  startStores,
  treeCpuSeconds,
  type RunningCluster,
  type Stores,
} from '../harness/service.js';
import type { Seeded } from '../harness/seed.js';

/** The two settings of admission control each scenario runs under (the service reads ADMISSION_CONTROL). */
export const MODES = ['off', 'on'] as const;
export type Mode = (typeof MODES)[number];

/** One instance of the compiled service: its admission setting, its own database. */
export interface Instance {
  mode: Mode;
  database: string;
  cluster: RunningCluster;
}

/** What an instance had done by a moment: its statements, and its answers on the mix's route. */
export interface Counters {
  pgStatements: number;
  /** Requests to `/api/tasks/` the service finished (paceline_http_requests_total), answered or abandoned. */
  completions: number;
}

/** CPU seconds the instance's primary and workers have used. */
export const serviceCpuSeconds = (instance: Instance): number => treeCpuSeconds(instance.cluster.child.pid!);

/**
 * The stores (PostgreSQL with pg_stat_statements, fsync on, as deployed; Redis), `tasks` tasks seeded as events
 * with their projections, and a copy of that database for each admission setting.
 */
export async function startSeededStores(tasks: number): Promise<{ stores: Stores; seeded: Seeded }> {
  const stores = await startStores({ statements: true, database: 'bench_overload' });
  const seeded = await seedDatabase(stores.databaseUrl, tasks);
  for (const mode of MODES) await copyDatabase(stores, databaseOf(mode));
  return { stores, seeded };
}

const databaseOf = (mode: Mode) => `bench_overload_${mode}`;

/**
 * `node dist/src/main.js` with 2 web workers, limits never reached, on 127.0.0.1: `on` with admission control and
 * CONNECTION_DOOR=`onDoor` (the benchmark's default: the build's own), `off` without admission control and with
 * node:cluster's round robin (ADMISSION_CONTROL=off, CONNECTION_DOOR=cluster).
 */
export async function startInstance(stores: Stores, mode: Mode, logLevel: string, onDoor: string): Promise<Instance> {
  const database = databaseOf(mode);
  const cluster = await startService({
    DATABASE_URL: stores.databaseUrl.replace(/\/[^/]*$/, `/${database}`),
    REDIS_URL: stores.redisUrl,
    REDIS_PREFIX: `bench:overload:${mode}:`,
    CURSOR_SECRET: 'overload-bench-cursor-secret-0123456789',
    LOG_LEVEL: logLevel,
    THROTTLE_ANON: '100000/s',
    THROTTLE_USER: '100000/s',
    ADMISSION_CONTROL: mode,
    CONNECTION_DOOR: mode === 'on' ? onDoor : 'cluster',
  });
  return { mode, database, cluster };
}

/** A reader of an instance's counters through `monitor` (a connection to any database of the stores). */
export function counterReader(monitor: Kysely<Database>) {
  return async (instance: Instance): Promise<Counters> => {
    const [{ rows }, text] = await Promise.all([
      sql<{ calls: string }>`
        select coalesce(sum(s.calls), 0) as calls
        from pg_stat_statements s join pg_database d on d.oid = s.dbid
        where d.datname = ${instance.database} and s.query not like '%pg_stat_statements%'`.execute(monitor),
      metricsText(instance),
    ]);
    let completions = 0;
    for (const match of text.matchAll(/^paceline_http_requests_total\{([^}]*)\} (\S+)$/gm))
      if (match[1]!.includes('route="/api/tasks/"')) completions += Number(match[2]);
    return { pgStatements: Number(rows[0]!.calls), completions };
  };
}

/** The instance's host `/metrics`, as text. */
const metricsText = (instance: Instance): Promise<string> =>
  fetch(`${instance.cluster.metricsBase}/metrics`).then((response) => response.text());

/** The admission gauges of an instance at one moment, summed over its web workers. */
export interface AdmissionSample {
  limit: number;
  inProgress: number;
  queued: number;
}

/** Reads `paceline_admission_limit`, `_in_progress` and `_queued` from the instance's `/metrics`. */
export async function readAdmission(instance: Instance): Promise<AdmissionSample> {
  const text = await metricsText(instance);
  const gauge = (name: string) => Number(new RegExp(`^paceline_admission_${name} (\\S+)$`, 'm').exec(text)?.[1]);
  return { limit: gauge('limit'), inProgress: gauge('in_progress'), queued: gauge('queued') };
}

/**
 * Waits until the instance has finished what it was given: its count of finished requests still for 600 ms
 * (at most 15 s), so that a scenario neither starts on a queue left by the one before nor loses its tail; then
 * `restMs` more, idle, and reads the counters again. The rest is for what outlasts the requests: in trials a run
 * right after an overloaded one was slow for a few seconds (PostgreSQL's and the host's own catching up), and
 * as fast as ever 4 s later.
 */
export async function settle(read: () => Promise<Counters>, restMs = 0): Promise<Counters> {
  let last = await read();
  for (let waited = 0; waited < 15_000; waited += 600) {
    await sleep(600);
    const now = await read();
    if (now.completions === last.completions) break;
    last = now;
  }
  if (restMs === 0) return last;
  await sleep(restMs);
  return read();
}
