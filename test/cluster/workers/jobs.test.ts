import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { expectedDays, seedCompletedHistory, type SeedOptions } from '../../helpers/seed-events.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { scrape, sumOf } from '../../helpers/metrics.js';

// The jobs child on the real entry point: a report whose worker is SIGKILLed midway is found by
// BullMQ's stalled check once its lock expires, runs again in the restarted child, and ends done
// once with the right numbers; SIGTERM lets an active report finish before the host exits 0.

const test = suite('report jobs in the jobs child');
let cluster: RunningCluster;
let databaseUrl: string;
let dropDatabase: () => Promise<void> = async () => {};
let token: string;
// 3,000 tasks and 1,500 completions over three days: 45 batches of 100 events, 60 ms apart.
const seed: SeedOptions = {
  tasks: 3_000,
  owner: { id: 1, username: 'alice' },
  start: new Date('2026-11-01T06:00:00Z'),
  spanMs: 3 * 86_400_000,
};
const range = { from: '2026-11-01', to: '2026-11-03' };

/** The pid the jobs child logged when its processors started (the latest one). */
function jobsChildPid(): number | undefined {
  const lines = cluster
    .output()
    .split('\n')
    .filter((line) => line.includes('"role":"jobs"') && line.includes('job processors started'));
  const last = lines.at(-1);
  return last ? (JSON.parse(last) as { pid: number }).pid : undefined;
}

async function poll(path: string, until: (body: { status: string; result: unknown }) => boolean, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await request(cluster.base, 'GET', path, { token });
    if (response.status === 200 && until(response.body)) return response.body;
    if (Date.now() > deadline) throw new Error(`${path} stayed ${response.text}`);
    await sleep(100);
  }
}

test.before(async () => {
  const database = await createTestDatabase('jobs');
  databaseUrl = database.url;
  dropDatabase = database.drop;
  const db = connectDatabase(database.url, 1);
  const user = await createUser(db, 'alice', 'alice-pass-123');
  if (!user.ok) throw new Error('could not create alice');
  await seedCompletedHistory(db, { ...seed, owner: user.user });
  await db.destroy();
  cluster = await startCluster({
    ...testStoresEnv('jobs', database.url),
    LOG_LEVEL: 'info',
    WEB_CONCURRENCY: '1',
    JOB_CONCURRENCY: '1',
    REPORT_BATCH_SIZE: '100',
    REPORT_BATCH_DELAY_MS: '60',
    JOB_LOCK_DURATION_MS: '2000',
    JOB_STALLED_INTERVAL_MS: '1000',
    JOB_METRICS_INTERVAL_MS: '200',
    SHUTDOWN_TIMEOUT_MS: '20000',
    THROTTLE_USER: '100000/min',
  });
  const login = await request(cluster.base, 'POST', '/api/auth/token/', {
    body: { username: 'alice', password: 'alice-pass-123' },
  });
  token = login.body.token;
});

test.after(async () => {
  await cluster?.stop('SIGKILL');
  await dropDatabase();
});

test('a report whose jobs child is SIGKILLed midway is retried and done once, with the right numbers', async () => {
  const accepted = await request(cluster.base, 'POST', '/api/reports/', { token, body: range });
  assert.is(accepted.status, 202, accepted.text);
  const path = new URL(accepted.headers.get('location')!).pathname;
  await poll(path, (body) => body.status === 'running');
  await sleep(1_000);
  const victim = jobsChildPid();
  assert.ok(victim, 'the jobs child logged its pid');
  process.kill(victim!, 'SIGKILL');
  const report = await poll(path, (body) => body.status === 'done' || body.status === 'failed');
  assert.is(report.status, 'done');
  assert.is((report as unknown as { attempts: number }).attempts, 2, 'one attempt killed, one finished');
  assert.is.not(jobsChildPid(), victim, 'the primary restarted the jobs child');
  const expected = expectedDays(seed, range.from, range.to);
  const totals = { created: 0, completed: 0, reopened: 0, deleted: 0 };
  for (const day of expected.days)
    for (const key of Object.keys(totals) as Array<keyof typeof totals>) totals[key] += day[key];
  const { as_of, ...result } = report.result as { as_of: string };
  assert.ok(!Number.isNaN(Date.parse(as_of)), 'the report says when it read the log');
  assert.equal(result, {
    ...range,
    owner: null,
    open_at_start: expected.openAtStart,
    days: expected.days,
    totals,
    as_of_position: 4_500,
  });

  const db = connectDatabase(databaseUrl, 1);
  const rows = await db.selectFrom('reports').select(['id', 'status']).execute();
  await db.destroy();
  assert.equal(rows, [{ id: accepted.body.id, status: 'done' }]);
  for (
    let i = 0;
    i < 50 &&
    sumOf((await scrape(cluster.metricsBase)).samples, 'paceline_jobs', { queue: 'reports', state: 'completed' }) !== 1;
    i += 1
  )
    await sleep(100);
  const samples = (await scrape(cluster.metricsBase)).samples;
  assert.is(sumOf(samples, 'paceline_jobs', { queue: 'reports', state: 'completed' }), 1, 'one completed job');
  assert.is(sumOf(samples, 'paceline_jobs', { queue: 'reports', state: 'failed' }), 0);
});

test('SIGTERM lets the active report finish before the host exits 0', async () => {
  const accepted = await request(cluster.base, 'POST', '/api/reports/', { token, body: { ...range, owner: 'alice' } });
  const path = new URL(accepted.headers.get('location')!).pathname;
  await poll(path, (body) => body.status === 'running');
  assert.is(await cluster.stop('SIGTERM'), 0);
  const db = connectDatabase(databaseUrl, 1);
  const row = await db
    .selectFrom('reports')
    .select(['status', 'attempts'])
    .where('id', '=', accepted.body.id)
    .executeTakeFirstOrThrow();
  await db.destroy();
  assert.equal(row, { status: 'done', attempts: 1 });
});

test('a report longer than the shutdown allows is interrupted, not killed, and finishes after the restart', async () => {
  const slow = {
    ...testStoresEnv('jobs-slow', databaseUrl),
    WEB_CONCURRENCY: '1',
    JOB_CONCURRENCY: '1',
    REPORT_BATCH_SIZE: '100',
    THROTTLE_USER: '100000/min',
  };
  cluster = await startCluster({
    ...slow,
    REPORT_BATCH_DELAY_MS: '300',
    SHUTDOWN_TIMEOUT_MS: '3000',
    // A statement must fit in the drain a stop allows (docs/configuration.md "Rules between settings").
    DATABASE_STATEMENT_TIMEOUT_MS: '2000',
  });
  token = (
    await request(cluster.base, 'POST', '/api/auth/token/', { body: { username: 'alice', password: 'alice-pass-123' } })
  ).body.token;
  const accepted = await request(cluster.base, 'POST', '/api/reports/', { token, body: range });
  const path = new URL(accepted.headers.get('location')!).pathname;
  await poll(path, (body) => body.status === 'running');
  assert.is(await cluster.stop('SIGTERM'), 0, 'the host drained within its shutdown timeout');
  assert.not.match(cluster.output(), /"level":50[^\n]*(SIGKILL|uncaught)/i);

  cluster = await startCluster({ ...slow, REPORT_BATCH_DELAY_MS: '0' });
  token = (
    await request(cluster.base, 'POST', '/api/auth/token/', { body: { username: 'alice', password: 'alice-pass-123' } })
  ).body.token;
  const report = await poll(path, (body) => body.status === 'done' || body.status === 'failed');
  assert.is(report.status, 'done');
  assert.is(
    (report as unknown as { attempts: number }).attempts,
    2,
    'the interrupted attempt, then the one that finished',
  );
  assert.is((report.result as { as_of_position: number }).as_of_position, 4_500);
});

test.run();
