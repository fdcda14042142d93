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
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import type { Redis } from 'ioredis';
import { connectDatabase } from '../../db/connect.js';
import { createUser } from '../../src/auth/users.repository.js';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps } from '../../src/deps.js';
import { appendBatch } from '../../src/events/store/append-batch.js';
import { createApp } from '../../src/api/app.js';
import { createThrottler, parseRate, type ScopeRule } from '../../src/throttle/index.js';
import { loadAverage } from './harness/report.js';
import { runBench } from './harness/run.js';
import { interleave, runAutocannon, type Slice } from './harness/send.js';
import { redisCommands, redisVersion, startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { median, spread, sumOf } from './harness/stats.js';
import { benchSettings, forkWorkers, runCluster, type BenchSetup } from './harness/workers.js';

const VARIANTS = {
  off: { THROTTLE_ENABLED: 'false' },
  on: { THROTTLE_ANON: '100/min' },
  'on-N1000': { THROTTLE_ANON: '1000/min' },
  'on-bigN': { THROTTLE_ANON: '100000/min' },
} as const;
type Variant = keyof typeof VARIANTS;
type Setup = BenchSetup & { variant: Variant };
type Run = Slice & { commands: number; scripts: number };

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

async function seed(databaseUrl: string): Promise<void> {
  const db = connectDatabase(databaseUrl, 1);
  const created = await createUser(db, 'bench', 'bench-password');
  if (!created.ok) throw new Error('could not create the bench user');
  const actor = { userId: created.user.id, username: 'bench' };
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
      if (i === 1 || i === entries)
        rows.push({
          rate: text,
          entries: i,
          bytes: await admin.memory('USAGE', `mem:throttle:v3:{ip:${text}}:anon`, 'SAMPLES', 0),
        });
    }
  }
  return rows;
}

/** The number of keys matching `pattern` and the mean MEMORY USAGE of up to 200 of them. */
async function keyMemory(admin: Redis, pattern: string): Promise<{ keys: number; meanBytes: number }> {
  const keys: string[] = [];
  for (let cursor = '0'; ;) {
    const [next, batch] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...batch);
    if ((cursor = next) === '0') break;
  }
  const sizes = await Promise.all(keys.slice(0, 200).map((key) => admin.memory('USAGE', key, 'SAMPLES', 0)));
  return { keys: keys.length, meanBytes: Math.round(sumOf(sizes, (size) => size ?? 0) / Math.max(1, sizes.length)) };
}

async function primary(): Promise<void> {
  const [seconds, rounds, connections] = readArgs([10, 2, 50]) as [number, number, number];
  const { databaseUrl, redisUrl, admin } = await startStores({ persistent: false, database: 'bench_throttle' });
  await seed(databaseUrl);
  const targets: { variant: Variant; load: autocannon.Options }[] = [];
  for (const variant of Object.keys(VARIANTS) as Variant[]) {
    const { base } = await forkWorkers(WORKERS, { variant, databaseUrl, redisUrl });
    let turn = 0;
    const client = () => (variant === 'on-bigN' ? 0 : turn++ % CLIENTS);
    const address = (i = client()) => `198.18.${i >> 8}.${i & 255}`;
    const requests = [
      {
        setupRequest: (r: { headers?: object }) => ({ ...r, headers: { ...r.headers, 'x-forwarded-for': address() } }),
      },
    ];
    targets.push({ variant, load: { url: `${base}/api/tasks/`, connections, requests } });
  }
  for (const target of targets) await runAutocannon(target.load, WARMUP_S);
  const slices = await interleave(targets, rounds, async (target): Promise<Run> => {
    const before = await redisCommands(admin);
    const slice = await runAutocannon(target.load, seconds / rounds);
    await sleep(1000); // the requests still in flight when autocannon stopped belong to this slice
    const after = await redisCommands(admin);
    return { ...slice, commands: after.commands - before.commands, scripts: after.scripts - before.scripts };
  });
  console.log(
    `redis ${await redisVersion(admin)}, node ${process.version}, W=${WORKERS} workers per variant, ${connections} ` +
      `connections, ${seconds} s per variant in ${rounds} interleaved rounds after ${WARMUP_S} s warm-up, ` +
      `GET /api/tasks/, load average ${loadAverage()}`,
  );
  const rate = (runs: Run[]) => sumOf(runs, (s) => s.ok) / sumOf(runs, (s) => s.seconds);
  const baseline = slices.get(targets[0]!)!;
  console.table(
    targets.map(({ variant }, i) => {
      const list = slices.get(targets[i]!)!;
      const requests = sumOf(list, (s) => s.requests);
      return {
        variant,
        reqPerS: Math.round(rate(list)),
        ratio: Number((rate(list) / rate(baseline)).toFixed(3)),
        roundRatios: spread(list.map((slice, round) => rate([slice]) / rate([baseline[round]!]))),
        p50Ms: median(list.map((s) => s.p50Ms)),
        p99Ms: median(list.map((s) => s.p99Ms)),
        non2xx: sumOf(list, (s) => s.non2xx),
        errors: sumOf(list, (s) => s.socketErrors),
        redisCmdsPerReq: Number((sumOf(list, (s) => s.commands) / requests).toFixed(2)),
        roundTripsPerReq: Number((sumOf(list, (s) => s.scripts) / requests).toFixed(3)),
      };
    }),
  );
  const left = await keyMemory(admin, `${PREFIX}on:throttle:*`);
  const used = Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))?.[1]);
  console.log(
    `"on" left ${left.keys} client keys (${CLIENTS} addresses), MEMORY USAGE ${left.meanBytes} bytes each on average; ` +
      `Redis used_memory ${used} bytes in all`,
  );
  console.log('MEMORY USAGE of one client key (bytes; entries are 8 bytes each after a 40-byte header):');
  console.table(await memoryPerKey(admin));
}

await runCluster(() => runBench('throttle-service', primary), serve);
