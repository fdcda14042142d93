import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { createApp } from '../../../src/api/app.js';
import { buildDeps, type Deps } from '../../../src/deps.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { loadConfig } from '../../../src/settings/config.js';
import { defer } from './run.js';

/** What a benchmark's primary sends each forked worker: the stores to use and the port to serve on, and its own. */
export interface BenchSetup {
  databaseUrl: string;
  redisUrl: string;
  httpPort: number;
}

/**
 * The settings a benchmark worker's loadConfig starts from: its stores, a fixed cursor secret and no log. A bench
 * spreads its own settings after these.
 */
export const benchSettings = (setup: BenchSetup): Record<string, string> => ({
  DATABASE_URL: setup.databaseUrl,
  REDIS_URL: setup.redisUrl,
  CURSOR_SECRET: 'bench-cursor-secret-0123456789',
  LOG_LEVEL: 'silent',
});

/**
 * In a worker: the service's Koa app on `setup`'s stores with `settings` over {@link benchSettings}, `adapt`ed (a
 * dependency swapped) before it listens; says 'listening' once it does.
 */
export async function serveApp(
  setup: BenchSetup,
  settings: Record<string, string>,
  adapt?: (deps: Deps) => void,
): Promise<Deps> {
  const { deps } = await buildDeps(loadConfig({ ...benchSettings(setup), ...settings }), 'bench');
  adapt?.(deps);
  createApp(deps).listen(setup.httpPort, '127.0.0.1', () => process.send?.('listening'));
  return deps;
}

/** In a worker: answers each `question` from the primary with what `reply` resolves to. */
export const answer = (question: string, reply: () => unknown): void =>
  void process.on('message', async (message) => message === question && process.send?.(await reply()));

/**
 * A benchmark of node:cluster workers: in the primary runs `primary`; in a worker says 'ready', then `serve`s the
 * setup the primary sends first, and answers 'cpu' with its CPU time (µs).
 */
export async function runCluster<S>(primary: () => Promise<void>, serve: (setup: S) => unknown): Promise<void> {
  if (cluster.isPrimary) return primary();
  process.on('message', (message) => message === 'cpu' && process.send?.(cpuMicros()));
  process.once('message', (setup: S) => void serve(setup));
  process.send?.('ready');
}

/** CPU time (µs, user + system) this process has used so far. */
export const cpuMicros = (usage = process.cpuUsage()): number => usage.user + usage.system;

/**
 * Forks `count` workers serving `setup` on one free port (`httpPort` is filled in), each with `execArgv` added;
 * resolves once every one has said it listens (its second message). They are killed when the benchmark ends.
 */
export async function forkWorkers<S extends object>(
  count: number,
  setup: S,
  execArgv: string[] = [],
): Promise<{ workers: Worker[]; base: string }> {
  const httpPort = await findFreePort();
  cluster.setupPrimary({ execArgv: [...process.execArgv, ...execArgv] });
  const workers = Array.from({ length: count }, () => cluster.fork());
  defer(() => workers.forEach((worker) => worker.process.kill('SIGKILL')));
  await Promise.all(
    workers.map(async (worker) => {
      await once(worker, 'message');
      worker.send({ ...setup, httpPort });
      await once(worker, 'message');
    }),
  );
  return { workers, base: `http://127.0.0.1:${httpPort}` };
}

/** Sends `question` to each worker and resolves with their answers (the next message of each). */
export async function ask<T>(workers: Worker[], question: unknown): Promise<T[]> {
  return Promise.all(
    workers.map(async (worker) => {
      const answer = once(worker, 'message');
      worker.send(question as string);
      return (await answer)[0] as T;
    }),
  );
}

/** CPU time (µs, user + system) the workers have used so far, summed. */
export const workersCpuUs = async (workers: Worker[]): Promise<number> =>
  (await ask<number>(workers, 'cpu')).reduce((a, b) => a + b, 0);

/** Stops the workers and resolves once they have exited. */
export async function stopWorkers(workers: Worker[]): Promise<void> {
  await Promise.all(
    workers.map(async (worker) => {
      if (worker.isDead()) return;
      const exited = once(worker, 'exit');
      worker.process.kill('SIGKILL');
      await exited;
    }),
  );
}
