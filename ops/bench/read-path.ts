/**
 * `npm run bench`: the read path of the compiled service under wrk, against a bare node:http
 * server and a bare Koa app answering the same bytes. Starts a throwaway PostgreSQL and Redis, seeds BENCH_TASKS
 * tasks (default 1,000,000) as events and derives every projection by the rebuild, starts
 * `node dist/src/main.js` with two web workers and throttling on (limits that never trigger), a
 * second with ACCESS_LOG=off, a third whose anonymous limit is 1/hour for the 429 flood, a fourth with shadow
 * rules and a fifth with THROTTLE_WATCH=off (each
 * with the default logging otherwise), and the bare servers; then
 * runs every row with `wrk -t2 -c32 -d<BENCH_SECONDS>s --latency` (default 10 s), in
 * BENCH_ROUNDS interleaved rounds (default 3), and prints the medians as a Markdown table, also
 * written to ops/bench/results/read-path.md.
 *
 *   npm run bench                                                # defaults: about 7 minutes after seeding (about 1 minute)
 *   BENCH_TASKS=20000 BENCH_SECONDS=2 BENCH_ROUNDS=1 npm run bench   # a quick smoke run
 */
import type { ChildProcess } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { connectDatabase } from '../../db/connect.js';
import { findFreePort } from '../../src/embedded/ports.js';
import type { RunningCluster } from '../../test/helpers/cluster.js';
import { depthCursor } from './read-path/depth-cursor.js';
import { childPids, rssMiB, startBare, startService, startStores, type Stores } from './read-path/processes.js';
import { markdownTable, summarise, type Slice } from './read-path/report.js';
import {
  buildRows,
  PAGE_1_ROW,
  PIPELINED_ROW,
  POST_SCRIPT,
  ROW_COUNT,
  SHADOWED_ROW,
  UNWATCHED_ROW,
  type Row,
} from './read-path/rows.js';
import { seedTasks } from './read-path/seed.js';
import { CONNECTIONS, runWrk, THREADS } from './read-path/wrk.js';
import { describeCommit, wrkVersion } from './machine.js';
import { readBenchCount } from './settings.js';

const RESULTS = 'ops/bench/results/read-path.md';
const SECRET = 'read-path-bench-cursor-secret-0123456789';
/** The shadow rules of the "shadow rules too" row: met by the load, so their refusals are counted and logged. */
const SHADOW_RATES = 'anon=1000/s,user=1000/s';
const WARMUP_S = 1;
/** Measured on a shared 2-core host: events, rebuild and VACUUM ANALYZE of 100,000 tasks. */
const SEED_S_PER_100K = 5;

const tasks = readBenchCount('BENCH_TASKS', 1_000_000, 10_000); // page 990 and offset 5000 must exist
const seconds = readBenchCount('BENCH_SECONDS', 10, 1);
const rounds = readBenchCount('BENCH_ROUNDS', 3, 1);

const running: {
  stores?: Stores;
  services: RunningCluster[];
  bare?: ChildProcess;
  bareKoa?: ChildProcess;
  redis?: Redis;
  root?: string;
} = {
  services: [],
};

async function cleanUp(): Promise<void> {
  running.bare?.kill('SIGTERM');
  running.bareKoa?.kill('SIGTERM');
  await Promise.allSettled(running.services.map((service) => service.stop('SIGTERM')));
  running.redis?.disconnect();
  await running.stores?.stop().catch(() => {});
  if (running.root) await rm(running.root, { recursive: true, force: true });
}

async function redisCommands(redis: Redis): Promise<number> {
  return Number(/^total_commands_processed:(\d+)/m.exec(await redis.info('stats'))?.[1]);
}

/** Checks each row once, so a row that answers the wrong status stops the run before measuring. */
async function checkRows(rows: Row[]): Promise<void> {
  for (const row of rows) {
    const post = row.load.script !== undefined;
    const response = await fetch(row.load.url, {
      method: post ? 'POST' : 'GET',
      headers: { ...row.load.headers, ...(post ? { 'Content-Type': 'application/json' } : {}) },
      body: post ? '{"title":"Written by the read-path benchmark"}' : undefined,
    });
    await response.arrayBuffer();
    const expected = row.flood ? [200, 429] : post ? [201] : [200];
    if (!expected.includes(response.status))
      throw new Error(`${row.name}: ${row.load.url} answered ${response.status}`);
  }
}

async function measure(rows: Row[], redis: Redis): Promise<Map<Row, Slice[]>> {
  const slices = new Map<Row, Slice[]>(rows.map((row) => [row, []]));
  process.stderr.write(`warm-up: ${WARMUP_S} s per row\n`);
  for (const row of rows) await runWrk(row.load, WARMUP_S);
  for (let round = 0; round < rounds; round += 1) {
    const order = [...rows.slice(round % rows.length), ...rows.slice(0, round % rows.length)];
    for (const row of order) {
      const before = await redisCommands(redis);
      const wrk = await runWrk(row.load, seconds);
      await sleep(300); // what was in flight when wrk stopped belongs to this run
      const redisCommandsDelta = (await redisCommands(redis)) - before - 1; // less the first INFO
      slices.get(row)!.push({ wrk, redisCommands: redisCommandsDelta });
      process.stderr.write(
        `round ${round + 1}/${rounds}  ${row.name.padEnd(40)} ${Math.round(wrk.reqPerS).toString().padStart(6)} req/s  p99 ${wrk.p99Ms.toFixed(1)} ms  non-2xx ${wrk.non2xx}\n`,
      );
    }
  }
  return slices;
}

async function main(): Promise<void> {
  const loadSeconds = ROW_COUNT * (rounds * seconds + WARMUP_S);
  process.stderr.write(
    `read-path benchmark: ${tasks.toLocaleString('en-US')} tasks (seeding about ${Math.round((tasks / 100_000) * SEED_S_PER_100K)} s), then ` +
      `${ROW_COUNT} rows × ${rounds} rounds × ${seconds} s + ${WARMUP_S} s warm-up per row = about ${Math.ceil(loadSeconds / 60)} min of load\n`,
  );
  running.root = await mkdtemp(join(tmpdir(), 'paceline-read-path-'));
  await chmod(running.root, 0o755); // as root, PostgreSQL runs as the postgres user
  const stores = (running.stores = await startStores(running.root));

  const db = connectDatabase(stores.databaseUrl, 2);
  const seeded = await seedTasks(db, tasks).finally(() => db.destroy());
  const seedSeconds = seeded.eventsSeconds + seeded.rebuildSeconds + seeded.vacuumSeconds;
  process.stderr.write(
    `seeded in ${seedSeconds.toFixed(1)} s: events ${seeded.eventsSeconds.toFixed(1)} s, rebuild ${seeded.rebuildSeconds.toFixed(1)} s, ` +
      `VACUUM ANALYZE ${seeded.vacuumSeconds.toFixed(1)} s\n`,
  );

  const storesEnv = { DATABASE_URL: stores.databaseUrl, REDIS_URL: stores.redisUrl, CURSOR_SECRET: SECRET };
  const service = await startService({
    ...storesEnv,
    REDIS_PREFIX: 'bench:main:',
    THROTTLE_ANON: '100000/s',
    THROTTLE_USER: '100000/s',
  });
  running.services.push(service);
  const flood = await startService({ ...storesEnv, REDIS_PREFIX: 'bench:flood:', THROTTLE_ANON: '1/hour' });
  running.services.push(flood);
  const quiet = await startService({
    ...storesEnv,
    REDIS_PREFIX: 'bench:quiet:',
    THROTTLE_ANON: '100000/s',
    THROTTLE_USER: '100000/s',
    ACCESS_LOG: 'off',
  });
  running.services.push(quiet);
  // What watching the throttle costs: the defaults (who, how many, near-limit) with shadow rules on top, and none of it.
  // The shadow rate is met: most requests are shadow refusals, counted, logged by sample and in the who view.
  const generous = { ...storesEnv, THROTTLE_ANON: '100000/s', THROTTLE_USER: '100000/s' };
  const shadowed = await startService({
    ...generous,
    REDIS_PREFIX: 'bench:shadowed:',
    THROTTLE_SHADOW_RATES: SHADOW_RATES,
  });
  running.services.push(shadowed);
  const unwatched = await startService({ ...generous, REDIS_PREFIX: 'bench:unwatched:', THROTTLE_WATCH: 'off' });
  running.services.push(unwatched);
  const pipelined = await startService({
    ...generous,
    REDIS_PREFIX: 'bench:pipelined:',
    REDIS_AUTO_PIPELINING: 'on',
  });
  running.services.push(pipelined);

  const page1 = await fetch(`${service.base}/api/tasks/`);
  const bodyFile = join(running.root, 'page-1.json');
  await writeFile(bodyFile, Buffer.from(await page1.arrayBuffer()));
  const barePort = await findFreePort();
  const contentType = page1.headers.get('content-type') ?? 'application/json';
  running.bare = await startBare(barePort, 2, bodyFile, contentType);
  const koaPort = await findFreePort();
  running.bareKoa = await startBare(koaPort, 2, bodyFile, contentType, 'koa');
  const postScript = join(running.root, 'post.lua');
  await writeFile(postScript, POST_SCRIPT);

  const depth = await depthCursor(service.base, SECRET, tasks);
  const rows = buildRows({
    bare: `http://127.0.0.1:${barePort}`,
    bareKoa: `http://127.0.0.1:${koaPort}`,
    quiet: quiet.base,
    service: service.base,
    flood: flood.base,
    shadowed: shadowed.base,
    unwatched: unwatched.base,
    pipelined: pipelined.base,
    readerToken: seeded.reader.token,
    writerToken: seeded.writer.token,
    tasks,
    depthCursor: depth.token,
    postScript,
  });
  await checkRows(rows);

  const redis = (running.redis = new Redis(stores.redisUrl));
  const web = childPids(service.child.pid!);
  const rssBefore = web.map(rssMiB);
  // Memory after a first ten thousand or so requests, to compare with after every row's millions.
  const servedByService = (row: Row) => row.load.url.startsWith(service.base);
  const early = await runWrk(rows.find(servedByService)!.load, 1);
  const rssEarly = web.map(rssMiB);
  const slices = await measure(rows, redis);
  const rssAfter = web.map(rssMiB);
  const served = [...slices]
    .filter(([row]) => servedByService(row))
    .reduce((sum, [, list]) => sum + list.reduce((n, slice) => n + slice.wrk.requests, 0), early.requests);
  const total = (values: number[]) => values.reduce((a, b) => a + b, 0);

  const summaries = summarise(rows, slices);
  const flooded = summaries.find((s) => s.row.flood)!;
  const rate = (name: string) => summaries.find((s) => s.row.name === name)!.reqPerS;
  const watchRatio = rate(SHADOWED_ROW) / rate(UNWATCHED_ROW);
  const pipelineRatio = rate(PIPELINED_ROW) / rate(PAGE_1_ROW);
  const mib = (values: number[]) => values.map((v) => `${v.toFixed(0)} MiB`).join(', ');
  const redisVersion = /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1];
  const report = [
    `# Read-path benchmark (\`npm run bench\`)`,
    '',
    `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${describeCommit()}; node ${process.version}, PostgreSQL ${stores.postgresVersion} ` +
      `(fsync on), Redis ${redisVersion}, wrk ${wrkVersion()}; ${cpus().length} CPUs shared by everything, load average ` +
      `${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} at the end.`,
    '',
    `N = ${tasks.toLocaleString('en-US')} tasks, seeded in ${seedSeconds.toFixed(1)} s (events by generate_series ${seeded.eventsSeconds.toFixed(1)} s, ` +
      `projections by the rebuild ${seeded.rebuildSeconds.toFixed(1)} s, VACUUM ANALYZE ${seeded.vacuumSeconds.toFixed(1)} s). ` +
      `\`wrk -t${THREADS} -c${CONNECTIONS} -d${seconds}s --latency\` per row, ${rounds} interleaved round${rounds > 1 ? 's' : ''} after ${WARMUP_S} s of warm-up per row; ` +
      `medians over the rounds; "÷ bare" is the row's median req/s over the bare node:http server's, "÷ bare Koa" over the bare Koa app's.`,
    '',
    `The service: \`node dist/src/main.js\`, 2 web workers (ROLE=web, no job worker), throttling on with anon and user at 100000/s ` +
      `(never reached), with the default logging (LOG_LEVEL=info, ACCESS_LOG=all: a line per request, read and dropped); the ` +
      `ACCESS_LOG=off row runs against a second instance like it, the flood row against a third whose anonymous limit is 1/hour, ` +
      `the "shadow rules too" row against a fourth with THROTTLE_SHADOW_RATES=${SHADOW_RATES} (met: most requests are ` +
      `shadow refusals, never refused), the THROTTLE_WATCH=off row against a fifth without the who view, distinct count and near-limit counter, ` +
      `the REDIS_AUTO_PIPELINING=on row against a sixth. ` +
      `The bare Koa app: one middleware answering the same bytes on the same cluster. The bare server: a node:http ` +
      `cluster of 2 workers answering page 1's bytes (${(await stat(bodyFile)).size.toLocaleString('en-US')} bytes) from memory. ` +
      `Cursor at depth N: ${depth.how}.`,
    '',
    markdownTable(summaries),
    '',
    `Watching the throttle: page 1 with the who view, the near-limit counter and shadow rules on runs at ` +
      `${watchRatio.toFixed(2)}× the same with THROTTLE_WATCH=off and no shadow rules (goal ≥ 0.95×).`,
    '',
    `Redis auto-pipelining: page 1 with REDIS_AUTO_PIPELINING=on runs at ${pipelineRatio.toFixed(2)}× page 1 with it off ` +
      `(the default), on a sixth instance like the service.`,
    '',
    `The flood: ${flooded.non2xx.toLocaleString('en-US')} refused of ${flooded.requests.toLocaleString('en-US')} requests, ` +
      `${flooded.redisPerRequest.toFixed(2)} Redis commands per refused request (INFO stats total_commands_processed). ` +
      `Web worker RSS: ${mib(rssBefore)} before the load, ${mib(rssEarly)} after the first ${early.requests.toLocaleString('en-US')} requests, ` +
      `${mib(rssAfter)} after ${served.toLocaleString('en-US')} requests (at least; warm-ups not counted): ` +
      `${(total(rssAfter) / total(rssEarly)).toFixed(2)}× the sum after the first ones.`,
    '',
  ].join('\n');
  process.stdout.write(`\n${report}`);
  await mkdir('ops/bench/results', { recursive: true });
  await writeFile(RESULTS, report);
  process.stderr.write(`written to ${RESULTS}\n`);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`\n${signal}: stopping what the benchmark started\n`);
    void cleanUp().finally(() => process.exit(130));
  });
}
try {
  await main();
} catch (error) {
  process.stderr.write(
    `read-path benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
} finally {
  await cleanUp();
}
