/**
 * `npm run bench:runtime`: the same compiled dist/ on Node.js 20 (the binary named by the first argument, which the
 * npm script installs) and on this process's node, in one run (docs/benchmarks.md "Runtime (`npm run
 * bench:runtime`)"). BENCH_TASKS (20,000), BENCH_SECONDS (5), BENCH_ROUNDS (3); writes ops/bench/results/runtime.md.
 *
 *   BENCH_SECONDS=2 BENCH_ROUNDS=1 npm run bench:runtime     # a quick smoke run
 */
import { cpus } from 'node:os';
import { int, loadAverage, markdownTable, ms, stamp, writeResults, wrkVersion } from './harness/report.js';
import { log, runBench, scratchDir } from './harness/run.js';
import { seedDatabase } from './harness/seed.js';
import { CONNECTIONS, THREADS } from './harness/send.js';
import { childPids, redisVersion, startStores, type Tree } from './harness/service.js';
import { readBenchCount } from './harness/settings.js';
import { median, spread, sumOf } from './harness/stats.js';
import { measure, WARMUP_CPU_S, WARMUP_MAX_RUNS, type Pair, type Run } from './runtime/measure.js';
import { describeRuntime, reportedVersion, ROWS, startTargets, type Row } from './runtime/processes.js';
import type { Runtime, Targets } from './runtime/processes.js';

const RESULTS = 'ops/bench/results/runtime.md';

const tasks = readBenchCount('BENCH_TASKS', 20_000, 1_000);
const seconds = readBenchCount('BENCH_SECONDS', 5, 1);
const rounds = readBenchCount('BENCH_ROUNDS', 3, 1);

/** The Node.js runtimes to compare: the one named on the command line, then this process's. */
function readRuntimes(): [Runtime, Runtime] {
  if (!process.argv[2]) {
    process.stderr.write('usage: node --import tsx ops/bench/runtime.ts <the node binary to compare with>\n');
    process.exit(2);
  }
  const [old, ours] = [describeRuntime(process.argv[2]), describeRuntime(process.execPath)];
  if (old.line === ours.line) throw new Error(`${old.version} and ${ours.version} are one line: nothing to compare`);
  return [old, ours];
}

/** What each runtime's processes wrote to stderr, where Node.js prints its warnings (the logs go to stdout). */
function describeStderr(runtimes: Runtime[], targets: Map<Runtime, Targets>): string {
  const parts = runtimes.map((runtime) => {
    const text = Object.values(targets.get(runtime)!.trees).map((tree) => tree.output());
    const lines = [...new Set(text.join('\n').split('\n'))].filter((line) => line.trim() !== '');
    if (lines.length > 0) log(`node ${runtime.line}'s processes wrote to stderr:\n${lines.join('\n')}`);
    const shown = lines.map((line) => `\`${line.slice(0, 160)}\``).join(', ');
    return `node ${runtime.line}: ${lines.length === 0 ? 'nothing' : shown}`;
  });
  return `Written to stderr by the services and bare servers, where Node.js prints its warnings: ${parts.join('; ')}.`;
}

/** One row of the table: each runtime's req/s, new ÷ old with the rounds' spread, then p99 and CPU per request. */
function rowCells(name: string, request: string, pairs: Pair[]): (string | number)[] {
  const [old, ours] = [pairs.map((p) => p.old), pairs.map((p) => p.new)];
  const ratios = pairs.map((pair) => pair.new.wrk.reqPerS / pair.old.wrk.reqPerS);
  const each = (pick: (run: Run) => number, format: (v: number) => string) =>
    [old, ours].map((runs) => format(median(runs.map(pick))));
  return [
    name,
    `\`${request}\``,
    ...each((r) => r.wrk.reqPerS, int),
    median(ratios).toFixed(2),
    spread(ratios),
    ...each((r) => r.wrk.p99Ms, ms),
    ...each((r) => r.cpuUsPerRequest, int),
  ];
}

/** One line on the error statuses (400 or more, as wrk counts them) and socket errors, or on their absence. */
function describeFailures(pairs: Map<Row, Pair[]>): string {
  const runs = (row: Row) => pairs.get(row)!.flatMap((pair) => [pair.old.wrk, pair.new.wrk]);
  const requests = int(sumOf(ROWS, (row) => sumOf(runs(row), (r) => r.requests)));
  const failed = ROWS.map((row) => ({
    row,
    non2xx: sumOf(runs(row), (r) => r.non2xx),
    errors: sumOf(runs(row), (r) => r.socketErrors),
  })).filter((f) => f.non2xx + f.errors > 0);
  if (failed.length === 0) return `None of the ${requests} measured requests had an error status or a socket error.`;
  const list = failed.map((f) => `${f.row.name}: ${int(f.non2xx)} non-2xx, ${int(f.errors)} socket errors`);
  return `Error statuses and socket errors, of ${requests} measured requests: ${list.join('; ')}.`;
}

async function main(): Promise<void> {
  const runtimes = readRuntimes();
  const [old, ours] = runtimes;
  const [startedAt, loadBefore] = [Date.now(), loadAverage()];
  log(
    `runtime benchmark: node ${old.version} against ${ours.version}, ${int(tasks)} tasks; ` +
      `${ROWS.length} rows × 2 runtimes, each warmed, then ${rounds} rounds × ${seconds} s`,
  );
  const root = await scratchDir('runtime');
  const stores = await startStores({ database: 'bench_runtime' });
  const seeded = await seedDatabase(stores.databaseUrl, tasks);
  const { targets, services } = await startTargets(runtimes, stores, root, seeded.writer.token);
  const reported = await Promise.all(runtimes.map((runtime) => reportedVersion(services.get(runtime)!)));
  const trees: Tree[] = runtimes.flatMap((runtime) => Object.values(targets.get(runtime)!.trees));
  const workersBefore = trees.map((tree) => childPids(tree.primary).join(' '));
  const { pairs, warmUpRuns } = await measure({ runtimes, targets, seconds, rounds });
  const restarted = trees.filter((tree, i) => childPids(tree.primary).join(' ') !== workersBefore[i]);
  const pair = (what: string) => [`${what}, ${old.line}>`, `${what}, ${ours.line}>`];
  const report = [
    '# Runtime benchmark (`npm run bench:runtime`)',
    '',
    `${stamp()}: node ${old.version} ` +
      `(the line before, node-linux-* from the npm registry) against node ${ours.version} (the project's); PostgreSQL ` +
      `${stores.postgresVersion} (fsync on), Redis ${await redisVersion(stores.admin)}, wrk ${wrkVersion()}; ` +
      `${cpus().length} CPUs shared by everything, load average ` +
      `${loadBefore} at the start and ${loadAverage()} at the end (${((Date.now() - startedAt) / 60_000).toFixed(1)} min).`,
    '',
    `The same dist/ on both runtimes. On each: its own service (\`node dist/src/main.js\`, 2 web workers, ROLE=web, ` +
      `throttling on with anon and user at 100000/s, never reached, LOG_LEVEL=info with an access line per request, ` +
      `read and dropped, CONNECTION_DOOR=cluster: node ${old.line} lacks the default door's reusePort; node ${old.line} ` +
      `with PACELINE_RUNTIME_CHECK=off), and its own bare node:http cluster and ` +
      `bare Koa app of 2 workers answering page 1's bytes from memory; one PostgreSQL, Redis and database for both. ` +
      `Every primary and worker ran its runtime's binary (/proc/<pid>/exe); the services reported ` +
      `${reported.join(' and ')} (nodejs_version_info).`,
    '',
    `N = ${int(tasks)} tasks. Each row warmed on each runtime with one-second wrk runs until its ` +
      `processes had used ${WARMUP_CPU_S} s of CPU (at most ${WARMUP_MAX_RUNS}; it took ${spread(warmUpRuns, 0)}, ` +
      `median ${median(warmUpRuns)}), then \`wrk -t${THREADS} -c${CONNECTIONS} ` +
      `-d${seconds}s --latency\` per row and runtime in ${rounds} round${rounds > 1 ? 's' : ''}: in a round each row ` +
      `runs on both runtimes back to back, the first alternating by round, the rows rotating. req/s, p99 and CPU are ` +
      `medians over the rounds; ${ours.line} ÷ ${old.line} is the median of the rounds' req/s ratios, the spread ` +
      `their lowest and highest. CPU µs/req: user + system time of the answering primary and workers (not ` +
      `PostgreSQL's or Redis's) over the requests wrk counted.`,
    '',
    markdownTable(
      [
        'row',
        'request',
        ...pair('req/s'),
        `${ours.line} ÷ ${old.line}>`,
        "rounds' spread>",
        ...pair('p99 ms'),
        ...pair('CPU µs/req'),
      ],
      ROWS.map((row) => rowCells(row.name, row.request, pairs.get(row)!)),
    ),
    '',
    describeFailures(pairs),
    restarted.length === 0
      ? 'No worker of any service or bare server exited during the measurement.'
      : `**Workers changed during the measurement** in ${restarted.map((tree) => tree.base).join(', ')}: ` +
        'a worker exited, and the rows it served measured its restarts.',
    describeStderr(runtimes, targets),
    '',
  ].join('\n');
  await writeResults(RESULTS, report);
}

await runBench('runtime', main);
