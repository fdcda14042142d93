/**
 * What throttling costs the service (docs/benchmarks.md "Throttling in the service"): GET /api/tasks/ (page 1 of 50
 * tasks, anonymous) through the real Koa stack, W=2 node:cluster workers per variant, autocannon on 127.0.0.1, all
 * variants up at once and measured in interleaved rounds:
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
 * The goal for `on`: at least 0.9 of `off`'s req/s. Then MEMORY USAGE of the client keys `on` left, and of one key.
 */
import { connectDatabase } from '../../db/connect.js';
import { appendBatch } from '../../src/events/store/append-batch.js';
import { keysMatching } from '../../test/helpers/redis-keys.js';
import { runLine } from './harness/report.js';
import { runBench } from './harness/run.js';
import { createBenchUsers } from './harness/seed.js';
import { startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { median, per, sumOf } from './harness/stats.js';
import { throttleKeyBytes } from './harness/throttle-keys.js';
import { measureVariants, rates, startVariants, WARMUP_S, WORKERS } from './harness/variants.js';
import { runCluster, serveApp, type BenchSetup } from './harness/workers.js';

const VARIANTS = {
  off: { THROTTLE_ENABLED: 'false' },
  on: { THROTTLE_ANON: '100/min' },
  'on-N1000': { THROTTLE_ANON: '1000/min' },
  'on-bigN': { THROTTLE_ANON: '100000/min' },
} as const;
type Variant = keyof typeof VARIANTS;

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

/** Each request from the next of CLIENTS addresses in turn (on-bigN: always the first). */
function load(variant: Variant, base: string, connections: number) {
  let turn = 0;
  const address = (i = variant === 'on-bigN' ? 0 : turn++ % CLIENTS) => `198.18.${i >> 8}.${i & 255}`;
  const setupRequest = (r: { headers?: object }) => ({ ...r, headers: { ...r.headers, 'x-forwarded-for': address() } });
  return { url: `${base}/api/tasks/`, connections, requests: [{ setupRequest }] };
}

async function primary(): Promise<void> {
  const [seconds, rounds, connections] = readArgs([10, 2, 50]) as [number, number, number];
  const { databaseUrl, redisUrl, admin } = await startStores({ persistent: false, database: 'bench_throttle' });
  await seed(databaseUrl);
  const variants = Object.keys(VARIANTS) as Variant[];
  const targets = await startVariants(variants, { databaseUrl, redisUrl }, (v, base) => load(v, base, connections));
  const slices = await measureVariants(targets, rounds, seconds / rounds, { admin, settleMs: 1000, workersCpu: false });
  const what = `W=${WORKERS} workers per variant, ${connections} connections, ${seconds} s per variant in ${rounds} interleaved rounds after ${WARMUP_S} s warm-up, GET /api/tasks/`;
  console.log(await runLine(admin, what));
  const baseline = slices.get(targets[0]!)!;
  console.table(
    targets.map((target) => {
      const list = slices.get(target)!;
      const requests = sumOf(list, (s) => s.requests);
      return {
        variant: target.variant,
        ...rates(list, baseline, (s) => s.ok),
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
  const rows = [];
  for (const [rate, entries] of [
    ['20/min', 20],
    ['100/min', 100],
    ['1000/min', 1000],
    ['100000/min', 1000],
  ] as const) {
    const [one, full] = await throttleKeyBytes(admin, rate, `ip:${rate}`, [1, entries]);
    rows.push({ rate, entries: 1, bytes: one }, { rate, entries, bytes: full });
  }
  console.table(rows);
}

await runCluster(() => runBench('throttle-service', primary), serve);
