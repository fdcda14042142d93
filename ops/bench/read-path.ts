/**
 * `npm run bench`: the read path of the compiled service under wrk, against a bare node:http server and a bare Koa
 * app answering the same bytes (docs/benchmarks.md "The read path"). BENCH_TASKS (1,000,000), BENCH_SECONDS (10),
 * BENCH_ROUNDS (3); writes ops/bench/results/read-path.md.
 *
 *   BENCH_TASKS=20000 BENCH_SECONDS=2 BENCH_ROUNDS=1 npm run bench   # a quick smoke run
 */
import { stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { depthCursor } from './read-path/depth-cursor.js';
import {
  buildRows,
  checkRow,
  PAGE_1_ROW,
  PIPELINED_ROW,
  POST_SCRIPT,
  ROW_COUNT,
  SHADOWED_ROW,
  UNWATCHED_ROW,
  type Row,
} from './read-path/rows.js';
import { hostLine, int, markdownTable, ms, stamp, writeResults, wrkVersion } from './harness/report.js';
import { log, runBench, scratchDir } from './harness/run.js';
import { describeSeeding, seedDatabase } from './harness/seed.js';
import { CONNECTIONS, interleave, runWrk, THREADS, type Slice } from './harness/send.js';
import {
  childPids,
  redisCommands,
  redisVersion,
  rssMiB,
  startBare,
  startService,
  startStores,
} from './harness/service.js';
import { readBenchCount } from './harness/settings.js';
import { median, sumOf } from './harness/stats.js';

const RESULTS = 'ops/bench/results/read-path.md';
const SECRET = 'read-path-bench-cursor-secret-0123456789';
/** The shadow rules of the "shadow rules too" row: met by the load, so their refusals are counted and logged. */
const SHADOW_RATES = 'anon=1000/s,user=1000/s';
const WARMUP_S = 1;
/** Measured on a shared 2-core host: events, rebuild and VACUUM ANALYZE of 100,000 tasks. */
const SEED_S_PER_100K = 5;
const GENEROUS = { THROTTLE_ANON: '100000/s', THROTTLE_USER: '100000/s' };
/** The service instances, by the settings each row compares (docs/benchmarks.md "The read path"). */
const INSTANCES = {
  service: GENEROUS,
  flood: { THROTTLE_ANON: '1/hour' },
  quiet: { ...GENEROUS, ACCESS_LOG: 'off' },
  shadowed: { ...GENEROUS, THROTTLE_SHADOW_RATES: SHADOW_RATES },
  unwatched: { ...GENEROUS, THROTTLE_WATCH: 'off' },
  pipelined: { ...GENEROUS, REDIS_AUTO_PIPELINING: 'on' },
};

const tasks = readBenchCount('BENCH_TASKS', 1_000_000, 10_000); // page 990 and offset 5000 must exist
const seconds = readBenchCount('BENCH_SECONDS', 10, 1);
const rounds = readBenchCount('BENCH_ROUNDS', 3, 1);

/** One row's run in one round, with the Redis commands processed meanwhile. */
type Run = Slice & { redisCommands: number };

/** Medians over the rounds; "÷ bare" over the bare server's median req/s (the first row), "÷ bare Koa" the second's. */
function summarise(rows: Row[], runs: Map<Row, Run[]>) {
  const rate = (row: Row) => median(runs.get(row)!.map((s) => s.reqPerS));
  const [bare, bareKoa] = [rate(rows[0]!), rate(rows[1]!)];
  return rows.map((row) => {
    const list = runs.get(row)!;
    const [requests, non2xx] = [sumOf(list, (s) => s.requests), sumOf(list, (s) => s.non2xx)];
    const per = row.flood ? non2xx : requests;
    return {
      row,
      reqPerS: rate(row),
      cells: [
        row.name,
        `\`${row.request}\``,
        int(rate(row)),
        (rate(row) / bare).toFixed(2),
        (rate(row) / bareKoa).toFixed(2),
        ms(median(list.map((s) => s.p50Ms))),
        ms(median(list.map((s) => s.p99Ms))),
        `${int(non2xx)} (of ${int(requests)})` +
          (sumOf(list, (s) => s.socketErrors) > 0 ? `, ${int(sumOf(list, (s) => s.socketErrors))} socket errors` : ''),
        `${(per === 0 ? 0 : sumOf(list, (s) => s.redisCommands) / per).toFixed(2)}${row.flood ? ' per refusal' : ''}`,
      ],
      requests,
      non2xx,
      redisPerRequest: per === 0 ? 0 : sumOf(list, (s) => s.redisCommands) / per,
    };
  });
}

async function main(): Promise<void> {
  const loadMinutes = Math.ceil((ROW_COUNT * (rounds * seconds + WARMUP_S)) / 60);
  log(
    `read-path benchmark: ${int(tasks)} tasks (seeding about ${Math.round((tasks / 100_000) * SEED_S_PER_100K)} s), then ` +
      `${ROW_COUNT} rows × ${rounds} rounds × ${seconds} s + ${WARMUP_S} s warm-up per row = about ${loadMinutes} min of load`,
  );
  const root = await scratchDir('read-path');
  const stores = await startStores({ database: 'bench_read_path' });
  const seeded = await seedDatabase(stores.databaseUrl, tasks);
  const seedSeconds = seeded.eventsSeconds + seeded.rebuildSeconds + seeded.vacuumSeconds;
  log(`seeded in ${seedSeconds.toFixed(1)} s: ${describeSeeding(seeded)}`);

  const base = { DATABASE_URL: stores.databaseUrl, REDIS_URL: stores.redisUrl, CURSOR_SECRET: SECRET };
  const services: Record<string, string> = {};
  let web: number[] = [];
  for (const [name, env] of Object.entries(INSTANCES)) {
    const service = await startService({ ...base, REDIS_PREFIX: `bench:${name}:`, ...env });
    services[name] = service.base;
    if (name === 'service') web = childPids(service.child.pid!);
  }
  const page1 = await fetch(`${services.service}/api/tasks/`);
  const bodyFile = join(root, 'page-1.json');
  await writeFile(bodyFile, Buffer.from(await page1.arrayBuffer()));
  const contentType = page1.headers.get('content-type') ?? 'application/json';
  const bare = await startBare(bodyFile, contentType);
  const bareKoa = await startBare(bodyFile, contentType, 'koa');
  const postScript = join(root, 'post.lua');
  await writeFile(postScript, POST_SCRIPT);
  const depth = await depthCursor(services.service!, SECRET, tasks);
  const rows = buildRows({
    bases: { ...services, bare: bare.base, bareKoa: bareKoa.base },
    readerToken: seeded.reader.token,
    writerToken: seeded.writer.token,
    tasks,
    depthCursor: depth.token,
    postScript,
  });
  for (const row of rows) await checkRow(row, row.load);

  const rssBefore = web.map(rssMiB);
  // Memory after a first ten thousand or so requests, to compare with after every row's millions.
  const servedByService = (row: Row) => row.load.url.startsWith(services.service!);
  const early = await runWrk(rows.find(servedByService)!.load, 1);
  const rssEarly = web.map(rssMiB);
  log(`warm-up: ${WARMUP_S} s per row`);
  for (const row of rows) await runWrk(row.load, WARMUP_S);
  const runs = await interleave(rows, rounds, async (row, round): Promise<Run> => {
    const before = (await redisCommands(stores.admin)).commands;
    const wrk = await runWrk(row.load, seconds);
    await sleep(300); // what was in flight when wrk stopped belongs to this run
    const commands = (await redisCommands(stores.admin)).commands - before;
    log(
      `round ${round + 1}/${rounds}  ${row.name.padEnd(40)} ${int(wrk.reqPerS).padStart(6)} req/s  ` +
        `p99 ${wrk.p99Ms.toFixed(1)} ms  non-2xx ${wrk.non2xx}`,
    );
    return { ...wrk, redisCommands: commands };
  });
  const rssAfter = web.map(rssMiB);
  const served = sumOf(
    [...runs].filter(([row]) => servedByService(row)),
    ([, list]) => sumOf(list, (s) => s.requests),
  );

  const summaries = summarise(rows, runs);
  const flooded = summaries.find((s) => s.row.flood)!;
  const rate = (name: string) => summaries.find((s) => s.row.name === name)!.reqPerS;
  const mib = (values: number[]) => values.map((v) => `${v.toFixed(0)} MiB`).join(', ');
  const total = (values: number[]) => sumOf(values, (v) => v);
  const report = [
    `# Read-path benchmark (\`npm run bench\`)`,
    '',
    `${stamp()}; node ${process.version}, PostgreSQL ${stores.postgresVersion} (fsync on), Redis ` +
      `${await redisVersion(stores.admin)}, wrk ${wrkVersion()}; ${hostLine()}.`,
    '',
    `N = ${int(tasks)} tasks, seeded in ${seedSeconds.toFixed(1)} s (${describeSeeding(seeded)}). ` +
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
      `cluster of 2 workers answering page 1's bytes (${int((await stat(bodyFile)).size)} bytes) from memory. ` +
      `Cursor at depth N: ${depth.how}.`,
    '',
    markdownTable(
      [
        'row',
        'request',
        'req/s>',
        '÷ bare>',
        '÷ bare Koa>',
        'p50 ms>',
        'p99 ms>',
        'non-2xx (of requests)>',
        'Redis cmds / req>',
      ],
      summaries.map((s) => s.cells),
    ),
    '',
    `Watching the throttle: page 1 with the who view, the near-limit counter and shadow rules on runs at ` +
      `${(rate(SHADOWED_ROW) / rate(UNWATCHED_ROW)).toFixed(2)}× the same with THROTTLE_WATCH=off and no shadow rules (goal ≥ 0.95×).`,
    '',
    `Redis auto-pipelining: page 1 with REDIS_AUTO_PIPELINING=on runs at ${(rate(PIPELINED_ROW) / rate(PAGE_1_ROW)).toFixed(2)}× page 1 with it off ` +
      `(the default), on a sixth instance like the service.`,
    '',
    `The flood: ${int(flooded.non2xx)} refused of ${int(flooded.requests)} requests, ` +
      `${flooded.redisPerRequest.toFixed(2)} Redis commands per refused request (INFO commandstats). ` +
      `Web worker RSS: ${mib(rssBefore)} before the load, ${mib(rssEarly)} after the first ${int(early.requests)} requests, ` +
      `${mib(rssAfter)} after ${int(served + early.requests)} requests (at least; warm-ups not counted): ` +
      `${(total(rssAfter) / total(rssEarly)).toFixed(2)}× the sum after the first ones.`,
    '',
  ].join('\n');
  await writeResults(RESULTS, report);
}

await runBench('read-path', main);
