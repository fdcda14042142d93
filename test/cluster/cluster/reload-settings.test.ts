import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { scrape, sumOf } from '../../helpers/metrics.js';
import { runCli, type CliRun } from '../../helpers/cli.js';

// A reload (SIGHUP to the primary) reads ENV_FILE again and checks it like a start: new web
// workers take its settings with no failed request; a bad value, or a change only a restart can
// make, is refused in one line and the workers keep what they had. `npm run cli -- reload` waits
// for how it ended and says it (docs/operations.md "Processes and signals").

const test = suite('a reload re-reads ENV_FILE');
const envFile = join(process.env.TEST_TMP_DIR ?? '/tmp', 'reload-settings.env');
let host: RunningCluster | undefined;
let dropDatabase: () => Promise<void> = async () => {};
let dataDir = '';

async function anonRate(): Promise<string | undefined> {
  const limits = (await (await fetch(`${host!.base}/api/rate-limits/`)).json()) as Array<{
    scope: string;
    rate: string;
  }>;
  return limits.find((limit) => limit.scope === 'anon')?.rate;
}

/**
 * `cli reload --pid PID` against the primary (which records no instance under DATA_DIR: both store
 * URLs are given); what it printed, and the primary's log from then until it says `expect`.
 */
async function cliReload(expect: string): Promise<{ run: CliRun; log: string }> {
  const since = host!.output().length;
  const run = await runCli({ DATA_DIR: dataDir }, ['reload', '--pid', String(host!.child.pid)]);
  return { run, log: await logged(expect, since) };
}

/** Waits for the primary to log `expect` after `since`. */
async function logged(expect: string, since: number): Promise<string> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const output = host!.output().slice(since);
    if (output.includes(expect)) return output;
    await sleep(100);
  }
  throw new Error(`no "${expect}" after SIGHUP:\n${host!.output().slice(since)}`);
}

/** Reads as cli reload says a reload was refused: one line on stderr, nothing on stdout, exit 1. */
function assertRefused(run: CliRun, reason: RegExp): void {
  assert.equal([run.code, run.stdout], [1, ''], run.stderr);
  assert.match(run.stderr, /^paceline: reload refused, the workers keep their settings: /);
  assert.match(run.stderr, reason);
}

test.before(async () => {
  const database = await createTestDatabase('reload-settings');
  dropDatabase = database.drop;
  await writeFile(envFile, 'THROTTLE_ANON=30/min\nPAGE_SIZE=3\n');
  dataDir = await mkdtemp(join(process.env.TEST_TMP_DIR ?? '/tmp', 'reload-settings-'));
  host = await startCluster(
    {
      ...testStoresEnv('reload-settings', database.url),
      ENV_FILE: envFile,
      DATA_DIR: dataDir,
      WEB_CONCURRENCY: '2',
      LOG_LEVEL: 'info',
    },
    120_000,
  );
});

test.after(async () => {
  await host?.stop();
  await dropDatabase();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

test('the settings of ENV_FILE apply at start', async () => {
  assert.is(await anonRate(), '30/min');
});

test('a reload applies a changed rate to the new workers; cli reload returns once they serve it, saying what changed', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=45/min\nPAGE_SIZE=3\n');
  const { run } = await cliReload('web workers replaced');
  assert.is(run.code, 0, run.stderr);
  const [reloading, applied, ...rest] = run.stdout.split('\n');
  assert.match(
    reloading!,
    /^reloading: THROTTLE_ANON=45\/min \(was 30\/min\); replacing 2 web worker\(s\) one at a time \(waiting up to \d+ s\)$/,
  );
  assert.match(
    applied!,
    /^reload applied in \d+\.\d s: THROTTLE_ANON=45\/min \(was 30\/min\); 2 web worker\(s\) replaced$/,
  );
  assert.equal(rest, ['']);
  for (let i = 0; i < 10; i += 1) assert.is(await anonRate(), '45/min', 'every worker serves the new rate');
});

test('a bad value is refused in one line and the workers keep their settings', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=lots\n');
  const { run, log } = await cliReload('reload refused');
  assertRefused(run, /invalid THROTTLE_ANON="lots": /);
  // The line is JSON, so its quotes come escaped.
  assert.match(log, /reload refused, the workers keep their settings: invalid THROTTLE_ANON=\\?"lots\\?"/);
  assert.is(await anonRate(), '45/min');
});

test('a setting only a restart can change is refused by name', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=60/min\nSHUTDOWN_TIMEOUT_MS=20000\n');
  const { run, log } = await cliReload('reload refused');
  assertRefused(run, /SHUTDOWN_TIMEOUT_MS changed: only a restart applies it\n$/);
  assert.match(log, /SHUTDOWN_TIMEOUT_MS changed: only a restart applies it/);
  assert.is(await anonRate(), '45/min');
});

test('cli reload waits a bounded time: a process that records nothing is said not to answer within 10 s', async () => {
  const other = spawn(process.execPath, ['-e', "process.on('SIGHUP', () => {}); setInterval(() => {}, 1000)"], {
    stdio: 'ignore',
  });
  try {
    await sleep(500);
    const began = Date.now();
    const run = await runCli({ DATA_DIR: dataDir }, ['reload', '--pid', String(other.pid)]);
    assert.equal(
      [run.code, run.stderr],
      [1, `paceline: Paceline's primary (PID ${other.pid}) did not answer the reload within 10 s\n`],
    );
    assert.ok(Date.now() - began < 30_000, `returned after ${Date.now() - began} ms`);
  } finally {
    other.kill('SIGKILL');
  }
});

test('the metrics draw the new limit and count every reload by outcome', async () => {
  const { samples } = await scrape(host!.metricsBase);
  assert.is(sumOf(samples, 'paceline_throttle_limit', { scope: 'anon' }), 45);
  assert.is(sumOf(samples, 'paceline_throttle_window_seconds', { scope: 'anon' }), 60);
  assert.is(sumOf(samples, 'paceline_settings_reloads_total', { outcome: 'applied' }), 1);
  assert.is(sumOf(samples, 'paceline_settings_reloads_total', { outcome: 'refused' }), 2);
});

test('settings that contradict each other are refused in one line (docs/configuration.md "Rules between settings")', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=60/min\nPAGE_SIZE=500\nMAX_PAGE_SIZE=50\n');
  const { run, log } = await cliReload('reload refused');
  assertRefused(run, /invalid PAGE_SIZE="500": must not exceed MAX_PAGE_SIZE \(50\)/);
  assert.match(
    log,
    /reload refused, the workers keep their settings: invalid PAGE_SIZE=\\?"500\\?": must not exceed MAX_PAGE_SIZE \(50\)/,
  );
  assert.is(await anonRate(), '45/min');
});

test.run();
