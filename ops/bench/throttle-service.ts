/**
 * What throttling costs the service: GET /api/tasks/ (page 1 of 50 tasks, anonymous) through the real Koa stack,
 * served by W=2 node:cluster workers per variant, loaded by autocannon on 127.0.0.1, all variants up at once and
 * measured in interleaved rounds so the host's load falls on them alike:
 *
 *   off      THROTTLE_ENABLED=false
 *   on       throttling as deployed (anon 100/min, TRUST_PROXY_HOPS=1); each request carries one of 1,000 client
 *            addresses in X-Forwarded-For, so the limit never triggers
 *   on-N1000 the same with anon 1000/min (a limit above 128: the log is read by header and slots, not whole)
 *   on-bigN  anon 100000/min (the largest N accepted) and a single client address, whose log grows to thousands
 *            of entries during the run
 *
 *   npm run bench:throttle-service -- [seconds per variant = 10] [rounds = 2] [connections = 50]
 *
 * Prints req/s and the ratio to `off` (overall and the range over rounds; the goal for `on` is ≥ 0.9), p50/p99
 * latency, Redis commands and script calls (round trips) per request from INFO commandstats (commands inside a
 * script count), then the mean MEMORY USAGE of the client keys the `on` run left, and of one key holding 1 and N
 * entries for a few rates.
 */
import type { Redis } from 'ioredis';
import { connectDatabase } from '../../db/connect.js';
import { appendBatch } from '../../src/events/store/append-batch.js';
import { createThrottler, parseRate, type ScopeRule } from '../../src/throttle/index.js';
import { keysMatching } from '../../test/helpers/redis-keys.js';
import { runLine } from './harness/report.js';
import { runBench } from './harness/run.js';
import { createBenchUsers } from './harness/seed.js';
import { interleave, runAutocannon, type Slice } from './harness/send.js';
import { startStores, withCosts } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { median, per, spread, sumOf } from './harness/stats.js';
import { forkWorkers, runCluster, serveApp, type BenchSetup } from './harness/workers.js';

const VARIANTS = {
  off: { THROTTLE_ENABLED: 'false' },
  on: { THROTTLE_ANON: '100/min' },
  'on-N1000': { THROTTLE_ANON: '1000/min' },
  'on-bigN': { THROTTLE_ANON: '100000/min' },
} as const;
type Variant = keyof typeof VARIANTS;

const WORKERS = 2;
const WARMUP_S = 2;
const CLIENTS = 1000;
const PREFIX = 'bench:';

const serve = (setup: BenchSetup & { variant: Variant }) =>
  serveApp(setup, { REDIS_PREFIX: `${PREFIX}${setup.variant}:`, TRUST_PROXY_HOPS: '1', ...VARIANTS[setup.variant] });

/** 50 tasks of the bench user's, page 1's rows. */
async function seed(databaseUrl: string): Promise<void> {
  const [user] = await createBenchUsers(databaseUrl, 'bench');
  const db = connectDatabase(databaseUrl, 1);
  const actor = { userId: user.id, username: user.username };
  const fields = (i: number) => ({ title: `Task ${i + 1}`, description: '', completed: false });
  await appendBatch(
    db,
    Array.from({ length: 50 }, (_, i) => ({ type: 'CreateTask' as const, actor, fields: fields(i) })),
  );
  await db.destroy();
}

/** MEMORY USAGE (bytes) of one client key as the service stores it, after 1 and after `entries` admissions. */
async function memoryPerKey(admin: Redis): Promise<Array<{ rate: string; entries: number; bytes: number | null }>> {
  const throttler = createThrottler({ redis: admin, keyPrefix: 'mem:' });
  const rows: Array<{ rate: string; entries: number; bytes: number | null }> = [];
  for (const [text, entries] of [
    ['20/min', 20],
    ['100/min', 100],
    ['1000/min', 1000],
    ['100000/min', 1000],
  ] as const) {
    const rule: ScopeRule = { scope: 'anon', rate: parseRate(text), keyedBy: 'ip' };
    for (let i = 1; i <= entries; i += 1) {
      await throttler.consume([{ rule, ident: `ip:${text}` }]);
      if (i === 1 || i === entries) {
        const bytes = await admin.memory('USAGE', `mem:throttle:v3:{ip:${text}}:anon`, 'SAMPLES', 0);
        rows.push({ rate: text, entries: i, bytes });
      }
    }
  }
  return rows;
}

async function primary(): Promise<void> {
  const [seconds, rounds, connections] = readArgs([10, 2, 50]) as [number, number, number];
  const { databaseUrl, redisUrl, admin } = await startStores({ persistent: false, database: 'bench_throttle' });
  await seed(databaseUrl);
  const targets = [];
  for (const variant of Object.keys(VARIANTS) as Variant[]) {
    const { base } = await forkWorkers(WORKERS, { variant, databaseUrl, redisUrl });
    let turn = 0;
    const client = () => (variant === 'on-bigN' ? 0 : turn++ % CLIENTS);
    const address = (i = client()) => `198.18.${i >> 8}.${i & 255}`;
    const setupRequest = (r: { headers?: object }) => ({
      ...r,
      headers: { ...r.headers, 'x-forwarded-for': address() },
    });
    targets.push({ variant, load: { url: `${base}/api/tasks/`, connections, requests: [{ setupRequest }] } });
  }
  for (const target of targets) await runAutocannon(target.load, WARMUP_S);
  // The requests still in flight when autocannon stopped belong to the slice.
  const slices = await interleave(targets, rounds, (target) =>
    withCosts(admin, [], () => runAutocannon(target.load, seconds / rounds), 1000),
  );
  const what = `W=${WORKERS} workers per variant, ${connections} connections, ${seconds} s per variant in ${rounds} interleaved rounds after ${WARMUP_S} s warm-up, GET /api/tasks/`;
  console.log(await runLine(admin, what));
  const rate = (runs: Slice[]) => sumOf(runs, (s) => s.ok) / sumOf(runs, (s) => s.seconds);
  const baseline = slices.get(targets[0]!)!;
  console.table(
    targets.map((target) => {
      const list = slices.get(target)!;
      const requests = sumOf(list, (s) => s.requests);
      return {
        variant: target.variant,
        reqPerS: Math.round(rate(list)),
        ratio: Number((rate(list) / rate(baseline)).toFixed(3)),
        roundRatios: spread(list.map((slice, round) => rate([slice]) / rate([baseline[round]!]))),
        p50Ms: median(list.map((s) => s.p50Ms)),
        p99Ms: median(list.map((s) => s.p99Ms)),
        non2xx: sumOf(list, (s) => s.non2xx),
        errors: sumOf(list, (s) => s.socketErrors),
        redisCmdsPerReq: per(list, (s) => s.commands, requests, 2),
        roundTripsPerReq: per(list, (s) => s.scripts, requests, 3),
      };
    }),
  );
  const keys = await keysMatching(admin, `${PREFIX}on:throttle:*`);
  const sizes = await Promise.all(keys.slice(0, 200).map((key) => admin.memory('USAGE', key, 'SAMPLES', 0)));
  const used = Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))?.[1]);
  console.log(
    `"on" left ${keys.length} client keys (${CLIENTS} addresses), MEMORY USAGE ` +
      `${Math.round(per(sizes, (size) => size ?? 0, sizes.length))} bytes each on average; Redis used_memory ${used} bytes in all`,
  );
  console.log('MEMORY USAGE of one client key (bytes; entries are 8 bytes each after a 40-byte header):');
  console.table(await memoryPerKey(admin));
}

await runCluster(() => runBench('throttle-service', primary), serve);
