// Needs: prometheus
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { ENTRY, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { pseudonymOf } from '../../../src/throttle/pseudonym.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { parseMetrics, scrape, sumOf } from '../../helpers/metrics.js';
import { resultValues, startPrometheus, type RunningPrometheus } from '../../helpers/prometheus.js';

// docs/throttling.md "Who is throttled": two hosts on one Redis (one of 2 web workers), 30
// clients with known request counts; a real Prometheus scrapes both. The top 5 pseudonyms summed
// over the hosts are the 5 heavy clients with their exact refusals, the distinct count is the
// number of clients refused, near-limit admissions are counted exactly, and no address is in
// the metrics.

const LIMIT = 10;
const CLIENTS = Array.from({ length: 30 }, (_, i) => `198.51.100.${i + 1}`);
/** Requests per client: 5 heavy (40: 30 refused), 5 just over (12: 2 refused), 20 under the limit (5). */
const SENT = CLIENTS.map((_, i) => (i < 5 ? 40 : i < 10 ? 12 : 5));
const refusedOf = (i: number) => Math.max(0, (SENT[i] as number) - LIMIT);

const test = suite('who is throttled');
let hosts: RunningCluster[] = [];
let prometheus: RunningPrometheus | undefined;
let dropDatabase: () => Promise<void> = async () => {};
let secret = '';
let dataDir = '';

test.before(async () => {
  const database = await createTestDatabase('throttle-who');
  dropDatabase = database.drop;
  const stores = testStoresEnv('throttle-who', database.url);
  secret = stores.CURSOR_SECRET as string;
  const env = {
    ...stores,
    TRUST_PROXY_HOPS: '1',
    TRUSTED_PROXIES: '127.0.0.1',
    THROTTLE_ANON: `${LIMIT}/min`,
    THROTTLE_TIMEOUT_MS: '5000',
  };
  dataDir = await mkdtemp(join(process.env.TEST_TMP_DIR!, 'who-'));
  hosts = await Promise.all([
    startCluster({ ...env, WEB_CONCURRENCY: '2', DATA_DIR: dataDir }, 120_000),
    startCluster({ ...env, WEB_CONCURRENCY: '1', DATA_DIR: `${dataDir}-b` }, 120_000),
  ]);
  prometheus = await startPrometheus(
    join(process.env.TEST_TMP_DIR!, `prometheus-who-${randomBytes(3).toString('hex')}`),
    hosts.map((host) => `127.0.0.1:${host.metricsPort}`),
    [],
  );
  // Each client's requests alternate between the hosts, a few clients at a time.
  for (let first = 0; first < CLIENTS.length; first += 6) {
    await Promise.all(
      CLIENTS.slice(first, first + 6).map(async (ip, j) => {
        for (let n = 0; n < (SENT[first + j] as number); n += 1) {
          const host = hosts[n % 2] as RunningCluster;
          await request(host.base, 'GET', '/api/tasks/', { headers: { 'X-Forwarded-For': ip } });
        }
      }),
    );
  }
});

test.after(async () => {
  await prometheus?.stop();
  await Promise.all(hosts.map((host) => host.stop()));
  await dropDatabase();
});

/** Polls `read` until it equals `wanted` (bounded); returns the last value read. */
async function until<T>(read: () => Promise<T>, wanted: T): Promise<T> {
  let value = await read();
  for (let i = 0; i < 150 && JSON.stringify(value) !== JSON.stringify(wanted); i += 1) {
    await sleep(200);
    value = await read();
  }
  return value;
}

async function query(expr: string): Promise<Array<{ metric: Record<string, string>; value: number }>> {
  const data = await prometheus!.query(expr);
  return (data.result as Array<{ metric: Record<string, string>; value: [number, string] }>).map((s) => ({
    metric: s.metric,
    value: Number(s.value[1]),
  }));
}

test('the top 5 pseudonyms summed over both hosts are the 5 heavy clients, with their refusals', async () => {
  const heavy = Object.fromEntries(CLIENTS.slice(0, 5).map((ip, i) => [pseudonymOf(secret, `ip:${ip}`), refusedOf(i)]));
  const top5 = async () => {
    const rows = await query('topk(5, sum by (client) (paceline_throttle_top_client_refused{scope="anon"}))');
    return Object.fromEntries(rows.map((row) => [row.metric.client, row.value]).sort());
  };
  assert.equal(await until(top5, Object.fromEntries(Object.entries(heavy).sort())), heavy);
});

test('the distinct throttled count is the number of clients refused, on every host', async () => {
  const refused = CLIENTS.filter((_, i) => refusedOf(i) > 0).length;
  const distinct = async () =>
    (await query('paceline_throttle_distinct_clients{scope="anon"}')).map((row) => row.value);
  assert.equal(await until(distinct, [refused, refused]), [refused, refused]);
});

test('near-limit admissions are counted exactly: those left with 20 % or less of the budget', async () => {
  // Admissions that left 2, 1 or 0 of 10: three per client that reached the limit.
  const wanted = CLIENTS.filter((_, i) => (SENT[i] as number) >= LIMIT).length * 3;
  const near = async () => {
    let total = 0;
    for (const host of hosts)
      total += sumOf((await scrape(host.metricsBase)).samples, 'paceline_throttle_near_limit_total', { scope: 'anon' });
    return total;
  };
  assert.is(await until(near, wanted), wanted);
  const limit = resultValues(await prometheus!.query('max(paceline_throttle_limit{scope="anon"})'));
  assert.equal(limit, [LIMIT]);
});

test("no client address appears in either host's metrics", async () => {
  for (const host of hosts) {
    const text = (await scrape(host.metricsBase)).text;
    assert.ok(parseMetrics(text).some((s) => s.name === 'paceline_throttle_top_client_refused'));
    for (const ip of CLIENTS) assert.not.ok(text.includes(ip), `${ip} in the metrics of ${host.metricsBase}`);
  }
});

test("npm run cli -- throttled prints the running primary's top clients with their addresses", async () => {
  const child = spawn(
    process.execPath,
    [
      ENTRY.cli,
      'throttled',
      '--scope',
      'anon',
      // With both store URLs a primary records no PID under DATA_DIR: the operator names it.
      '--pid',
      String(hosts[0]!.child.pid),
    ],
    {
      env: { ...process.env, DATA_DIR: resolve(dataDir), LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stdout += chunk));
  const code = await new Promise((done) => child.on('exit', done));
  assert.is(code, 0, stdout);
  // Host A served half of each client's requests: its top 5 are the heavy clients, 15 refused each.
  for (const ip of CLIENTS.slice(0, 5)) assert.match(stdout, new RegExp(`\\b15  ip:${ip.replaceAll('.', '\\.')}  c-`));
  assert.match(stdout, /^anon: \d+ refused in the window$/m);
});

test.run();
