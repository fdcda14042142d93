/**
 * What a flood of refused requests costs: one abusive client (a single X-Forwarded-For address)
 * sends GET /api/tasks/ at full speed, autocannon on 127.0.0.1, against the real Koa stack with
 * anon 100/min, W=2 node:cluster workers per variant, both variants up at once and measured in
 * interleaved rounds:
 *
 *   local       as deployed: a client Redis has refused is refused in process until its window
 *               frees (src/throttle/refusals.ts)
 *   redis-only  the same with that turned off: every request runs the script in Redis
 *
 *   node --import tsx ops/bench/throttle-flood.ts [seconds per variant = 10] [rounds = 2] [connections = 50]
 *
 * Prints req/s, p50/p99 latency, the 429s, Redis commands and script calls per refused request
 * from INFO commandstats (commands inside a script count), and CPU time per request of the
 * workers (process.cpuUsage) and of redis-server (INFO cpu): on a busy host the load generator's
 * scheduling sways req/s more than the CPU figures. Past its first 100 requests
 * the client is refused for the rest of the minute. Starts and stops its own throwaway
 * PostgreSQL and redis-server in a temporary directory it deletes.
 */
import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { type Redis } from 'ioredis';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps } from '../../src/deps.js';
import { createApp } from '../../src/api/app.js';
import { createThrottler } from '../../src/throttle/index.js';
import { findFreePort } from '../../src/embedded/ports.js';
import { createBenchDatabase, startBenchStores } from '../../test/helpers/bench-stores.js';
import { benchSettings, runBench, type BenchSetup } from './bench-worker.js';

const VARIANTS = ['local', 'redis-only'] as const;
type Variant = (typeof VARIANTS)[number];
interface Setup extends BenchSetup {
  variant: Variant;
}

const WORKERS = 2;
const WARMUP_S = 2;

async function serve(setup: Setup): Promise<void> {
  const config = loadConfig({
    ...benchSettings(setup),
    REDIS_PREFIX: `bench:${setup.variant}:`,
    TRUST_PROXY_HOPS: '1',
    THROTTLE_ANON: '100/min',
  });
  const { deps } = await buildDeps(config, 'bench');
  if (setup.variant === 'redis-only') {
    deps.throttler = createThrottler({
      redis: deps.redis,
      keyPrefix: config.REDIS_PREFIX,
      timeoutMs: config.THROTTLE_TIMEOUT_MS,
      localRefusals: false,
    });
  }
  createApp(deps).listen(setup.httpPort, '127.0.0.1', () => process.send?.('listening'));
}

async function prepareDatabase(adminUrl: string): Promise<string> {
  const { url, db } = await createBenchDatabase(adminUrl, 'bench_flood');
  await db.destroy();
  return url;
}

async function startTarget(variant: Variant, databaseUrl: string, redisUrl: string, connections: number) {
  const httpPort = await findFreePort();
  const workers: Worker[] = Array.from({ length: WORKERS }, () => cluster.fork());
  await Promise.all(
    workers.map(async (worker) => {
      await once(worker, 'message');
      worker.send({ variant, databaseUrl, redisUrl, httpPort } satisfies Setup);
      await once(worker, 'message');
    }),
  );
  const load: autocannon.Options = {
    url: `http://127.0.0.1:${httpPort}/api/tasks/`,
    connections,
    headers: { 'x-forwarded-for': '198.18.0.1' },
  };
  return { variant, workers, load };
}
type Target = Awaited<ReturnType<typeof startTarget>>;

async function commandCounts(admin: Redis): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const match of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    counts.set(match[1]!, Number(match[2]));
  return counts;
}

/** CPU time (µs, user + system) the variant's workers have used so far. */
async function workersCpu(target: Target): Promise<number> {
  const used = await Promise.all(
    target.workers.map(async (worker) => {
      worker.send('cpu');
      const [usage] = (await once(worker, 'message')) as [NodeJS.CpuUsage];
      return usage.user + usage.system;
    }),
  );
  return used.reduce((total, us) => total + us, 0);
}

/** CPU time (µs) redis-server has used so far. */
async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return Math.round((field('used_cpu_sys') + field('used_cpu_user')) * 1e6);
}

async function measureSlice(target: Target, admin: Redis, seconds: number) {
  const before = await commandCounts(admin);
  const [cpuBefore, redisBefore] = [await workersCpu(target), await redisCpu(admin)];
  const result = await autocannon({ ...target.load, duration: seconds });
  await sleep(1000); // the requests still in flight when autocannon stopped belong to this slice
  const [cpu, redisCpuUs] = [(await workersCpu(target)) - cpuBefore, (await redisCpu(admin)) - redisBefore];
  let commands = 0;
  let scripts = 0;
  for (const [name, calls] of await commandCounts(admin)) {
    const delta = calls - (before.get(name) ?? 0);
    if (name !== 'info') commands += delta;
    if (name === 'evalsha' || name === 'eval') scripts += delta;
  }
  return {
    ok: result['2xx'],
    refused: result.non2xx,
    seconds: result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    commands,
    scripts,
    cpu,
    redisCpuUs,
  };
}
type Slice = Awaited<ReturnType<typeof measureSlice>>;

function summarise(variant: Variant, slices: Slice[]) {
  const sum = (pick: (slice: Slice) => number) => slices.reduce((total, slice) => total + pick(slice), 0);
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const refused = sum((s) => s.refused);
  return {
    variant,
    reqPerS: Math.round((refused + sum((s) => s.ok)) / sum((s) => s.seconds)),
    p50Ms: median(slices.map((s) => s.p50Ms)),
    p99Ms: median(slices.map((s) => s.p99Ms)),
    admitted: sum((s) => s.ok),
    refused,
    redisCmdsPerRefused: Number((sum((s) => s.commands) / Math.max(1, refused)).toFixed(4)),
    scriptCallsPerRefused: Number((sum((s) => s.scripts) / Math.max(1, refused)).toFixed(4)),
    workerCpuUsPerReq: Math.round(sum((s) => s.cpu) / Math.max(1, refused + sum((s) => s.ok))),
    redisCpuUsPerReq: Number((sum((s) => s.redisCpuUs) / Math.max(1, refused + sum((s) => s.ok))).toFixed(1)),
  };
}

async function runPrimary(seconds: number, rounds: number, connections: number): Promise<void> {
  const { postgres, redis, admin, cleanUp } = await startBenchStores();
  try {
    const databaseUrl = await prepareDatabase(postgres.url);
    const targets: Target[] = [];
    for (const variant of VARIANTS) targets.push(await startTarget(variant, databaseUrl, redis.url, connections));
    // The warm-up spends the client's 100 and gets it refused, besides warming the code.
    for (const target of targets) await autocannon({ ...target.load, duration: WARMUP_S });
    const slices = new Map<Variant, Slice[]>(targets.map((t) => [t.variant, []]));
    for (let round = 0; round < rounds; round += 1) {
      const order = round % 2 === 0 ? targets : [...targets].reverse();
      for (const target of order) slices.get(target.variant)!.push(await measureSlice(target, admin, seconds / rounds));
    }
    console.log(
      `redis ${(await admin.info('server')).match(/redis_version:(\S+)/)?.[1]}, node ${process.version}, W=${WORKERS} workers per variant, ` +
        `${connections} connections, one client (anon 100/min), ${seconds} s per variant in ${rounds} interleaved rounds after ${WARMUP_S} s warm-up, ` +
        `GET /api/tasks/, load average ${loadavg()
          .map((load) => load.toFixed(1))
          .join(' ')}`,
    );
    console.table(targets.map((t) => summarise(t.variant, slices.get(t.variant)!)));
  } finally {
    await cleanUp();
  }
}

await runBench(runPrimary, [10, 2, 50], (setup: Setup) => {
  process.on('message', (message) => message === 'cpu' && process.send?.(process.cpuUsage()));
  return serve(setup);
});
