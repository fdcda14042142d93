/**
 * `npm test [-- filter...]` and `npm run test:unit`: runs every `*.test.ts` under `test/` whose
 * path contains one of the filters (all when none), each as its own node process (uvu suites),
 * and ends with the ten slowest files and one line: `N passed, M failed`. The files and what they
 * import are first transpiled into the run's scratch folder (test/runner/compile.ts), so each
 * process runs plain JavaScript rather than paying tsx's loader.
 * `--unit` keeps only the pure `*.unit.test.ts` files: no store is started, no tool installed.
 *
 * Tools: redis-server is installed (ops/ensure-tools.sh) whenever a chosen file needs the stores;
 * a file that runs another tool says so among its first lines: `// Needs: prometheus, haproxy`
 * (known: prometheus, haproxy, chromium, ss). Nothing else is installed.
 *
 * Order and concurrency: the unit files run two at a time while the tools install and the
 * stores start; then the other files, with the unit files not started yet (short and light, they
 * come last and fill the cores the long files leave idle), run side by side, longest first (by
 * wall seconds, or CPU seconds when more), packed by the CPU they use: a file's load is its CPU
 * seconds over its wall seconds (by .data/test-times.json, which each run updates, else the
 * committed test/runner/times.json; a file in neither is guessed by its kind), and files start in
 * that order while their loads add up to less than one and a half times TEST_CPUS (default: the
 * machine's cores; the next file starts when some is left, so a busy file is not passed over by
 * lighter ones until it runs alone at the end), at most TEST_JOBS (default 6) at once. A file whose
 * assertions count fractions of a second of wall time says how much CPU to keep for it, `// Load:
 * 1.5` among its first lines (it starts once that much of TEST_CPUS is free, and while it runs the
 * others fill TEST_CPUS only), or `// Load: all` to run alone (such files start first, while
 * nothing else runs).
 * TEST_JOBS=1 runs one file at a time with its output live.
 *
 * Each file that uses the stores gets, besides the runner's environment minus DATABASE_URL and
 * REDIS_URL (unit files get only the last three):
 *   TEST_DATABASE_URL  superuser URL of the `postgres` database: createTestDatabase (test/helpers/database.ts)
 *                      makes a file's own database from it, owned by the service role, and returns that role's URL
 *   TEST_SERVICE_DATABASE_URL  the service role's URL (the role `npm start` connects as)
 *   TEST_TEMPLATE_DATABASE  the migrated database a file's own is copied from
 *   TEST_REDIS_URL     the shared Redis, with its password (as `npm start`'s): use your own key prefix
 *   TEST_REDIS_PORT, TEST_REDIS_DIR  its port and data directory
 *   TEST_TMP_DIR       scratch space, deleted after the run
 *   NODE_ENV=test, FORCE_COLOR=0, NODE_COMPILE_CACHE (a folder of the run's: V8's code kept between starts)
 * Files run side by side, so a file never flushes, reconfigures or stops the shared stores. To
 * make Redis fail and come back, start a private one rather than killing the shared one:
 *   const port = await findFreePort();                                  // src/embedded/ports.ts
 *   const opts = { dataDir: join(TEST_TMP_DIR, 'redis-x'), port, persistent: true, password };
 *   let redis = await startRedis(opts);                                 // src/embedded/redis.ts
 *   process.kill(redis.pid, 'SIGKILL');  ...  redis = await startRedis(opts);  ...  await redis.stop();
 * (Should a file kill the shared one anyway, the runner restarts it once that file ends.)
 * A script a test starts runs compiled too: `spawn(process.execPath, scriptArgs('x.ts'))`
 * (test/helpers/node-script.ts); TEST_COMPILED_DIR is where the compiled copy lives.
 *
 * A file fails as a whole (counted as at least one failed test) when it exits non-zero, prints
 * no uvu summary, runs longer than TEST_FILE_TIMEOUT_MS (default 5 minutes) or is still running
 * 10 s after its summary (something left open). Its whole process group is then killed, as are
 * processes it leaves behind.
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { compiledScript } from './helpers/node-script.js';
import { compileTests } from './runner/compile.js';
import { runFile, running, killGroup, type FileResult } from './runner/execute.js';
import { findTestFiles, type TestFile, type Tool } from './runner/files.js';
import { foldTimes, loadOf, longestFirst, readTimes, runPool, writeTimes, type Times } from './runner/schedule.js';
import { makeScratch, startStores, type TestStores } from './runner/stores.js';
import { ensureTools } from './runner/tools.js';

const fileTimeoutMs = readCount('TEST_FILE_TIMEOUT_MS', 300_000);
const jobs = readCount('TEST_JOBS', 6);
const cpus = readCount('TEST_CPUS', availableParallelism());
/**
 * What the loads of files without a `// Load:` header may add up to: half as much again as the cores. A file's load is
 * its average, and the files wait on timers, stores and the network for part of their time; packed to the cores alone,
 * a run on 2 cores left a tenth of the CPU idle (docs/testing.md "How the tests run").
 */
const capacity = cpus * 1.5;
const totals = { passed: 0, failed: 0 };
const durations: Times = {};
let interruptedBy: NodeJS.Signals | undefined;
let stores: TestStores | undefined;

function readCount(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === '') return fallback;
  const count = Number(value);
  if (!Number.isInteger(count) || count <= 0) {
    console.error(`${name} must be a positive whole number, got "${value}"`);
    process.exit(2);
  }
  return count;
}

async function runOne(file: TestFile, env: Record<string, string>, live: boolean): Promise<FileResult> {
  const result = await runFile(file.path, compiledScript(env.TEST_COMPILED_DIR!, file.path), env, live, fileTimeoutMs);
  totals.passed += result.passed;
  totals.failed += result.failed;
  durations[file.path] = { seconds: result.seconds, cpu: result.cpu };
  return result;
}

async function runAll(files: TestFile[], scratch: { root: string; scratch: string }): Promise<void> {
  const compiled = join(scratch.root, 'js');
  await compileTests(compiled);
  // Every node process a file starts (clusters, CLI runs) keeps V8's compiled code for the next one: about a
  // seventh less CPU per start of the service's code.
  const extras = {
    NODE_ENV: 'test',
    FORCE_COLOR: '0',
    TEST_COMPILED_DIR: compiled,
    NODE_COMPILE_CACHE: join(scratch.root, 'compile-cache'),
  };
  const base: Record<string, string | undefined> = { ...process.env, ...extras, TEST_TMP_DIR: scratch.scratch };
  delete base.DATABASE_URL;
  delete base.REDIS_URL;
  const times = await readTimes();
  const units = files.filter((file) => file.kind === 'unit');
  const others = longestFirst(
    files.filter((file) => file.kind !== 'unit'),
    times,
  );
  const tools = [...new Set(others.flatMap((file) => file.needs))] as Tool[];
  // Stores and tools get ready while the unit files, which need neither, run.
  const ready =
    others.length === 0
      ? Promise.resolve(undefined)
      : ensureTools(tools, true).then(async () => (stores = await startStores(scratch.root, scratch.scratch)));
  ready.catch(() => {}); // awaited below
  let storesSettled = false;
  void ready.finally(() => (storesSettled = true)).catch(() => {});
  const stop = () => interruptedBy !== undefined;
  const unitEnv = base as Record<string, string>;
  const liveUnits = units.length === 1 || jobs === 1;
  // The unit files start at once, two at a time, longest first; once the stores are up, those not started yet join
  // the other files' pool, where they come last (short and light, they fill the cores the long files leave idle at
  // the end) rather than holding back the long files' start.
  const unitsStarted = new Set<TestFile>();
  const unitRun = runPool(
    longestFirst(units, times),
    { jobs: Math.min(2, jobs), capacity: Infinity },
    () => 0,
    (file) => {
      unitsStarted.add(file);
      return runOne(file, unitEnv, liveUnits);
    },
    () => stop() || (others.length > 0 && storesSettled),
  );
  const started = await ready;
  await unitRun; // those running end first: a `Load: all` file starts while no other file runs
  const rest = units.filter((file) => !unitsStarted.has(file));
  if (started !== undefined && !stop())
    await runOthers(
      longestFirst([...others, ...rest], times),
      started,
      { env: { ...started.env, ...extras }, unitEnv, times },
      stop,
    );
  if (!stop()) await writeTimes(foldTimes(times, durations));
}

async function runOthers(
  files: TestFile[],
  started: TestStores,
  { env, unitEnv, times }: { env: Record<string, string>; unitEnv: Record<string, string>; times: Times },
  stop: () => boolean,
): Promise<void> {
  const live = files.length === 1 || jobs === 1;
  await runPool(
    files,
    { jobs, capacity, cores: cpus },
    (file) => loadOf(file, times),
    async (file) => {
      if (file.kind === 'unit') return void (await runOne(file, unitEnv, live));
      await runOne(file, env, live);
      if (!stop()) await started.reviveRedis();
    },
    stop,
  );
}

function printSlowest(): void {
  const slowest = Object.entries(durations)
    .sort(([, a], [, b]) => b.seconds - a.seconds)
    .slice(0, 10);
  if (slowest.length < 2) return;
  console.log('\n# slowest files (wall, CPU):');
  for (const [file, { seconds, cpu }] of slowest) {
    console.log(
      `#   ${seconds.toFixed(1).padStart(6)} s ${cpu === undefined ? '' : `${cpu.toFixed(1).padStart(6)} s`}  ${file}`,
    );
  }
}

function finish(code: number, began: number): never {
  printSlowest();
  const minutes = (Date.now() - began) / 60_000;
  console.log(`${totals.passed} passed, ${totals.failed} failed in ${minutes.toFixed(1)} min`);
  process.exit(code);
}

async function main(): Promise<void> {
  const began = Date.now();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.log(`\n# ${signal}: stopping`);
      interruptedBy = signal;
      for (const pid of running) killGroup(pid);
    });
  }
  const args = process.argv.slice(2);
  const unitOnly = args.includes('--unit');
  const filters = args.filter((arg) => arg !== '--unit');
  const files = (await findTestFiles(filters)).filter((file) => !unitOnly || file.kind === 'unit');
  if (files.length === 0) {
    console.log(`no test files match: ${filters.join(' ') || '(all)'}${unitOnly ? ' (unit only)' : ''}`);
    finish(1, began);
  }
  const scratch = await makeScratch();
  try {
    await runAll(files, scratch);
  } catch (error) {
    totals.failed = Math.max(totals.failed, 1);
    console.error(`test run aborted: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    for (const pid of running) killGroup(pid);
    await stores?.stop();
    await scratch.remove();
  }
  if (interruptedBy) finish(interruptedBy === 'SIGINT' ? 130 : 143, began);
  finish(totals.failed === 0 && totals.passed > 0 ? 0 : 1, began);
}

await main();
