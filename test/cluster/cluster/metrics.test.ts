import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { ENTRY, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { childPids, parseMetrics, requestOnNewConnection, scrape, sumOf } from '../../helpers/metrics.js';

// docs/architecture.md "Observability" on the real entry point with two web workers: the primary's /metrics equals what the
// client saw, summed over the workers (each request on its own connection, so the primary hands
// them out in turn), labels carry route templates only, and a worker that is SIGKILLed or
// drained takes none of its reported counts with it.

const test = suite('cluster metrics');
let cluster: RunningCluster;
let dropDatabase: () => Promise<void> = async () => {};
const seen = new Map<string, number>(); // "METHOD route status" → responses the client got

async function hit(
  method: string,
  path: string,
  route: string,
  options: { headers?: Record<string, string>; body?: string } = {},
) {
  const status = await requestOnNewConnection(cluster.base, method, path, options);
  const key = `${method} ${route} ${status}`;
  seen.set(key, (seen.get(key) ?? 0) + 1);
  return status;
}
const saw = (method: string, route: string, status: number) => seen.get(`${method} ${route} ${status}`) ?? 0;
const reported = (
  samples: Awaited<ReturnType<typeof scrape>>['samples'],
  method: string,
  route: string,
  status: number,
) => sumOf(samples, 'paceline_http_requests_total', { method, route, status: String(status) });

/** The primary's workers: its children that run the entry point (tsx's esbuild service is a child too). */
function workerPids(): number[] {
  const runsMain = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(ENTRY.main);
    } catch {
      return false; // exited meanwhile
    }
  };
  return childPids(cluster.child.pid!).filter(runsMain);
}

/** Waits until the primary has `count` children, none of them in `old`. */
async function waitForChildren(count: number, old: number[], timeoutMs = 60_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pids = workerPids();
    if (pids.length === count && pids.every((pid) => !old.includes(pid))) return pids;
    if (Date.now() > deadline)
      throw new Error(`children are ${pids.join(',')}; expected ${count} new ones besides ${old.join(',')}`);
    await sleep(100);
  }
}

test.before(async () => {
  const database = await createTestDatabase('metrics');
  dropDatabase = database.drop;
  cluster = await startCluster({
    ...testStoresEnv('metrics', database.url),
    WEB_CONCURRENCY: '2',
    THROTTLE_ANON: '8/min',
    THROTTLE_TOKEN_OBTAIN: '3/min',
  });
});

test.after(async () => {
  await cluster?.stop();
  await dropDatabase();
});

test('host /metrics counts equal the 200s and 429s the client saw in two scopes, summed over both workers', async () => {
  for (let i = 0; i < 20; i += 1) await hit('GET', '/api/tasks/', '/api/tasks/');
  const login = {
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: 'nobody', password: 'wrong-password' }),
  };
  for (let i = 0; i < 7; i += 1) await hit('POST', '/api/auth/token/', '/api/auth/token/', login);
  assert.is(saw('GET', '/api/tasks/', 200), 8, 'anon admits 8 a minute');
  assert.is(saw('GET', '/api/tasks/', 429), 12);
  assert.is(saw('POST', '/api/auth/token/', 400), 3, 'token-obtain admits 3 a minute');
  assert.is(saw('POST', '/api/auth/token/', 429), 4);

  const { samples } = await scrape(cluster.metricsBase);
  for (const [method, route, status] of [
    ['GET', '/api/tasks/', 200],
    ['GET', '/api/tasks/', 429],
    ['POST', '/api/auth/token/', 400],
    ['POST', '/api/auth/token/', 429],
  ] as const) {
    assert.is(reported(samples, method, route, status), saw(method, route, status), `${method} ${route} ${status}`);
  }
  const decisions = (scope: string, decision: string) =>
    sumOf(samples, 'paceline_throttle_decisions_total', { scope, decision });
  assert.is(decisions('anon', 'allowed'), 8);
  assert.is(decisions('anon', 'throttled'), 12);
  assert.is(decisions('token-obtain', 'allowed'), 3);
  assert.is(decisions('token-obtain', 'throttled'), 4);
  assert.is(decisions('user', 'store_error'), 0);
  assert.ok(
    samples.some((s) => s.name === 'paceline_throttle_decisions_total' && s.labels.scope === 'reports'),
    'unused scopes are present at 0',
  );
  assert.is(sumOf(samples, 'paceline_throttle_check_duration_seconds_count', { scope: 'anon' }), 20);
  assert.is(
    sumOf(samples, 'paceline_http_request_duration_seconds_count', { method: 'GET', route: '/api/tasks/' }),
    20,
  );
  assert.ok(sumOf(samples, 'process_cpu_seconds_total') > 0, 'Node process metrics are exported');
});

test('labels hold route templates and known methods, never raw paths, ids or addresses', async () => {
  await hit('GET', '/api/tasks/424242/', '/api/tasks/:id/', { headers: { 'X-Forwarded-For': '203.0.113.77' } });
  await hit('GET', '/api/tasks/9876/events/', '/api/tasks/:id/events/');
  await hit('GET', '/no/such/path/31337', 'unmatched');
  await hit('HEAD', '/api/tasks/', '/api/tasks/');
  await hit('OPTIONS', '/api/tasks/', '/api/tasks/');
  await hit('POST', '/api/rate-limits/', '/api/rate-limits/');
  await hit('PROPFIND', '/api/tasks/', '/api/tasks/');
  const { text, samples } = await scrape(cluster.metricsBase);
  assert.is(
    reported(samples, 'GET', '/api/tasks/:id/', 429),
    1,
    'a throttled request is labelled with its route template',
  );
  assert.is(reported(samples, 'GET', 'unmatched', 404), 1);
  // The anon budget is spent by now: OPTIONS and a 405 are counted and refused like any request.
  assert.is(reported(samples, 'OPTIONS', '/api/tasks/', 429), 1);
  assert.is(reported(samples, 'POST', '/api/rate-limits/', 429), 1);
  assert.is(reported(samples, 'HEAD', '/api/tasks/', 429), 1);
  assert.is(sumOf(samples, 'paceline_http_requests_total', { method: '_OTHER', route: '/api/tasks/' }), 1);
  // Label values only: sample values (sums, byte counts) may contain any digits by chance.
  const labelValues = samples.flatMap((s) => Object.values(s.labels)).join('\n');
  for (const leak of ['424242', '9876', '31337', '/no/such', '127.0.0.1', '203.0.113', 'PROPFIND', 'nobody'])
    assert.not.ok(labelValues.includes(leak), `a /metrics label contains ${leak}`);
  assert.not.ok(
    /203\.0\.113|\/no\/such|PROPFIND/.test(text),
    '/metrics mentions a client address, raw path or raw method',
  );
  const http = samples.filter((s) => s.name.startsWith('paceline_http_'));
  for (const s of http) assert.match(s.labels.route!, /^(unmatched|\/[a-z/:_-]*)$/, `route label ${s.labels.route}`);
  for (const s of http) assert.match(s.labels.method!, /^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS|_OTHER)$/);

  const onApiPort = await fetch(`${cluster.base}/metrics`);
  assert.is(onApiPort.status, 404, 'the API port serves no metrics');
  assert.not.ok((await onApiPort.text()).includes('paceline_'));
});

test('a SIGKILLed worker keeps its reported counts; drained workers keep every count; only the kill is a restart', async () => {
  const before = (await scrape(cluster.metricsBase)).samples; // asks both workers: nothing unreported
  const [victim, survivor] = workerPids();
  assert.ok(victim && survivor, 'two web workers');
  process.kill(victim!, 'SIGKILL');
  await sleep(100);
  const afterKill = (await scrape(cluster.metricsBase)).samples;
  assert.is(
    reported(afterKill, 'GET', '/api/tasks/', 200),
    reported(before, 'GET', '/api/tasks/', 200),
    'counts right after the kill',
  );
  assert.is(sumOf(afterKill, 'paceline_throttle_decisions_total'), sumOf(before, 'paceline_throttle_decisions_total'));
  await waitForChildren(2, [victim!]);

  const old = workerPids();
  process.kill(cluster.child.pid!, 'SIGHUP'); // replaces both workers, each drained gracefully
  const failures: number[] = [];
  for (let i = 0; i < 2_000 && workerPids().some((pid) => old.includes(pid)); i += 1) {
    if ((await hit('GET', '/healthz', '/healthz')) === 'error') failures.push(i);
    await sleep(10);
  }
  await waitForChildren(2, old);
  assert.equal(failures, [], 'no request failed during the rolling reload');
  await sleep(200); // the primary reads the last worker's final report and exit in the same moment
  const after = (await scrape(cluster.metricsBase)).samples;
  assert.ok(saw('GET', '/healthz', 200) > 20, 'traffic ran during the reload');
  assert.is(
    reported(after, 'GET', '/healthz', 200),
    saw('GET', '/healthz', 200),
    'a drained worker reports its last requests',
  );
  for (const [route, status] of [
    ['/api/tasks/', 200],
    ['/api/tasks/', 429],
    ['/api/auth/token/', 429],
  ] as const) {
    const method = route === '/api/tasks/' ? 'GET' : 'POST';
    assert.is(
      reported(after, method, route, status),
      saw(method, route, status),
      `${route} ${status} after kill and reload`,
    );
  }
  assert.is(sumOf(after, 'paceline_worker_restarts_total', { role: 'web' }), 1);
  assert.is(sumOf(after, 'paceline_worker_restarts_total', { role: 'jobs' }), 0);
});

/** GET /metrics on a connection of its own: the status and the body. */
function scrapeOnNewConnection(): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${cluster.metricsBase}/metrics`, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(30_000, () => req.destroy(new Error('/metrics: no answer within 30 s')));
    req.end();
  });
}

test('twenty scrapes arriving during a collection share the next one, and every one gets the whole, current sum', async () => {
  const collections = (samples: Awaited<ReturnType<typeof scrape>>['samples']) =>
    sumOf(samples, 'paceline_metrics_collections_total');
  const before = collections((await scrape(cluster.metricsBase)).samples);
  // One web worker is stopped for a second, as a busy child would be: the first scrape's
  // collection waits for its answer while the other nineteen arrive, however loaded the machine.
  const [slow] = workerPids();
  process.kill(slow!, 'SIGSTOP');
  let pending: Array<Promise<{ status: number; text: string }>>;
  try {
    pending = Array.from({ length: 20 }, () => scrapeOnNewConnection());
    await sleep(1_000);
  } finally {
    process.kill(slow!, 'SIGCONT');
  }
  const answers = await Promise.all(pending);
  const after = collections((await scrape(cluster.metricsBase)).samples);
  const made = after - before - 1; // the last scrape made one of its own
  console.log(`# 20 concurrent scrapes: ${made} collections`);
  // The first scrape's collection, and the one the others share (a third for any that came late).
  assert.ok(made >= 2 && made <= 3, `20 concurrent scrapes made ${made} collections`);
  for (const { status, text } of answers) {
    assert.is(status, 200);
    const samples = parseMetrics(text);
    // Counted by both workers: the whole sum, as of the scrape.
    assert.is(reported(samples, 'GET', '/api/tasks/', 200), saw('GET', '/api/tasks/', 200));
    assert.is(reported(samples, 'GET', '/healthz', 200), saw('GET', '/healthz', 200));
    assert.ok(collections(samples) > before, 'each answer comes from a collection made after the scrape before them');
    assert.ok(sumOf(samples, 'process_cpu_seconds_total') > 0);
  }
});

test.run();
