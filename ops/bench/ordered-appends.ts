/**
 * Do ordered appends cost throughput? POST /api/tasks/ through the real Koa stack (token auth,
 * validation, command bus, PostgreSQL), served by W=2 node:cluster workers and loaded by
 * autocannon on 127.0.0.1, with two command buses measured in the same run:
 *
 *   ordered    the product's: group commit, one transaction per batch holding the global append
 *              lock to commit; ids and positions from counters (commit order = id order)
 *   unordered  one transaction per command, id and position from plain sequences, no lock, no
 *              shared counter row (test/helpers/unordered-append.ts; exists only for tests and benches)
 *
 *   node --import tsx ops/bench/ordered-appends.ts [seconds per variant, default 10] [connections, default 64]
 *
 * Starts its own throwaway PostgreSQL (fsync on: `persistent` mode, in a temporary directory it
 * deletes) and redis-server, one fresh database per variant, throttling off. Measures the pair
 * twice: with PostgreSQL's durable defaults (fsync, synchronous_commit, full_page_writes on), then
 * with the test suite's settings (all three off). Both variants stay up and are loaded in
 * alternating 2 s slices, so background load on the machine falls on both alike. Prints req/s,
 * p50/p99 latency, the ratio ordered/unordered, the ordered batch sizes, and whether event
 * positions kept task id order in each database.
 */
import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import { connectDatabase } from '../../db/connect.js';
import { createUser } from '../../src/auth/users.repository.js';
import { issueToken } from '../../src/auth/tokens.js';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps } from '../../src/deps.js';
import { createApp } from '../../src/api/app.js';
import { findFreePort } from '../../src/embedded/ports.js';
import { checkEventOrder } from '../../test/helpers/event-order.js';
import { createUnorderedBus, createUnorderedSequences } from '../../test/helpers/unordered-append.js';
import { createBenchDatabase, startBenchStores } from '../../test/helpers/bench-stores.js';
import { benchSettings, runBench, type BenchSetup } from './bench-worker.js';

type Variant = 'ordered' | 'unordered';
interface Setup extends BenchSetup {
  variant: Variant;
}
interface BatchSizes {
  buckets: Array<[string, number]>;
  count: number;
  sum: number;
}

const WORKERS = 2;
const WARMUP_S = 2;
const SLICE_S = 2;
const MODES = [
  { name: 'fsync on', settings: { fsync: 'on', synchronous_commit: 'on', full_page_writes: 'on' } },
  { name: 'fsync off', settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } },
] as const;

async function serve(setup: Setup): Promise<void> {
  const config = loadConfig({
    ...benchSettings(setup),
    THROTTLE_ENABLED: 'false',
  });
  const { deps } = await buildDeps(config, 'bench');
  if (setup.variant === 'unordered') deps.commands = createUnorderedBus(deps.db);
  createApp(deps).listen(setup.httpPort, '127.0.0.1', () => process.send?.('listening'));
  process.on('message', async (message) => {
    if (message === 'reset') deps.metrics.appendBatchSize.reset();
    if (message !== 'batch-sizes') return;
    const { values } = await deps.metrics.appendBatchSize.get();
    const buckets = values
      .filter((v) => v.metricName?.endsWith('_bucket'))
      .map((v): [string, number] => [String(v.labels.le), v.value]);
    const total = (suffix: string) => values.find((v) => v.metricName?.endsWith(suffix))?.value ?? 0;
    process.send?.({ buckets, count: total('_count'), sum: total('_sum') });
  });
}

async function prepareDatabase(
  adminUrl: string,
  name: string,
  variant: Variant,
): Promise<{ url: string; token: string }> {
  const { url, db } = await createBenchDatabase(adminUrl, name);
  if (variant === 'unordered') await createUnorderedSequences(db);
  await createUser(db, 'bench', 'bench-password');
  const issued = await issueToken(db, 'bench', 'bench-password', 3_600_000, new Date());
  await db.destroy();
  return { url, token: issued!.token };
}

async function startWorkers(setup: Setup): Promise<Worker[]> {
  const workers = Array.from({ length: WORKERS }, () => cluster.fork());
  // A worker says `ready` once it listens for its setup (messages sent earlier would be lost).
  await Promise.all(
    workers.map(async (worker) => {
      await once(worker, 'message');
      worker.send(setup);
      await once(worker, 'message');
    }),
  );
  return workers;
}

async function stopWorkers(workers: Worker[]): Promise<void> {
  await Promise.all(
    workers.map(async (worker) => {
      const exited = once(worker, 'exit');
      worker.process.kill('SIGKILL');
      await exited;
    }),
  );
}

async function collectBatchSizes(workers: Worker[]): Promise<BatchSizes> {
  const replies = await Promise.all(
    workers.map(async (worker) => {
      const reply = once(worker, 'message');
      worker.send('batch-sizes');
      return (await reply)[0] as BatchSizes;
    }),
  );
  const buckets = replies[0]!.buckets.map(([le], i): [string, number] => [
    le,
    replies.reduce((n, r) => n + r.buckets[i]![1], 0),
  ]);
  return { buckets, count: replies.reduce((n, r) => n + r.count, 0), sum: replies.reduce((n, r) => n + r.sum, 0) };
}

interface Target {
  variant: Variant;
  workers: Worker[];
  databaseUrl: string;
  load: autocannon.Options;
}

async function startTarget(
  variant: Variant,
  mode: string,
  adminUrl: string,
  redisUrl: string,
  connections: number,
): Promise<Target> {
  const { url: databaseUrl, token } = await prepareDatabase(
    adminUrl,
    `bench_${variant}_${mode.replace(/\W/g, '_')}`,
    variant,
  );
  const httpPort = await findFreePort();
  const workers = await startWorkers({ variant, databaseUrl, redisUrl, httpPort });
  const load = {
    url: `http://127.0.0.1:${httpPort}/api/tasks/`,
    method: 'POST' as const,
    connections,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'bench task' }),
  };
  return { variant, workers, databaseUrl, load };
}

/**
 * Both variants up at once, loaded in alternating slices (O U U O O U ...), so that whatever
 * else the machine does falls on both alike. Throughput = 2xx over the loaded seconds; p50/p99
 * are the medians of the slices' percentiles.
 */
async function measureMode(mode: string, adminUrl: string, redisUrl: string, seconds: number, connections: number) {
  const targets = [
    await startTarget('ordered', mode, adminUrl, redisUrl, connections),
    await startTarget('unordered', mode, adminUrl, redisUrl, connections),
  ];
  try {
    for (const target of targets) await autocannon({ ...target.load, duration: WARMUP_S });
    for (const target of targets) for (const worker of target.workers) worker.send('reset');
    const slices = new Map<Variant, autocannon.Result[]>(targets.map((t) => [t.variant, []]));
    for (let i = 0; i < Math.ceil(seconds / SLICE_S); i += 1) {
      for (const target of i % 2 === 0 ? targets : [...targets].reverse()) {
        slices.get(target.variant)!.push(await autocannon({ ...target.load, duration: SLICE_S }));
      }
    }
    return await Promise.all(
      targets.map(async (target) => {
        const results = slices.get(target.variant)!;
        const sum = (pick: (r: autocannon.Result) => number) => results.reduce((n, r) => n + pick(r), 0);
        const db = connectDatabase(target.databaseUrl, 1);
        const order = await checkEventOrder(db);
        await db.destroy();
        return {
          variant: target.variant,
          mode,
          reqPerS: Math.round(sum((r) => r['2xx']) / (results.length * SLICE_S)),
          p50Ms: median(results.map((r) => r.latency.p50)),
          p99Ms: median(results.map((r) => r.latency.p99)),
          created: sum((r) => r['2xx']),
          non2xx: sum((r) => r.non2xx),
          errors: sum((r) => r.errors + r.timeouts),
          positionsInIdOrder: order.problems.length === 0,
          batches: target.variant === 'ordered' ? await collectBatchSizes(target.workers) : undefined,
        };
      }),
    );
  } finally {
    for (const target of targets) await stopWorkers(target.workers);
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
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

async function runPrimary(seconds: number, connections: number): Promise<void> {
  const { postgres, redis, cleanUp } = await startBenchStores({ persistent: true });
  try {
    const rows: Array<Awaited<ReturnType<typeof measureMode>>[number]> = [];
    for (const mode of MODES) {
      const admin = connectDatabase(postgres.url, 1);
      for (const [key, value] of Object.entries(mode.settings))
        await sql`alter system set ${sql.raw(key)} = ${sql.lit(value)}`.execute(admin);
      await sql`select pg_reload_conf()`.execute(admin);
      await admin.destroy();
      rows.push(...(await measureMode(mode.name, postgres.url, redis.url, seconds, connections)));
    }
    console.log(
      `node ${process.version}, W=${WORKERS} workers per variant, ${connections} connections, ${seconds} s per variant in alternating ${SLICE_S} s slices after ${WARMUP_S} s warm-up, POST /api/tasks/`,
    );
    console.table(rows.map(({ batches, ...row }) => row));
    for (const mode of MODES) {
      const [ordered, unordered] = ['ordered', 'unordered'].map((v) =>
        rows.find((r) => r.mode === mode.name && r.variant === v)!,
      );
      console.log(
        `${mode.name}: ordered/unordered throughput = ${(ordered!.reqPerS / unordered!.reqPerS).toFixed(2)}; ordered append batches: ${formatBatches(ordered!.batches!)}`,
      );
    }
  } finally {
    await cleanUp();
  }
}

await runBench(runPrimary, [10, 64], serve);
