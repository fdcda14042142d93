import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../fixtures/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { scrape, sumOf } from '../../helpers/metrics.js';

// A reload (SIGHUP to the primary) reads ENV_FILE again and checks it like a start: new web
// workers take its settings with no failed request; a bad value, or a change only a restart can
// make, is refused in one line and the workers keep what they had.

const test = suite('a reload re-reads ENV_FILE');
const envFile = join(process.env.TEST_TMP_DIR ?? '/tmp', 'reload-settings.env');
let host: RunningCluster | undefined;
let dropDatabase: () => Promise<void> = async () => {};

async function anonRate(): Promise<string | undefined> {
  const limits = (await (await fetch(`${host!.base}/api/rate-limits/`)).json()) as Array<{
    scope: string;
    rate: string;
  }>;
  return limits.find((limit) => limit.scope === 'anon')?.rate;
}

/** Sends SIGHUP and waits for the primary to say the reload is done (or refused). */
async function reload(expect: string, since: number): Promise<string> {
  process.kill(host!.child.pid!, 'SIGHUP');
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const output = host!.output().slice(since);
    if (output.includes(expect)) return output;
    await sleep(100);
  }
  throw new Error(`no "${expect}" after SIGHUP:\n${host!.output().slice(since)}`);
}

test.before(async () => {
  const database = await createTestDatabase('reload-settings');
  dropDatabase = database.drop;
  await writeFile(envFile, 'THROTTLE_ANON=30/min\nPAGE_SIZE=3\n');
  host = await startCluster(
    { ...testStoresEnv('reload-settings', database.url), ENV_FILE: envFile, WEB_CONCURRENCY: '2', LOG_LEVEL: 'info' },
    120_000,
  );
});

test.after(async () => {
  await host?.stop();
  await dropDatabase();
});

test('the settings of ENV_FILE apply at start', async () => {
  assert.is(await anonRate(), '30/min');
});

test('a reload applies a changed rate to the new workers', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=45/min\nPAGE_SIZE=3\n');
  await reload('web workers replaced', host!.output().length);
  for (let i = 0; i < 10; i += 1) assert.is(await anonRate(), '45/min', 'every worker serves the new rate');
});

test('a bad value is refused in one line and the workers keep their settings', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=lots\n');
  const output = await reload('reload refused', host!.output().length);
  // The line is JSON, so its quotes come escaped.
  assert.match(output, /reload refused, the workers keep their settings: invalid THROTTLE_ANON=\\?"lots\\?"/);
  assert.is(await anonRate(), '45/min');
});

test('a setting only a restart can change is refused by name', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=60/min\nSHUTDOWN_TIMEOUT_MS=20000\n');
  const output = await reload('reload refused', host!.output().length);
  assert.match(output, /SHUTDOWN_TIMEOUT_MS changed: only a restart applies it/);
  assert.is(await anonRate(), '45/min');
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
  const output = await reload('reload refused', host!.output().length);
  assert.match(
    output,
    /reload refused, the workers keep their settings: invalid PAGE_SIZE=\\?"500\\?": must not exceed MAX_PAGE_SIZE \(50\)/,
  );
  assert.is(await anonRate(), '45/min');
});

test.run();
