/**
 * Do ordered appends cost throughput? (docs/benchmarks.md "Ordered appends vs plain unordered inserts")
 *
 *   npm run bench:ordered-appends -- [seconds per variant, default 10] [connections, default 64]
 *
 * POST /api/tasks/ through the real Koa stack, 2 node:cluster workers per variant, loaded by autocannon: `ordered`
 * is the product's command bus (group commit, one transaction per batch holding the global append lock),
 * `unordered` one transaction per command on plain sequences, no lock (test/helpers/unordered-append.ts). Each
 * variant has a fresh database on one throwaway PostgreSQL (fsync on) and redis-server, throttling off. The pair is
 * measured with PostgreSQL's durable defaults (fsync, synchronous_commit, full_page_writes on), then with all three
 * off; both stay up and are loaded in alternating 2 s slices, so background load falls on both alike. Prints req/s,
 * p50/p99, the ratio ordered/unordered, the ordered batch sizes, and whether positions kept task id order.
 */
import type { Worker } from 'node:cluster';
import type autocannon from 'autocannon';
import { sql } from 'kysely';
import { connectDatabase } from '../../db/connect.js';
import { checkEventOrder } from '../../test/helpers/event-order.js';
import { createUnorderedBus, createUnorderedSequences } from '../../test/helpers/unordered-append.js';
import { createBenchDatabase } from '../../test/helpers/bench-stores.js';
import { runBench } from './harness/run.js';
import { createBenchUsers } from './harness/seed.js';
import { interleave, runAutocannon } from './harness/send.js';
import { startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { median, sumOf } from './harness/stats.js';
import { answer, ask, forkWorkers, runCluster, serveApp, stopWorkers, type BenchSetup } from './harness/workers.js';

type Variant = 'ordered' | 'unordered';
type BatchSizes = { buckets: [string, number][]; count: number; sum: number };

const WORKERS = 2;
const WARMUP_S = 2;
const SLICE_S = 2;
const MODES = [
  { name: 'fsync on', settings: { fsync: 'on', synchronous_commit: 'on', full_page_writes: 'on' } },
  { name: 'fsync off', settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } },
] as const;

async function serve(setup: BenchSetup & { variant: Variant }): Promise<void> {
  const deps = await serveApp(setup, { THROTTLE_ENABLED: 'false' }, (deps) => {
    if (setup.variant === 'unordered') deps.commands = createUnorderedBus(deps.db);
  });
  process.on('message', (message) => message === 'reset' && deps.metrics.appendBatchSize.reset());
  answer('batch-sizes', async (): Promise<BatchSizes> => {
    const { values } = await deps.metrics.appendBatchSize.get();
    const buckets = values
      .filter((v) => v.metricName?.endsWith('_bucket'))
      .map((v): [string, number] => [String(v.labels.le), v.value]);
    const total = (suffix: string) => values.find((v) => v.metricName?.endsWith(suffix))?.value ?? 0;
    return { buckets, count: total('_count'), sum: total('_sum') };
  });
}

async function collectBatchSizes(workers: Worker[]): Promise<BatchSizes> {
  const replies = await ask<BatchSizes>(workers, 'batch-sizes');
  const buckets = replies[0]!.buckets.map(([le], i): [string, number] => [le, sumOf(replies, (r) => r.buckets[i]![1])]);
  return { buckets, count: sumOf(replies, (r) => r.count), sum: sumOf(replies, (r) => r.sum) };
}

type Stores = { adminUrl: string; redisUrl: string };

async function startTarget(variant: Variant, mode: string, { adminUrl, redisUrl }: Stores, connections: number) {
  const { url: databaseUrl, db } = await createBenchDatabase(adminUrl, `bench_${variant}_${mode.replace(/\W/g, '_')}`);
  if (variant === 'unordered') await createUnorderedSequences(db);
  await db.destroy();
  const [user] = await createBenchUsers(databaseUrl, 'bench');
  const { workers, base } = await forkWorkers(WORKERS, { variant, databaseUrl, redisUrl });
  const load: autocannon.Options = {
    url: `${base}/api/tasks/`,
    method: 'POST',
    connections,
    headers: { authorization: `Bearer ${user.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'bench task' }),
  };
  return { variant, workers, databaseUrl, load };
}

/**
 * Both variants up at once, loaded in alternating slices (O U U O O U ...). Throughput = 2xx over the loaded
 * seconds; p50/p99 are the medians of the slices' percentiles.
 */
async function measureMode(mode: string, stores: Stores, seconds: number, connections: number) {
  const targets = [
    await startTarget('ordered', mode, stores, connections),
    await startTarget('unordered', mode, stores, connections),
  ];
  for (const target of targets) await runAutocannon(target.load, WARMUP_S);
  for (const target of targets) for (const worker of target.workers) worker.send('reset');
  const rounds = Math.ceil(seconds / SLICE_S);
  const slices = await interleave(targets, rounds, (target) => runAutocannon(target.load, SLICE_S), 'alternate');
  const rows = await Promise.all(
    targets.map(async (target) => {
      const results = slices.get(target)!;
      const db = connectDatabase(target.databaseUrl, 1);
      const order = await checkEventOrder(db);
      await db.destroy();
      return {
        variant: target.variant,
        mode,
        reqPerS: Math.round(sumOf(results, (r) => r.ok) / (results.length * SLICE_S)),
        p50Ms: median(results.map((r) => r.p50Ms)),
        p99Ms: median(results.map((r) => r.p99Ms)),
        created: sumOf(results, (r) => r.ok),
        non2xx: sumOf(results, (r) => r.non2xx),
        errors: sumOf(results, (r) => r.socketErrors),
        positionsInIdOrder: order.problems.length === 0,
        batches: target.variant === 'ordered' ? await collectBatchSizes(target.workers) : undefined,
      };
    }),
  );
  for (const target of targets) await stopWorkers(target.workers);
  return rows;
}

function formatBatches(batches: BatchSizes): string {
  let below = 0;
  const parts = batches.buckets
    .map(([le, cumulative]) => {
      const inBucket = cumulative - below;
      below = cumulative;
      return inBucket === 0 ? '' : `≤${le}: ${inBucket}`;
    })
    .filter(Boolean);
  return `${batches.count} batches, mean ${(batches.sum / Math.max(1, batches.count)).toFixed(1)} commands (${parts.join(', ')})`;
}

async function primary(): Promise<void> {
  const [seconds, connections] = readArgs([10, 64]) as [number, number];
  const stores = await startStores({ database: 'bench_ordered_appends' });
  const rows: Array<Awaited<ReturnType<typeof measureMode>>[number]> = [];
  for (const mode of MODES) {
    const admin = connectDatabase(stores.adminUrl, 1);
    for (const [key, value] of Object.entries(mode.settings))
      await sql`alter system set ${sql.raw(key)} = ${sql.lit(value)}`.execute(admin);
    await sql`select pg_reload_conf()`.execute(admin);
    await admin.destroy();
    rows.push(...(await measureMode(mode.name, stores, seconds, connections)));
  }
  console.log(
    `node ${process.version}, W=${WORKERS} workers per variant, ${connections} connections, ${seconds} s per variant in alternating ${SLICE_S} s slices after ${WARMUP_S} s warm-up, POST /api/tasks/`,
  );
  console.table(rows.map(({ batches: _batches, ...row }) => row));
  for (const mode of MODES) {
    const [ordered, unordered] = ['ordered', 'unordered'].map((v) =>
      rows.find((r) => r.mode === mode.name && r.variant === v)!,
    );
    console.log(
      `${mode.name}: ordered/unordered throughput = ${(ordered!.reqPerS / unordered!.reqPerS).toFixed(2)}; ordered append batches: ${formatBatches(ordered!.batches!)}`,
    );
  }
}

await runCluster(() => runBench('ordered-appends', primary), serve);
