/**
 * `npm test [-- filter...]`: starts a throwaway PostgreSQL and Redis, runs every `*.test.ts`
 * under `test/` whose path contains one of the filters (all when none), each as its own
 * `node --import tsx <file>` process (uvu suites), tears the servers down whatever happens, and
 * ends with one line: `N passed, M failed`. Order: `*.unit.test.ts` (two at a time), then
 * `*.int.test.ts`, then the rest, then `test/cluster/**`.
 *
 * Each test file gets, besides the runner's environment minus DATABASE_URL and REDIS_URL:
 *   TEST_DATABASE_URL  superuser URL of the `postgres` database; create your own database from it
 *   TEST_REDIS_URL     the shared Redis, with its password (as `npm start`'s): use your own key prefix
 *   TEST_REDIS_PORT, TEST_REDIS_DIR  its port and data directory
 *   TEST_TMP_DIR       scratch space, deleted after the run
 *   NODE_ENV=test, FORCE_COLOR=0
 *
 * To make Redis fail and come back, start a private one rather than killing the shared one:
 *   const port = await findFreePort();                                  // src/stores/ports.ts
 *   const opts = { dataDir: join(TEST_TMP_DIR, 'redis-x'), port, persistent: true };
 *   let redis = await startRedis(opts);                                 // src/stores/redis.ts
 *   process.kill(redis.pid, 'SIGKILL');  ...  redis = await startRedis(opts);  ...  await redis.stop();
 * (Should a file kill the shared one anyway, the runner restarts it before the next file.)
 *
 * A file fails as a whole (counted as at least one failed test) when it exits non-zero, prints
 * no uvu summary, runs longer than TEST_FILE_TIMEOUT_MS (default 5 minutes) or is still running
 * 10 s after its summary (something left open). Its whole process group is then killed, as are
 * processes it leaves behind.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findFreePort } from '../src/stores/ports.js';
import { startEmbeddedPostgres } from '../src/stores/postgres.js';
import { startRedis } from '../src/stores/redis.js';
import type { RunningService } from '../src/stores/service.js';
import { isAlive } from '../src/stores/processes.js';

interface FileResult {
  passed: number;
  failed: number;
}

const EXIT_GRACE_MS = 10_000;
const fileTimeoutMs = readTimeout(process.env.TEST_FILE_TIMEOUT_MS);
const running = new Set<number>();
const services: RunningService[] = [];
let scratchRoot: string | undefined;
const totals: FileResult = { passed: 0, failed: 0 };
let interruptedBy: NodeJS.Signals | undefined;

function readTimeout(value: string | undefined): number {
  if (value === undefined || value === '') return 300_000;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms <= 0) {
    console.error(`TEST_FILE_TIMEOUT_MS must be a positive whole number of milliseconds, got "${value}"`);
    process.exit(2);
  }
  return ms;
}

async function findTestFiles(filters: string[]): Promise<string[]> {
  const entries = await readdir('test', { recursive: true });
  const rank = (file: string) =>
    file.startsWith('test/cluster/') ? 3 : file.endsWith('.unit.test.ts') ? 0 : file.endsWith('.int.test.ts') ? 1 : 2;
  return entries
    .map((entry) => join('test', entry))
    .filter((file) => file.endsWith('.test.ts'))
    .filter((file) => filters.length === 0 || filters.some((filter) => file.includes(filter)))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

async function startServices(): Promise<Record<string, string>> {
  const began = Date.now();
  scratchRoot = await mkdtemp(join(tmpdir(), 'paceline-test-'));
  // As root PostgreSQL runs as the postgres user, which must be able to enter this directory.
  await chmod(scratchRoot, 0o755);
  const scratch = join(scratchRoot, 'scratch');
  await mkdir(scratch, { mode: 0o755 });
  const redisOpts = {
    dataDir: join(scratchRoot, 'redis'),
    port: await findFreePort(),
    persistent: false,
    password: randomBytes(18).toString('base64url'),
  };
  const pgOpts = { dataDir: join(scratchRoot, 'pg'), port: await findFreePort(), persistent: false };
  const [postgres, redis] = await Promise.allSettled([
    startEmbeddedPostgres({ ...pgOpts, database: 'postgres' }),
    startRedis(redisOpts),
  ]);
  if (postgres.status === 'fulfilled') services.push(postgres.value);
  if (redis.status === 'fulfilled') keepRedisUp(redis.value, redisOpts);
  if (postgres.status === 'rejected') throw postgres.reason;
  if (redis.status === 'rejected') throw redis.reason;
  console.log(`# throwaway PostgreSQL and Redis ready in ${((Date.now() - began) / 1000).toFixed(1)} s`);

  const env: Record<string, string | undefined> = { ...process.env };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  return {
    ...(env as Record<string, string>),
    TEST_DATABASE_URL: postgres.value.url,
    TEST_REDIS_URL: redis.value.url,
    TEST_REDIS_PORT: String(redisOpts.port),
    TEST_REDIS_DIR: redisOpts.dataDir,
    TEST_TMP_DIR: scratch,
    NODE_ENV: 'test',
    FORCE_COLOR: '0',
  };
}

let restartRedis: () => Promise<void> = async () => {};

/** Registers the shared Redis for teardown and arms restartRedis() for when a file killed it. */
function keepRedisUp(redis: RunningService & { pid: number }, opts: Parameters<typeof startRedis>[0]): void {
  let current = redis;
  services.push({ url: redis.url, stop: () => current.stop() });
  restartRedis = async () => {
    if (isAlive(current.pid)) return;
    console.log(`# the shared Redis died during that file: restarting it on port ${opts.port}`);
    current = await startRedis(opts);
  };
}

/**
 * Kills what remains of a finished file's process group. Helpers such as esbuild's service
 * exit on their own a moment after the file does, so only what outlives a short wait counts.
 */
async function sweepGroup(pid: number): Promise<boolean> {
  for (let waited = 0; waited < 3_000; waited += 50) {
    if (!isAlive(-pid)) return false;
    await sleep(50);
  }
  return killGroup(pid);
}

function killGroup(pid: number): boolean {
  try {
    process.kill(-pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

interface FileRun {
  output: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  problem?: string;
}

async function runFile(file: string, env: Record<string, string>, live: boolean): Promise<FileResult> {
  const started = Date.now();
  if (live) console.log(`\n# ${file}`);
  const run = await execute(file, env, live ? (text) => process.stdout.write(text) : () => {});
  if (!live) process.stdout.write(`\n# ${file}\n${run.output}`);
  if (run.output !== '' && !run.output.endsWith('\n')) process.stdout.write('\n');

  const summary = parseSummary(run.output);
  const failure =
    run.problem ??
    (run.code !== 0 ? `exit ${run.signal ?? `code ${run.code}`}` : summary ? undefined : 'no uvu summary');
  const result = { passed: summary?.passed ?? 0, failed: summary?.failed ?? 0 };
  if (failure !== undefined) result.failed = Math.max(result.failed, 1);
  const verdict = result.failed === 0 ? 'ok' : `FAILED${failure === undefined ? '' : ` (${failure})`}`;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`# ${verdict}: ${result.passed} passed, ${result.failed} failed in ${seconds} s`);
  return result;
}

/** Runs one file in its own process group, enforcing the timeouts; `show` receives its output. */
async function execute(file: string, env: Record<string, string>, show: (text: string) => void): Promise<FileRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    env,
    detached: true, // its own process group, so a timeout or Ctrl-C can kill everything it started
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pid = child.pid ?? 0;
  running.add(pid);
  const run: FileRun = { output: '', code: null, signal: null };
  const fail = (problem: string) => {
    run.problem = problem;
    killGroup(pid);
  };
  const timeout = setTimeout(() => fail(`timed out after ${fileTimeoutMs} ms`), fileTimeoutMs);
  let grace: NodeJS.Timeout | undefined;
  const onData = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    run.output += text;
    show(text);
    // Restarted by any later output, in case uvu runs again.
    if (grace !== undefined || parseSummary(run.output.slice(-(text.length + 200))) !== undefined) {
      clearTimeout(grace);
      grace = setTimeout(() => fail(`still running ${EXIT_GRACE_MS / 1000} s after its summary`), EXIT_GRACE_MS);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  [run.code, run.signal] = await new Promise((resolve) => child.once('exit', (...exit) => resolve(exit)));
  clearTimeout(timeout);
  clearTimeout(grace);
  await Promise.race([new Promise((resolve) => child.once('close', resolve)), sleep(1_000)]);
  if (await sweepGroup(pid)) {
    const line = `${run.output.endsWith('\n') ? '' : '\n'}# it left processes running (a server not stopped?): killed them\n`;
    run.output += line;
    show(line);
  }
  running.delete(pid);
  return run;
}

/** The last uvu summary in the output: `Total: n` then `Passed: n` (skipped tests are not in Total). */
function parseSummary(output: string): FileResult | undefined {
  const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
  const matches = [...plain.matchAll(/Total:\s+(\d+)\s*\n\s*Passed:\s+(\d+)/g)];
  const last = matches.at(-1);
  if (last === undefined) return undefined;
  const [total, passed] = [Number(last[1]), Number(last[2])];
  return { passed, failed: total - passed };
}

function record(result: FileResult): void {
  totals.passed += result.passed;
  totals.failed += result.failed;
}

async function runAll(files: string[], env: Record<string, string>): Promise<void> {
  const unitFiles = files.filter((file) => file.endsWith('.unit.test.ts') && !file.startsWith('test/cluster/'));
  const queue = [...unitFiles];
  const worker = async () => {
    for (let file = queue.shift(); file !== undefined && !interruptedBy; file = queue.shift()) {
      record(await runFile(file, env, false));
    }
  };
  await Promise.all([worker(), worker()]);
  for (const file of files.slice(unitFiles.length)) {
    if (interruptedBy) return;
    record(await runFile(file, env, true));
    if (!interruptedBy) await restartRedis();
  }
}

async function tearDown(): Promise<void> {
  for (const pid of running) killGroup(pid);
  await Promise.allSettled(services.map((service) => service.stop()));
  if (scratchRoot !== undefined) await rm(scratchRoot, { recursive: true, force: true });
}

function finish(code: number): never {
  console.log(`${totals.passed} passed, ${totals.failed} failed`);
  process.exit(code);
}

async function main(): Promise<void> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.log(`\n# ${signal}: stopping`);
      interruptedBy = signal;
      for (const pid of running) killGroup(pid);
    });
  }
  const files = await findTestFiles(process.argv.slice(2));
  if (files.length === 0) {
    console.log(`no test files match: ${process.argv.slice(2).join(' ') || '(all)'}`);
    finish(1);
  }
  try {
    await runAll(files, await startServices());
  } catch (error) {
    totals.failed = Math.max(totals.failed, 1);
    console.error(`test run aborted: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await tearDown();
  }
  if (interruptedBy) finish(interruptedBy === 'SIGINT' ? 130 : 143);
  finish(totals.failed === 0 && totals.passed > 0 ? 0 : 1);
}

await main();
