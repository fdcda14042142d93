/**
 * What a flood of refused requests costs: one abusive client (a single X-Forwarded-For address) sends GET
 * /api/tasks/ at full speed, autocannon on 127.0.0.1, against the real Koa stack with anon 100/min, W=2
 * node:cluster workers per variant, both variants up at once and measured in interleaved rounds:
 *
 *   local       as deployed: a client Redis has refused is refused in process until its window frees
 *               (src/throttle/refusals.ts)
 *   redis-only  the same with that turned off: every request runs the script in Redis
 *
 *   npm run bench:throttle-flood -- [seconds per variant = 10] [rounds = 2] [connections = 50]
 *
 * Prints req/s, p50/p99 latency, the 429s, Redis commands and script calls per refused request from INFO
 * commandstats (commands inside a script count), and CPU time per request of the workers (process.cpuUsage) and
 * of redis-server (INFO cpu): on a busy host the load generator's scheduling sways req/s more than the CPU figures.
 * Past its first 100 requests the client is refused for the rest of the minute.
 */
import { createThrottler } from '../../src/throttle/index.js';
import { runLine } from './harness/report.js';
import { runBench } from './harness/run.js';
import { startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { median, per, sumOf } from './harness/stats.js';
import { measureVariants, startVariants, WARMUP_S, WORKERS } from './harness/variants.js';
import { runCluster, serveApp, type BenchSetup } from './harness/workers.js';

const VARIANTS = ['local', 'redis-only'] as const;

const serve = (setup: BenchSetup & { variant: (typeof VARIANTS)[number] }) =>
  serveApp(
    setup,
    { REDIS_PREFIX: `bench:${setup.variant}:`, TRUST_PROXY_HOPS: '1', THROTTLE_ANON: '100/min' },
    (deps) => {
      if (setup.variant === 'redis-only')
        deps.throttler = createThrottler({
          redis: deps.redis,
          keyPrefix: deps.config.REDIS_PREFIX,
          timeoutMs: deps.config.THROTTLE_TIMEOUT_MS,
          localRefusals: false,
        });
    },
  );

async function primary(): Promise<void> {
  const [seconds, rounds, connections] = readArgs([10, 2, 50]) as [number, number, number];
  const { databaseUrl, redisUrl, admin } = await startStores({ persistent: false, database: 'bench_flood' });
  // The warm-up spends the client's 100 and gets it refused, besides warming the code.
  const targets = await startVariants(VARIANTS, { databaseUrl, redisUrl }, (_, base) => ({
    url: `${base}/api/tasks/`,
    connections,
    headers: { 'x-forwarded-for': '198.18.0.1' },
  }));
  const slices = await measureVariants(targets, rounds, seconds / rounds, {
    admin,
    settleMs: 1000,
    order: 'alternate',
  });
  const what = `W=${WORKERS} workers per variant, ${connections} connections, one client (anon 100/min), ${seconds} s per variant in ${rounds} interleaved rounds after ${WARMUP_S} s warm-up, GET /api/tasks/`;
  console.log(await runLine(admin, what));
  console.table(
    targets.map((target) => {
      const list = slices.get(target)!;
      const [refused, requests] = [sumOf(list, (s) => s.non2xx), sumOf(list, (s) => s.requests)];
      return {
        variant: target.variant,
        reqPerS: Math.round(requests / sumOf(list, (s) => s.seconds)),
        p50Ms: median(list.map((s) => s.p50Ms)),
        p99Ms: median(list.map((s) => s.p99Ms)),
        admitted: sumOf(list, (s) => s.ok),
        refused,
        redisCmdsPerRefused: per(list, (s) => s.commands, Math.max(1, refused), 4),
        scriptCallsPerRefused: per(list, (s) => s.scripts, Math.max(1, refused), 4),
        workerCpuUsPerReq: per(list, (s) => s.workersCpuUs, Math.max(1, requests), 0),
        redisCpuUsPerReq: per(list, (s) => s.redisCpuUs, Math.max(1, requests), 1),
      };
    }),
  );
}

await runCluster(() => runBench('throttle-flood', primary), serve);
