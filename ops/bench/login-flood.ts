/**
 * What a login flood costs a good client: one web worker (the real Koa app) per variant, a good client logging in
 * with its right password from one address, first alone (quiet), then while 100 addresses each try 5 made-up
 * names (every address sends its 5 one after another, all addresses at once, over and over until the good client
 * is done). Addresses are varied with X-Forwarded-For from the trusted 127.0.0.1. The variants (VARIANTS): a hash
 * budget of 1, the default budget, and `unbounded` (as before the budget).
 *
 *   npm run bench:login-flood -- [good logins per phase = 40]
 *
 * Prints the good client's p50/p99 quiet and flooded (and their ratio; the goal is ≤ 2), the flood's answers by
 * status, and the worker's CPU (cores, from process.cpuUsage, which counts the hashing threads) and cores spent
 * hashing (paceline_login_hash_seconds_total over the flood).
 */
import { runBench } from './harness/run.js';
import { createBenchUsers } from './harness/seed.js';
import { startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { latencies } from './harness/stats.js';
import {
  answer,
  ask,
  cpuMicros,
  forkWorkers,
  runCluster,
  serveApp,
  stopWorkers,
  type BenchSetup,
} from './harness/workers.js';

const VARIANTS = {
  'budget-1': { LOGIN_HASH_CONCURRENCY: '1', LOGIN_HASH_WAIT_MS: '1000' },
  budget: { LOGIN_HASH_CONCURRENCY: '2', LOGIN_HASH_WAIT_MS: '1000' },
  unbounded: { LOGIN_HASH_CONCURRENCY: '64', LOGIN_HASH_WAIT_MS: '60000' },
} as const;
type Variant = keyof typeof VARIANTS;
/** A worker's CPU time so far (µs) and the seconds it has spent hashing passwords. */
type Probe = Record<'cpuUs' | 'hashSeconds', number>;

const ADDRESSES = 100;
const NAMES_PER_ADDRESS = 5;

async function serve(setup: BenchSetup & { variant: Variant }): Promise<void> {
  const deps = await serveApp(setup, {
    REDIS_PREFIX: `bench:${setup.variant}:`,
    ACCESS_LOG: 'off',
    TRUST_PROXY_HOPS: '1',
    TRUSTED_PROXIES: '127.0.0.1',
    THROTTLE_TOKEN_OBTAIN: '100000/min',
    THROTTLE_LOGIN: '100000/min',
    ...VARIANTS[setup.variant],
  });
  answer('probe', async () => {
    const text = await deps.metrics.registry.getSingleMetricAsString('paceline_login_hash_seconds_total');
    return { cpuUs: cpuMicros(), hashSeconds: Number(/\n[^#\n]+ (\S+)/.exec(text)?.[1] ?? 0) } satisfies Probe;
  });
}

async function login(base: string, ip: string, username: string, password: string): Promise<number> {
  const response = await fetch(`${base}/api/auth/token/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': ip },
    body: JSON.stringify({ username, password }),
    signal: AbortSignal.timeout(30_000),
  });
  await response.arrayBuffer();
  return response.status;
}

/** `count` logins of the good client one after another; their times in ms, and any that failed. */
async function goodClient(base: string, count: number, failed: number[] = []): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const status = await login(base, '192.0.2.1', 'good', 'good-password').catch(() => 0);
    if (status !== 200) failed.push(status);
    times.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return times;
}

/** 100 addresses × 5 made-up names, repeated until `done` says stop; answers by status. */
async function flood(base: string, done: () => boolean): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  const address = async (a: number, round: number) => {
    for (let i = 0; i < NAMES_PER_ADDRESS; i++) {
      const name = `made-up-${a}-${round}-${i}`;
      const status = await login(base, `10.9.${a}.${round % 250}`, name, 'guess').catch(() => 0);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  for (let round = 0; round === 0 || !done(); round += 1)
    await Promise.all(Array.from({ length: ADDRESSES }, (_, a) => address(a, round)));
  return statuses;
}

async function measure(variant: Variant, databaseUrl: string, redisUrl: string, count: number): Promise<string> {
  const { workers, base } = await forkWorkers(1, { variant, databaseUrl, redisUrl });
  await goodClient(base, 5);
  const quiet = latencies(await goodClient(base, count));
  const [before] = await ask<Probe>(workers, 'probe');
  const started = performance.now();
  let finished = false;
  const flooding = flood(base, () => finished);
  const failed: number[] = [];
  const flooded = latencies(await goodClient(base, count, failed));
  finished = true;
  const statuses = await flooding;
  const wallS = (performance.now() - started) / 1000;
  const [after] = await ask<Probe>(workers, 'probe');
  await stopWorkers(workers);
  return [
    `${variant}: good client quiet p50 ${quiet.p50.toFixed(0)} ms p99 ${quiet.p99.toFixed(0)} ms; flooded p50 ${flooded.p50.toFixed(0)} ms`,
    `p99 ${flooded.p99.toFixed(0)} ms (p99 ratio ${(flooded.p99 / quiet.p99).toFixed(2)}), not 200: [${failed.join(',')}]; flood answers ${JSON.stringify(statuses)} in ${wallS.toFixed(1)} s;`,
    `worker CPU ${((after!.cpuUs - before!.cpuUs) / 1e6 / wallS).toFixed(2)} cores, hashing ${((after!.hashSeconds - before!.hashSeconds) / wallS).toFixed(2)} cores`,
  ].join(' ');
}

async function primary(): Promise<void> {
  const [count] = readArgs([40]) as [number];
  const { databaseUrl, redisUrl } = await startStores({ persistent: false, database: 'bench_login' });
  await createBenchUsers(databaseUrl, 'good');
  for (const variant of Object.keys(VARIANTS) as Variant[])
    process.stdout.write(`${await measure(variant, databaseUrl, redisUrl, count)}\n`);
}

await runCluster(() => runBench('login-flood', primary), serve);
