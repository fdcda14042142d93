/**
 * `npm run bench:runtime`: the same compiled dist/ on Node.js 20, the line before the project's (ops/bench/runtime.sh
 * keeps the newest 20.x from the npm registry in .data/bench-runtimes/ and passes its binary as the first argument),
 * and on the project's 24 (this process's node), in one run. One throwaway PostgreSQL and Redis and one seeded
 * database (BENCH_TASKS, default 20,000); on each runtime the service with the settings of read-path's page-1 row, a
 * bare node:http and a bare Koa cluster; each row warmed on each runtime, then run under
 * `wrk -t2 -c32 -d<BENCH_SECONDS>s --latency` (default 5) on both runtimes back to back, in BENCH_ROUNDS interleaved
 * rounds (default 3). Prints the table, also written to ops/bench/results/runtime.md
 * (docs/benchmarks.md "Runtime (`npm run bench:runtime`)").
 *
 *   npm run bench:runtime                                    # defaults: 8-10 minutes on a loaded 2-core host
 *   BENCH_SECONDS=2 BENCH_ROUNDS=1 npm run bench:runtime     # a quick smoke run
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { connectDatabase } from '../../db/connect.js';
import { describeCommit, wrkVersion } from './machine.js';
import { childPids, startStores, type Stores } from './read-path/processes.js';
import { POST_SCRIPT } from './read-path/rows.js';
import { seedTasks } from './read-path/seed.js';
import { CONNECTIONS, THREADS } from './read-path/wrk.js';
import { measure, WARMUP_CPU_S, WARMUP_MAX_RUNS } from './runtime/measure.js';
import {
  describeRuntime,
  executableOf,
  reportedVersion,
  startBareOn,
  startServiceOn,
  type Runtime,
  type Tree,
} from './runtime/processes.js';
import { describeFailures, markdownTable, median, summarise } from './runtime/report.js';
import { checkRow, ROWS, type Targets } from './runtime/rows.js';
import { readBenchCount } from './settings.js';

const RESULTS = 'ops/bench/results/runtime.md';
const SECRET = 'runtime-bench-cursor-secret-0123456789';

const tasks = readBenchCount('BENCH_TASKS', 20_000, 1_000);
const seconds = readBenchCount('BENCH_SECONDS', 5, 1);
const rounds = readBenchCount('BENCH_ROUNDS', 3, 1);

const running: { stores?: Stores; trees: Tree[]; pids: Set<number>; root?: string } = { trees: [], pids: new Set() };

let stopping: Promise<void> | undefined;

/** Stops everything the run started, once however often it is called, and says whether any of it outlived that. */
function cleanUp(): Promise<void> {
  return (stopping ??= stopAll());
}

async function stopAll(): Promise<void> {
  for (const tree of running.trees) for (const pid of [tree.primary, ...childPids(tree.primary)]) running.pids.add(pid);
  await Promise.allSettled(running.trees.map((tree) => tree.stop()));
  await running.stores?.stop().catch(() => {});
  if (running.root) await rm(running.root, { recursive: true, force: true });
  const left = [...running.pids].filter((pid) => executableOf(pid) !== undefined);
  if (left.length > 0) process.stderr.write(`still running after the stop: ${left.join(', ')}\n`);
}

/** The Node.js runtimes to compare: the one named on the command line, then this process's. */
function readRuntimes(): [Runtime, Runtime] {
  const binary = process.argv[2];
  if (!binary) {
    process.stderr.write('usage: node --import tsx ops/bench/runtime.ts <the node binary to compare with>\n');
    process.exit(2);
  }
  const [old, ours] = [describeRuntime(binary), describeRuntime(process.execPath)];
  if (old.line === ours.line) throw new Error(`${old.version} and ${ours.version} are one line: nothing to compare`);
  return [old, ours];
}

/**
 * `<runtime> dist/src/main.js` with the settings of read-path's page-1 row, on its own Redis prefix, and node:cluster's
 * round robin on both runtimes: the default door (CONNECTION_DOOR=reuseport) asks listen() for `reusePort`, which
 * Node.js 20 does not have (22.12 and 23.1 brought it), so there a second web worker's listen fails with EADDRINUSE and
 * the worker is restarted over and over.
 */
async function startService(runtime: Runtime, stores: Stores): Promise<Tree> {
  const service = await startServiceOn(runtime, {
    DATABASE_URL: stores.databaseUrl,
    REDIS_URL: stores.redisUrl,
    CURSOR_SECRET: SECRET,
    REDIS_PREFIX: `bench:runtime:${runtime.line}:`,
    THROTTLE_ANON: '100000/s',
    THROTTLE_USER: '100000/s',
    CONNECTION_DOOR: 'cluster',
  });
  running.trees.push(service);
  return service;
}

/** The bare node:http or bare Koa cluster on `runtime`, answering page 1's bytes. */
async function startBare(runtime: Runtime, page1: { file: string; type: string }, framework: 'node' | 'koa') {
  const bare = await startBareOn(runtime, page1.file, page1.type, framework);
  running.trees.push(bare);
  return bare;
}

/** Both services, then both runtimes' bare servers answering the bytes of page 1 as our runtime's service sends it. */
async function startTargets(runtimes: Runtime[], stores: Stores, root: string, writerToken: string) {
  const services = new Map<Runtime, Tree>();
  for (const runtime of runtimes) services.set(runtime, await startService(runtime, stores));
  const response = await fetch(`${services.get(runtimes.at(-1)!)!.base}/api/tasks/`);
  const page1 = { file: join(root, 'page-1.json'), type: response.headers.get('content-type') ?? 'application/json' };
  await writeFile(page1.file, Buffer.from(await response.arrayBuffer()));
  const postScript = join(root, 'post.lua');
  await writeFile(postScript, POST_SCRIPT);
  const targets = new Map<Runtime, Targets>();
  for (const runtime of runtimes) {
    const trees = {
      service: services.get(runtime)!,
      bare: await startBare(runtime, page1, 'node'),
      bareKoa: await startBare(runtime, page1, 'koa'),
    };
    targets.set(runtime, { trees, writerToken, postScript });
  }
  for (const runtime of runtimes) for (const row of ROWS) await checkRow(row, targets.get(runtime)!);
  return targets;
}

/** What each runtime's processes wrote to stderr, where Node.js prints its warnings (the logs go to stdout). */
function describeStderr(runtimes: Runtime[], targets: Map<Runtime, Targets>): string {
  const parts = runtimes.map((runtime) => {
    const text = Object.values(targets.get(runtime)!.trees).map((tree) => tree.output());
    const lines = [
      ...new Set(
        text
          .join('\n')
          .split('\n')
          .filter((line) => line.trim() !== ''),
      ),
    ];
    if (lines.length > 0)
      process.stderr.write(`node ${runtime.line}'s processes wrote to stderr:\n${lines.join('\n')}\n`);
    const shown = lines.map((line) => `\`${line.slice(0, 160)}\``).join(', ');
    return `node ${runtime.line}: ${lines.length === 0 ? 'nothing' : shown}`;
  });
  return `Written to stderr by the services and bare servers, where Node.js prints its warnings: ${parts.join('; ')}.`;
}

async function main(): Promise<void> {
  const runtimes = readRuntimes();
  const [old, ours] = runtimes;
  const startedAt = Date.now();
  const loadBefore = loadavg();
  process.stderr.write(
    `runtime benchmark: node ${old.version} against ${ours.version}, ${tasks.toLocaleString('en-US')} tasks; ` +
      `${ROWS.length} rows × 2 runtimes, each warmed, then ${rounds} rounds × ${seconds} s\n`,
  );
  const root = (running.root = await mkdtemp(join(tmpdir(), 'paceline-runtime-')));
  await chmod(root, 0o755); // as root, PostgreSQL runs as the postgres user
  const stores = (running.stores = await startStores(root));
  const db = connectDatabase(stores.databaseUrl, 2);
  const seeded = await seedTasks(db, tasks).finally(() => db.destroy());
  const targets = await startTargets(runtimes, stores, root, seeded.writer.token);
  const reported = await Promise.all(runtimes.map((runtime) => reportedVersion(targets.get(runtime)!.trees.service)));

  const workersBefore = running.trees.map((tree) => childPids(tree.primary).join(' '));
  const { pairs, warmUpRuns } = await measure({ runtimes, targets, seconds, rounds });
  const restarted = running.trees.filter((tree, i) => childPids(tree.primary).join(' ') !== workersBefore[i]);
  const summaries = ROWS.map((row) => summarise(row, pairs.get(row)!));
  const redis = new Redis(stores.redisUrl);
  const redisVersion = /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1];
  redis.disconnect();
  const loads = (values: number[]) => values.map((l) => l.toFixed(1)).join(' ');
  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  const report = [
    '# Runtime benchmark (`npm run bench:runtime`)',
    '',
    `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${describeCommit()}: node ${old.version} ` +
      `(the line before, node-linux-* from the npm registry) against node ${ours.version} (the project's); PostgreSQL ` +
      `${stores.postgresVersion} (fsync on), Redis ${redisVersion}, wrk ${wrkVersion()}; ${cpus().length} CPUs shared ` +
      `by everything, load average ${loads(loadBefore)} at the start and ${loads(loadavg())} at the end ` +
      `(${minutes} min).`,
    '',
    `The same dist/ on both runtimes. On each: its own service (\`node dist/src/main.js\`, 2 web workers, ROLE=web, ` +
      `throttling on with anon and user at 100000/s, never reached, LOG_LEVEL=info with an access line per request, ` +
      `read and dropped, CONNECTION_DOOR=cluster: node ${old.line} lacks the default door's reusePort; node ${old.line} ` +
      `with PACELINE_RUNTIME_CHECK=off), and its own bare node:http cluster and ` +
      `bare Koa app of 2 workers answering page 1's bytes from memory; one PostgreSQL, Redis and database for both. ` +
      `Every primary and worker ran its runtime's binary (/proc/<pid>/exe); the services reported ` +
      `${reported.join(' and ')} (nodejs_version_info).`,
    '',
    `N = ${tasks.toLocaleString('en-US')} tasks. Each row warmed on each runtime with one-second wrk runs until its ` +
      `processes had used ${WARMUP_CPU_S} s of CPU (at most ${WARMUP_MAX_RUNS}; it took ${Math.min(...warmUpRuns)}–` +
      `${Math.max(...warmUpRuns)}, median ${median(warmUpRuns)}), then \`wrk -t${THREADS} -c${CONNECTIONS} ` +
      `-d${seconds}s --latency\` per row and runtime in ${rounds} round${rounds > 1 ? 's' : ''}: in a round each row ` +
      `runs on both runtimes back to back, the first alternating by round, the rows rotating. req/s, p99 and CPU are ` +
      `medians over the rounds; ${ours.line} ÷ ${old.line} is the median of the rounds' req/s ratios, the spread ` +
      `their lowest and highest. CPU µs/req: user + system time of the answering primary and workers (not ` +
      `PostgreSQL's or Redis's) over the requests wrk counted.`,
    '',
    markdownTable(summaries, old.line, ours.line),
    '',
    describeFailures(summaries),
    restarted.length === 0
      ? 'No worker of any service or bare server exited during the measurement.'
      : `**Workers changed during the measurement** in ${restarted.map((tree) => tree.base).join(', ')}: ` +
        'a worker exited, and the rows it served measured its restarts.',
    describeStderr(runtimes, targets),
    '',
  ].join('\n');
  process.stdout.write(`\n${report}`);
  await mkdir('ops/bench/results', { recursive: true });
  await writeFile(RESULTS, report);
  process.stderr.write(`written to ${RESULTS}\n`);
}

// Ctrl-C reaches this process twice, from the terminal and forwarded by npm: the second must not end it mid-stop.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping === undefined) process.stderr.write(`\n${signal}: stopping what the benchmark started\n`);
    void cleanUp().finally(() => process.exit(130));
  });
}
try {
  await main();
} catch (error) {
  // Once a signal stops the run, what fails after (wrk losing its server) is the stop, not a failure to report.
  if (stopping === undefined)
    process.stderr.write(
      `runtime benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
  process.exitCode = 1;
} finally {
  await cleanUp();
}
