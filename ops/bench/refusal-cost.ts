/**
 * What a refusal costs beside an answer: one node:cluster worker running the service's server and Koa stack
 * (anon 20/min, user 100000/s, access log at info to /dev/null), measured by autocannon on
 * 127.0.0.1 in interleaved rounds of three loads:
 *
 *   flood    GET /api/tasks/ from one anonymous address (X-Forwarded-For) refused for the minute
 *   page-1   GET /api/tasks/ with a user's token (answered 200 from the read cache)
 *   healthz  GET /healthz
 *
 *   node --import tsx ops/bench/refusal-cost.ts [seconds per load and round = 3] [rounds = 2] [connections = 20]
 *
 * Prints req/s and the worker's CPU time per request (process.cpuUsage: on a busy 2-core host
 * the load generator sways req/s more than the CPU figure) per load, and the ratio flood / page-1. With PROFILE_DIR set the worker runs under
 * `--cpu-prof` and writes its profile there; with LOADS=flood (a comma list) only those loads run; LOADS may also name anon-page-1 (its own address) and task (one task, with
 * the token). Starts its own throwaway PostgreSQL and redis-server.
 */
import cluster from 'node:cluster';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import autocannon from 'autocannon';
import { createUser } from '../../src/auth/users.repository.js';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps } from '../../src/deps.js';
import { createApiListener } from '../../src/api/app.js';
import { createApiServer } from '../../src/server/server.js';
import { findFreePort } from '../../src/embedded/ports.js';
import { createBenchDatabase, startBenchStores } from '../../test/fixtures/bench-stores.js';
import { benchSettings, runBench, type BenchSetup } from './bench-worker.js';
import pino from 'pino';

type Setup = BenchSetup;

async function serve(setup: Setup): Promise<void> {
  const config = loadConfig({
    ...benchSettings(setup),
    REDIS_PREFIX: 'bench:refusal:',
    LOG_LEVEL: 'info',
    TRUST_PROXY_HOPS: '1',
    // ANON_RATE=100000/s for a profile of anon-page-1 (the flood is then answered, not refused).
    THROTTLE_ANON: process.env.ANON_RATE ?? '20/min',
    THROTTLE_USER: '100000/s',
    THROTTLE_TOKEN_OBTAIN: '100000/s',
  });
  const { deps } = await buildDeps(config, 'bench');
  deps.logger = pino({ level: 'info', base: { pid: process.pid, role: 'web' } }, pino.destination('/dev/null'));
  // The service's own server and listener: a known refusal is answered before the app (src/edge/early-refusal.ts).
  createApiServer(config, createApiListener(deps)).listen(setup.httpPort, '127.0.0.1', () =>
    process.send?.('listening'),
  );
  process.on('message', (message) => message === 'cpu' && process.send?.(process.cpuUsage()));
  process.once('disconnect', () => process.exit(0));
}

async function runPrimary(seconds: number, rounds: number, connections: number): Promise<void> {
  const { postgres, redis, cleanUp } = await startBenchStores();
  try {
    const { url: databaseUrl, db } = await createBenchDatabase(postgres.url, 'bench_refusal');
    await createUser(db, 'bench', 'bench-pass-123');
    await db.destroy();
    const httpPort = await findFreePort();
    const profileDir = process.env.PROFILE_DIR;
    cluster.setupPrimary({
      execArgv: [...process.execArgv, ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])],
    });
    const worker = cluster.fork();
    await once(worker, 'message');
    worker.send({ databaseUrl, redisUrl: redis.url, httpPort } satisfies Setup);
    await once(worker, 'message');
    const base = `http://127.0.0.1:${httpPort}`;
    const login = await fetch(`${base}/api/auth/token/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bench', password: 'bench-pass-123' }),
    });
    const { token } = (await login.json()) as { token: string };
    const created = await fetch(`${base}/api/tasks/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ title: 'bench' }),
    });
    const { id: taskId } = (await created.json()) as { id: number };
    const loads: Record<string, autocannon.Options> = {
      flood: { url: `${base}/api/tasks/`, headers: { 'x-forwarded-for': '198.18.0.1' } },
      'page-1': { url: `${base}/api/tasks/`, headers: { authorization: `Bearer ${token}` } },
      healthz: { url: `${base}/healthz` },
    };
    // Only when named: an anonymous page 1 and one task, for a profile of the read path.
    const extra: Record<string, autocannon.Options> = {
      'anon-page-1': { url: `${base}/api/tasks/`, headers: { 'x-forwarded-for': '198.18.0.2' } },
      task: { url: `${base}/api/tasks/${taskId}/`, headers: { authorization: `Bearer ${token}` } },
    };
    // LOADS=flood (a comma list) measures only those: a profile of one load alone.
    const named = process.env.LOADS?.split(',');
    for (const name of Object.keys(loads)) if (named && !named.includes(name)) delete loads[name];
    for (const name of named ?? []) if (extra[name]) loads[name] = extra[name];
    const totals = new Map<string, { requests: number; seconds: number; non2xx: number; cpuUs: number }>();
    /** CPU time (µs, user + system) the worker has used so far. */
    const cpu = async () => {
      worker.send('cpu');
      const [usage] = (await once(worker, 'message')) as [NodeJS.CpuUsage];
      return usage.user + usage.system;
    };
    for (const load of Object.values(loads)) await autocannon({ ...load, connections, duration: 1 });
    for (let round = 0; round < rounds; round += 1) {
      const names = round % 2 === 0 ? Object.keys(loads) : Object.keys(loads).reverse();
      for (const name of names) {
        const before = await cpu();
        const result = await autocannon({ ...loads[name]!, connections, duration: seconds });
        const total = totals.get(name) ?? { requests: 0, seconds: 0, non2xx: 0, cpuUs: 0 };
        total.cpuUs += (await cpu()) - before;
        total.requests += result.requests.total;
        total.seconds += result.duration;
        total.non2xx += result.non2xx;
        totals.set(name, total);
      }
    }
    const rate = (name: string) => Math.round(totals.get(name)!.requests / totals.get(name)!.seconds);
    console.log(
      `node ${process.version}, 1 worker, ${connections} connections, ${seconds} s × ${rounds} interleaved rounds, ` +
        `load average ${loadavg()
          .map((load) => load.toFixed(1))
          .join(' ')}`,
    );
    console.table(
      [...totals].map(([name, t]) => ({
        load: name,
        reqPerS: rate(name),
        non2xx: t.non2xx,
        workerCpuUsPerReq: Math.round(t.cpuUs / t.requests),
      })),
    );
    if (totals.size === 3)
      console.log(
        `flood / page-1 = ${(rate('flood') / rate('page-1')).toFixed(2)}×, flood / healthz = ${(rate('flood') / rate('healthz')).toFixed(2)}×`,
      );
    worker.disconnect();
    await once(worker, 'exit');
  } finally {
    await cleanUp();
  }
}

await runBench(runPrimary, [3, 2, 20], serve);
