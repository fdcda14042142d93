import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { scrape, sumOf } from '../../helpers/metrics.js';

// A shadow rate is a setting like any other (docs/throttling.md "Shadow rules"): a SIGHUP that
// changes it in ENV_FILE applies it to the new web workers of the running primary, no restart.

const test = suite('a reload changes a shadow rate without a restart');
const envFile = join(process.env.TEST_TMP_DIR ?? '/tmp', 'shadow-reload.env');
let host: RunningCluster | undefined;
let dropDatabase: () => Promise<void> = async () => {};
let probes = 0;

const get = (ip: string, path = '/api/tasks/') => fetch(`${host!.base}${path}`, { headers: { 'X-Forwarded-For': ip } });

/** The anon row of /api/rate-limits/, asked from an address of its own so it spends no tested budget. */
async function anonRow(): Promise<{ rate: string; shadow_rate: string | null }> {
  const rows = (await (await get(`192.0.2.${(probes += 1)}`, '/api/rate-limits/')).json()) as Array<{
    scope: string;
    rate: string;
    shadow_rate: string | null;
  }>;
  return rows.find((row) => row.scope === 'anon')!;
}

async function shadowRefused(): Promise<number> {
  const { samples } = await scrape(host!.metricsBase);
  return sumOf(samples, 'paceline_throttle_decisions_total', { scope: 'anon', decision: 'shadow_refused' });
}

/** 30 requests of one client: the statuses it got, and the shadow refusals they added. */
async function thirtyFrom(ip: string): Promise<{ admitted: number; shadowRefusals: number }> {
  const before = await shadowRefused();
  let admitted = 0;
  for (let i = 0; i < 30; i++) if ((await get(ip)).status === 200) admitted++;
  // The primary's sum lags its workers by one report.
  const deadline = Date.now() + 10_000;
  let after = await shadowRefused();
  for (
    let stable = 0;
    Date.now() < deadline && stable < 3;
    stable = (await shadowRefused()) === after ? stable + 1 : 0
  ) {
    after = await shadowRefused();
    await sleep(300);
  }
  return { admitted, shadowRefusals: after - before };
}

test.before(async () => {
  const database = await createTestDatabase('shadow-reload');
  dropDatabase = database.drop;
  await writeFile(envFile, 'THROTTLE_ANON=20/min\nTHROTTLE_SHADOW_RATES=anon=10/min\n');
  host = await startCluster(
    {
      ...testStoresEnv('shadow-reload', database.url),
      ENV_FILE: envFile,
      WEB_CONCURRENCY: '2',
      TRUST_PROXY_HOPS: '1',
      LOG_LEVEL: 'info',
    },
    120_000,
  );
});

test.after(async () => {
  await host?.stop();
  await dropDatabase();
});

test('anon=20/min with 10/min in shadow: 20 admitted, 10 shadow refusals, across the workers', async () => {
  const row = await anonRow();
  assert.equal([row.rate, row.shadow_rate], ['20/min', '10/min']);
  assert.equal(await thirtyFrom('198.51.100.1'), { admitted: 20, shadowRefusals: 10 });
});

test('SIGHUP with anon=5/min in shadow: the new workers try the new rate, answers unchanged', async () => {
  await writeFile(envFile, 'THROTTLE_ANON=20/min\nTHROTTLE_SHADOW_RATES=anon=5/min\n');
  const since = host!.output().length;
  process.kill(host!.child.pid!, 'SIGHUP');
  const deadline = Date.now() + 60_000;
  while (!host!.output().slice(since).includes('web workers replaced') && Date.now() < deadline) await sleep(100);
  assert.ok(host!.output().slice(since).includes('web workers replaced'), host!.output().slice(since));
  for (let i = 0; i < 4; i++) assert.is((await anonRow()).shadow_rate, '5/min', 'every worker has the new rate');
  assert.equal(await thirtyFrom('198.51.100.2'), { admitted: 20, shadowRefusals: 15 });
});

test.run();
