/**
 * `npm test [-- filter...]` and `npm run test:unit`: runs every `*.test.ts` under `test/` whose
 * path contains one of the filters (all when none), each as its own `node --import tsx <file>`
 * process (uvu suites), and ends with the ten slowest files and one line: `N passed, M failed`.
 * `--unit` keeps only the pure `*.unit.test.ts` files: no store is started, no tool installed.
 *
 * Tools: redis-server is installed (ops/ensure-tools.sh) whenever a chosen file needs the stores;
 * a file that runs another tool says so among its first lines: `// Needs: prometheus, haproxy`
 * (known: prometheus, haproxy, chromium). Nothing else is installed.
 *
 * Order and concurrency: the unit files run two at a time while the tools install and the
 * stores start; then the other files run side by side, longest first (by the last run's times
 * in .data/test-times.json, else test/runner/times.json), within TEST_JOBS slots (default 4): an
 * int file takes one slot, a cluster file (test/cluster/: real processes, timing-sensitive) takes
 * TEST_CLUSTER_SLOTS (default 2): at most two cluster files, or one and two int files, at once. A
 * file whose assertions count seconds of wall time says `// Slots: all` among its first lines to
 * run alone.
 * TEST_JOBS=1 runs one file at a time with its output live.
 *
 * Each file that uses the stores gets, besides the runner's environment minus DATABASE_URL and
 * REDIS_URL (unit files get only the last three):
 *   TEST_DATABASE_URL  superuser URL of the `postgres` database; create your own database from it
 *   TEST_REDIS_URL     the shared Redis, with its password (as `npm start`'s): use your own key prefix
 *   TEST_REDIS_PORT, TEST_REDIS_DIR  its port and data directory
 *   TEST_TMP_DIR       scratch space, deleted after the run
 *   NODE_ENV=test, FORCE_COLOR=0
 * Files run side by side, so a file never flushes, reconfigures or stops the shared stores. To
 * make Redis fail and come back, start a private one rather than killing the shared one:
 *   const port = await findFreePort();                                  // src/stores/ports.ts
 *   const opts = { dataDir: join(TEST_TMP_DIR, 'redis-x'), port, persistent: true };
 *   let redis = await startRedis(opts);                                 // src/stores/redis.ts
 *   process.kill(redis.pid, 'SIGKILL');  ...  redis = await startRedis(opts);  ...  await redis.stop();
 * (Should a file kill the shared one anyway, the runner restarts it once that file ends.)
 *
 * A file fails as a whole (counted as at least one failed test) when it exits non-zero, prints
 * no uvu summary, runs longer than TEST_FILE_TIMEOUT_MS (default 5 minutes) or is still running
 * 10 s after its summary (something left open). Its whole process group is then killed, as are
 * processes it leaves behind.
 */
import { runFile, running, killGroup, type FileResult } from './runner/execute.js';
import { findTestFiles, type TestFile, type Tool } from './runner/files.js';
import { longestFirst, readTimes, runPool, writeTimes } from './runner/schedule.js';
import { makeScratch, startStores, type TestStores } from './runner/stores.js';
import { ensureTools } from './runner/tools.js';

const fileTimeoutMs = readCount('TEST_FILE_TIMEOUT_MS', 300_000);
const jobs = readCount('TEST_JOBS', 4);
const clusterSlots = readCount('TEST_CLUSTER_SLOTS', 2);
const totals = { passed: 0, failed: 0 };
const durations: Record<string, number> = {};
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
  const result = await runFile(file.path, env, live, fileTimeoutMs);
  totals.passed += result.passed;
  totals.failed += result.failed;
  durations[file.path] = result.seconds;
  return result;
}

async function runAll(files: TestFile[], scratch: { root: string; scratch: string }): Promise<void> {
  const base: Record<string, string | undefined> = { ...process.env, NODE_ENV: 'test', FORCE_COLOR: '0' };
  base.TEST_TMP_DIR = scratch.scratch;
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
  ready.catch(() => {}); // awaited below, after the unit files
  const stop = () => interruptedBy !== undefined;
  const unitEnv = base as Record<string, string>;
  const liveUnits = units.length === 1 || jobs === 1;
  await runPool(
    units,
    Math.min(2, jobs),
    () => 1,
    (file) => runOne(file, unitEnv, liveUnits),
    stop,
  );
  const started = await ready;
  if (started !== undefined && !stop()) await runOthers(others, started, stop);
  if (!stop()) await writeTimes({ ...times, ...durations });
}

async function runOthers(others: TestFile[], started: TestStores, stop: () => boolean): Promise<void> {
  const live = others.length === 1 || jobs === 1;
  const cost = (file: TestFile) => file.slots ?? (file.kind === 'cluster' ? clusterSlots : 1);
  await runPool(
    others,
    jobs,
    cost,
    async (file) => {
      await runOne(file, { ...started.env, NODE_ENV: 'test', FORCE_COLOR: '0' }, live);
      if (!stop()) await started.reviveRedis();
    },
    stop,
  );
}

function printSlowest(): void {
  const slowest = Object.entries(durations)
    .sort(([, a], [, b]) => b - a)
    .slice(0, 10);
  if (slowest.length < 2) return;
  console.log('\n# slowest files:');
  for (const [file, seconds] of slowest) console.log(`#   ${seconds.toFixed(1).padStart(6)} s  ${file}`);
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
