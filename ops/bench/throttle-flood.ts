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
import type { Worker } from 'node:cluster';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps } from '../../src/deps.js';
import { createApp } from '../../src/api/app.js';
import { createThrottler } from '../../src/throttle/index.js';
import { loadAverage } from './harness/report.js';
import { runBench } from './harness/run.js';
import { interleave, runAutocannon } from './harness/send.js';
import { redisCommands, redisCpuUs, redisVersion, startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { median, sumOf } from './harness/stats.js';
import { benchSettings, forkWorkers, runCluster, workersCpuUs, type BenchSetup } from './harness/workers.js';

const VARIANTS = ['local', 'redis-only'] as const;
type Variant = (typeof VARIANTS)[number];
type Setup = BenchSetup & { variant: Variant };
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
  if (setup.variant === 'redis-only')
    deps.throttler = createThrottler({
      redis: deps.redis,
      keyPrefix: config.REDIS_PREFIX,
      timeoutMs: config.THROTTLE_TIMEOUT_MS,
      localRefusals: false,
    });
  createApp(deps).listen(setup.httpPort, '127.0.0.1', () => process.send?.('listening'));
}

async function primary(): Promise<void> {
  const [seconds, rounds, connections] = readArgs([10, 2, 50]) as [number, number, number];
  const { databaseUrl, redisUrl, admin } = await startStores({ persistent: false, database: 'bench_flood' });
  const targets: { variant: Variant; workers: Worker[]; load: autocannon.Options }[] = [];
  for (const variant of VARIANTS) {
    const { workers, base } = await forkWorkers(WORKERS, { variant, databaseUrl, redisUrl });
    targets.push({
      variant,
      workers,
      load: { url: `${base}/api/tasks/`, connections, headers: { 'x-forwarded-for': '198.18.0.1' } },
    });
  }
  // The warm-up spends the client's 100 and gets it refused, besides warming the code.
  for (const target of targets) await runAutocannon(target.load, WARMUP_S);
  const slices = await interleave(
    targets,
    rounds,
    async (target) => {
      const [before, cpu, redisCpu] = [
        await redisCommands(admin),
        await workersCpuUs(target.workers),
        await redisCpuUs(admin),
      ];
      const slice = await runAutocannon(target.load, seconds / rounds);
      await sleep(1000); // the requests still in flight when autocannon stopped belong to this slice
      const after = await redisCommands(admin);
      return {
        ...slice,
        cpu: (await workersCpuUs(target.workers)) - cpu,
        redisCpuUs: (await redisCpuUs(admin)) - redisCpu,
        commands: after.commands - before.commands,
        scripts: after.scripts - before.scripts,
      };
    },
    'alternate',
  );
  console.log(
    `redis ${await redisVersion(admin)}, node ${process.version}, W=${WORKERS} workers per variant, ` +
      `${connections} connections, one client (anon 100/min), ${seconds} s per variant in ${rounds} interleaved rounds ` +
      `after ${WARMUP_S} s warm-up, GET /api/tasks/, load average ${loadAverage()}`,
  );
  console.table(
    targets.map(({ variant }, i) => {
      const list = slices.get(targets[i]!)!;
      const sum = (pick: (s: (typeof list)[number]) => number) => sumOf(list, pick);
      const [refused, requests] = [sum((s) => s.non2xx), sum((s) => s.requests)];
      return {
        variant,
        reqPerS: Math.round(requests / sum((s) => s.seconds)),
        p50Ms: median(list.map((s) => s.p50Ms)),
        p99Ms: median(list.map((s) => s.p99Ms)),
        admitted: sum((s) => s.ok),
        refused,
        redisCmdsPerRefused: Number((sum((s) => s.commands) / Math.max(1, refused)).toFixed(4)),
        scriptCallsPerRefused: Number((sum((s) => s.scripts) / Math.max(1, refused)).toFixed(4)),
        workerCpuUsPerReq: Math.round(sum((s) => s.cpu) / Math.max(1, requests)),
        redisCpuUsPerReq: Number((sum((s) => s.redisCpuUs) / Math.max(1, requests)).toFixed(1)),
      };
    }),
  );
}

await runCluster(() => runBench('throttle-flood', primary), serve);
