/**
 * What throttling costs the service: GET /api/tasks/ (page 1 of 50 tasks, anonymous) through the
 * real Koa stack, served by W=2 node:cluster workers per variant, loaded by autocannon on
 * 127.0.0.1, all variants up at once and measured in interleaved rounds so the host's load falls
 * on them alike:
 *
 *   off      THROTTLE_ENABLED=false
 *   on       throttling as deployed (anon 100/min, TRUST_PROXY_HOPS=1); each request carries
 *            one of 1,000 client addresses in X-Forwarded-For, so the limit never triggers
 *   on-N1000 the same with anon 1000/min (a limit above 128: the log is read by header and slots, not whole)
 *   on-bigN  anon 100000/min (the largest N accepted) and a single client address, whose log
 *            grows to thousands of entries during the run
 *
 *   node --import tsx ops/bench/throttle-service.ts [seconds per variant = 10] [rounds = 2] [connections = 50]
 *
 * Prints req/s and the ratio to `off` (overall and the range over rounds; the goal for `on` is
 * ≥ 0.9), p50/p99 latency, Redis commands and script calls (round trips) per request from INFO
 * commandstats (commands inside a script count), then the mean MEMORY USAGE of the client keys
 * the `on` run left, and of one key holding 1 and N entries for a few rates. Starts and stops its own
 * throwaway PostgreSQL and redis-server in a temporary directory it deletes.
 */
import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { type Redis } from 'ioredis';
import { createUser } from '../../src/auth/users.repository.js';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps } from '../../src/deps.js';
import { appendBatch } from '../../src/events/store/append-batch.js';
import { createApp } from '../../src/api/app.js';
import { createThrottler, parseRate, type ScopeRule } from '../../src/throttle/index.js';
import { findFreePort } from '../../src/embedded/ports.js';
import { createBenchDatabase, startBenchStores } from '../../test/helpers/bench-stores.js';
import { benchSettings, runBench, type BenchSetup } from './bench-worker.js';

const VARIANTS = {
  off: { THROTTLE_ENABLED: 'false' },
  on: { THROTTLE_ANON: '100/min' },
  'on-N1000': { THROTTLE_ANON: '1000/min' },
  'on-bigN': { THROTTLE_ANON: '100000/min' },
} as const;
type Variant = keyof typeof VARIANTS;
interface Setup extends BenchSetup {
  variant: Variant;
}

const WORKERS = 2;
const WARMUP_S = 2;
const CLIENTS = 1000;
const PREFIX = 'bench:';

async function serve(setup: Setup): Promise<void> {
  const config = loadConfig({
    ...benchSettings(setup),
    REDIS_PREFIX: `${PREFIX}${setup.variant}:`,
    TRUST_PROXY_HOPS: '1',
    ...VARIANTS[setup.variant],
  });
  const { deps } = await buildDeps(config, 'bench');
  createApp(deps).listen(setup.httpPort, '127.0.0.1', () => process.send?.('listening'));
}

async function prepareDatabase(adminUrl: string): Promise<string> {
  const { url, db } = await createBenchDatabase(adminUrl, 'bench_throttle');
  const created = await createUser(db, 'bench', 'bench-password');
  if (!created.ok) throw new Error('could not create the bench user');
  const actor = { userId: created.user.id, username: 'bench' };
  await appendBatch(
    db,
    Array.from({ length: 50 }, (_, i) => ({
      type: 'CreateTask' as const,
      actor,
      fields: { title: `Task ${i + 1}`, description: '', completed: false },
    })),
  );
  await db.destroy();
  return url;
}

interface Target {
  variant: Variant;
  workers: Worker[];
  load: autocannon.Options;
}

async function startTarget(
  variant: Variant,
  databaseUrl: string,
  redisUrl: string,
  connections: number,
): Promise<Target> {
  const httpPort = await findFreePort();
  const workers = Array.from({ length: WORKERS }, () => cluster.fork());
  await Promise.all(
    workers.map(async (worker) => {
      await once(worker, 'message');
      worker.send({ variant, databaseUrl, redisUrl, httpPort } satisfies Setup);
      await once(worker, 'message');
    }),
  );
  let turn = 0;
  const forwardedFor =
    variant === 'on-bigN'
      ? () => '198.18.0.1'
      : () => {
          const i = turn++ % CLIENTS;
          return `198.18.${i >> 8}.${i & 255}`;
        };
  const load: autocannon.Options = {
    url: `http://127.0.0.1:${httpPort}/api/tasks/`,
    connections,
    requests: [
      {
        setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'x-forwarded-for': forwardedFor() } }),
      },
    ],
  };
  return { variant, workers, load };
}

async function commandCounts(admin: Redis): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const match of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    counts.set(match[1]!, Number(match[2]));
  }
  return counts;
}

async function measureSlice(target: Target, admin: Redis, seconds: number) {
  const before = await commandCounts(admin);
  const result = await autocannon({ ...target.load, duration: seconds });
  await sleep(1000); // the requests still in flight when autocannon stopped belong to this slice
  const after = await commandCounts(admin);
  let commands = 0;
  let scripts = 0;
  for (const [name, calls] of after) {
    const delta = calls - (before.get(name) ?? 0);
    if (name !== 'info') commands += delta;
    if (name === 'evalsha' || name === 'eval') scripts += delta;
  }
  return {
    requests: result['2xx'] + result.non2xx,
    ok: result['2xx'],
    seconds: result.duration,
    errors: result.errors + result.timeouts,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    commands,
    scripts,
  };
}
type Slice = Awaited<ReturnType<typeof measureSlice>>;

function summarise(variant: Variant, slices: Slice[], baseline: Slice[]) {
  const sum = (rows: Slice[], pick: (slice: Slice) => number) => rows.reduce((total, slice) => total + pick(slice), 0);
  const rate = (rows: Slice[]) => sum(rows, (s) => s.ok) / sum(rows, (s) => s.seconds);
  const requests = sum(slices, (s) => s.requests);
  const rounds = slices.map((slice, i) => rate([slice]) / rate(baseline.slice(i, i + 1)));
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  return {
    variant,
    reqPerS: Math.round(rate(slices)),
    ratio: Number((rate(slices) / rate(baseline)).toFixed(3)),
    roundRatios: `${Math.min(...rounds).toFixed(2)}–${Math.max(...rounds).toFixed(2)}`,
    p50Ms: median(slices.map((s) => s.p50Ms)),
    p99Ms: median(slices.map((s) => s.p99Ms)),
    non2xx: requests - sum(slices, (s) => s.ok),
    errors: sum(slices, (s) => s.errors),
    redisCmdsPerReq: Number((sum(slices, (s) => s.commands) / requests).toFixed(2)),
    roundTripsPerReq: Number((sum(slices, (s) => s.scripts) / requests).toFixed(3)),
  };
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
    const key = `mem:throttle:v3:{ip:${text}}:anon`;
    for (let i = 1; i <= entries; i += 1) {
      await throttler.consume([{ rule, ident: `ip:${text}` }]);
      if (i === 1 || i === entries)
        rows.push({ rate: text, entries: i, bytes: await admin.memory('USAGE', key, 'SAMPLES', 0) });
    }
  }
  return rows;
}

/** The number of keys matching `pattern` and the mean MEMORY USAGE of up to 200 of them. */
async function keyMemory(admin: Redis, pattern: string): Promise<{ keys: number; meanBytes: number }> {
  let cursor = '0';
  const keys: string[] = [];
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  const sample = keys.slice(0, 200);
  const sizes = await Promise.all(sample.map((key) => admin.memory('USAGE', key, 'SAMPLES', 0)));
  return {
    keys: keys.length,
    meanBytes: Math.round(sizes.reduce<number>((n, size) => n + (size ?? 0), 0) / Math.max(1, sample.length)),
  };
}

async function runPrimary(seconds: number, rounds: number, connections: number): Promise<void> {
  const { postgres, redis, admin, cleanUp } = await startBenchStores();
  try {
    const databaseUrl = await prepareDatabase(postgres.url);
    const targets: Target[] = [];
    for (const variant of Object.keys(VARIANTS) as Variant[])
      targets.push(await startTarget(variant, databaseUrl, redis.url, connections));
    for (const target of targets) await autocannon({ ...target.load, duration: WARMUP_S });
    const slices = new Map<Variant, Slice[]>(targets.map((t) => [t.variant, []]));
    for (let round = 0; round < rounds; round += 1) {
      const order = [...targets.slice(round % targets.length), ...targets.slice(0, round % targets.length)];
      for (const target of order) slices.get(target.variant)!.push(await measureSlice(target, admin, seconds / rounds));
    }
    console.log(
      `redis ${(await admin.info('server')).match(/redis_version:(\S+)/)?.[1]}, node ${process.version}, W=${WORKERS} workers per variant, ` +
        `${connections} connections, ${seconds} s per variant in ${rounds} interleaved rounds after ${WARMUP_S} s warm-up, GET /api/tasks/, ` +
        `load average ${loadavg()
          .map((load) => load.toFixed(1))
          .join(' ')}`,
    );
    console.table(targets.map((t) => summarise(t.variant, slices.get(t.variant)!, slices.get('off')!)));
    const left = await keyMemory(admin, `${PREFIX}on:throttle:*`);
    const used = Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))?.[1]);
    console.log(
      `"on" left ${left.keys} client keys (${CLIENTS} addresses), MEMORY USAGE ${left.meanBytes} bytes each on average; ` +
        `Redis used_memory ${used} bytes in all`,
    );
    console.log('MEMORY USAGE of one client key (bytes; entries are 8 bytes each after a 40-byte header):');
    console.table(await memoryPerKey(admin));
  } finally {
    await cleanUp();
  }
}

await runBench(runPrimary, [10, 2, 50], serve);
