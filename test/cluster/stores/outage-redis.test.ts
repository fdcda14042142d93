import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { childPids, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { newRedisPassword, startRedis } from '../../../src/embedded/redis.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { request } from '../../helpers/http.js';
import { createTestDatabase } from '../../helpers/database.js';

// Redis killed (SIGKILL) under a load of reads, writes and reports, and brought back on the same
// port with its append-only file (docs/security.md "Outages"). While it is down: the throttle admits
// (THROTTLE_FAILURE_MODE=open, set here: throttle-local-share.test.ts tests the default, local);
// reads are answered from PostgreSQL; writes are refused 503 with nothing written, because their
// commit cannot be published to the read cache's head (docs/architecture.md "Read cache"); a report
// is accepted, recorded and left for the jobs child's sweeper. Once Redis is back, in the same
// processes: limits count again, writes succeed, BullMQ's producers and workers reconnect, and
// every accepted report is done.

const test = suite('Redis killed under load');
const scratch = process.env.TEST_TMP_DIR ?? '/tmp';
const redisOpts = {
  dataDir: join(scratch, 'outage-redis'),
  port: 0,
  persistent: true,
  password: newRedisPassword(),
  log: () => {},
};
const CLIENT_DEADLINE_MS = 15_000;
/** Generous bound on any answer during the outage: the server's own waits are 1-2 s. */
const OUTAGE_ANSWER_BOUND_MS = 8_000;

let redis: Awaited<ReturnType<typeof startRedis>> | undefined;
let cluster: RunningCluster | undefined;
let dropDatabase: () => Promise<void> = async () => {};
let databaseUrl = '';
let token = '';

interface Call {
  kind: 'list' | 'create' | 'change' | 'report' | 'anon';
  requestId: string;
  sentAt: number;
  ms: number;
  status: number;
  retryAfter: string | null;
  location: string | null;
  body: any;
}
const calls: Call[] = [];

async function call(
  kind: Call['kind'],
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Call> {
  const requestId = randomUUID();
  const sentAt = Date.now();
  const record: Call = { kind, requestId, sentAt, ms: 0, status: 0, retryAfter: null, location: null, body: null };
  const options = {
    token: kind === 'anon' ? undefined : token,
    body,
    headers: { 'X-Request-Id': requestId, ...headers },
    deadlineMs: CLIENT_DEADLINE_MS,
  };
  const answer = await request(cluster!.base, method, path, options).catch(() => undefined);
  if (answer)
    Object.assign(record, {
      status: answer.status,
      retryAfter: answer.headers.get('retry-after'),
      location: answer.headers.get('location'),
      body: answer.body,
    });
  record.ms = Date.now() - sentAt;
  calls.push(record);
  return record;
}

async function client(index: number, stopped: () => boolean): Promise<void> {
  let last: number | undefined;
  for (let step = 0; !stopped(); step++) {
    const roll = (step + index) % 4;
    if (roll < 2) await call('list', 'GET', `/api/tasks/?ordering=-id${roll === 1 ? '&limit=5' : ''}`);
    else if (roll === 2 || last === undefined) {
      const created = await call(
        'create',
        'POST',
        '/api/tasks/',
        { title: `c${index}-${step}` },
        { 'Idempotency-Key': randomUUID() },
      );
      if (created.status === 201) last = created.body.id;
    } else await call('change', 'PATCH', `/api/tasks/${last}/`, { title: `changed ${step}` });
    await sleep(20);
  }
}

/** Anonymous requests from one forwarded address until the first 429 (or `max`): the admitted count. */
async function admittedFrom(ip: string, max: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < max; i++) {
    const answer = await call('anon', 'GET', '/api/tasks/', undefined, { 'X-Forwarded-For': ip });
    if (answer.status === 429) break;
    assert.ok(answer.status === 200, `an admitted anonymous list is answered: ${answer.status}`);
    admitted += 1;
  }
  return admitted;
}

async function waitForReport(location: string, timeoutMs: number): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await call('list', 'GET', new URL(location).pathname);
    if (answer.status === 200 && (answer.body.status === 'done' || answer.body.status === 'failed')) return answer.body;
    if (Date.now() > deadline) throw new Error(`${location} still ${JSON.stringify(answer.body)}`);
    await sleep(250);
  }
}

function workers(): number[] {
  return childPids(cluster!.child.pid!)
    .filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('main'))
    .sort((a, b) => a - b);
}

test.before(async () => {
  redisOpts.port = await findFreePort();
  redis = await startRedis(redisOpts);
  const database = await createTestDatabase('outage_redis');
  databaseUrl = database.url;
  dropDatabase = database.drop;
  const db = connectDatabase(databaseUrl, 1);
  const user = await createUser(db, 'rhea', 'rhea-pass-123');
  if (!user.ok) throw new Error('could not create rhea');
  token = (await issueToken(db, 'rhea', 'rhea-pass-123', 3_600_000, new Date()))!.token;
  await db.destroy();
  cluster = await startCluster({
    ...testStoresEnv('outage-redis', databaseUrl),
    REDIS_URL: redis.url,
    WEB_CONCURRENCY: '2',
    JOB_CONCURRENCY: '1',
    THROTTLE_USER: '100000/min',
    THROTTLE_ANON: '5/min',
    THROTTLE_FAILURE_MODE: 'open',
    TRUST_PROXY_HOPS: '1',
    DATABASE_WAIT_MS: '1000',
    REPORT_SWEEP_INTERVAL_MS: '1000',
  });
});

test.after(async () => {
  await cluster?.stop();
  await redis?.stop();
  await dropDatabase();
});

test('admits, reads and refuses writes cleanly while Redis is down; recovers in the same processes; loses no report', async () => {
  const deadline = Date.now() + 30_000;
  while (workers().length < 3 && Date.now() < deadline) await sleep(200);
  await sleep(1_000);
  const before = workers();
  assert.is(before.length, 3, 'two web children and a jobs child');

  assert.is(await admittedFrom('198.51.100.1', 10), 5, 'the anonymous limit counts before the outage');
  const reportBody = { from: '2026-11-01', to: '2026-11-02' };
  const first = await call('report', 'POST', '/api/reports/', reportBody);
  assert.is(first.status, 202, JSON.stringify(first.body));
  assert.is((await waitForReport(first.location!, 30_000)).status, 'done', 'a report before the outage is done');

  let stop = false;
  const clients = [0, 1, 2].map((index) => client(index, () => stop));
  await sleep(2_000);
  const killedAt = Date.now();
  process.kill(redis!.pid, 'SIGKILL');
  await sleep(1_000);

  // Down: the throttle admits past the limit (open mode); a report is accepted and recorded.
  assert.is(await admittedFrom('198.51.100.2', 8), 8, 'open mode admits past the limit while Redis is down');
  const during = await call('report', 'POST', '/api/reports/', { ...reportBody, owner: 'rhea' });
  assert.is(during.status, 202, `a report is accepted while Redis is down: ${JSON.stringify(during.body)}`);
  await sleep(2_000);
  const restartedAt = Date.now();
  redis = await startRedis(redisOpts);

  // Back: writes succeed again within a bounded wait, in the same processes.
  const recoverBy = Date.now() + 30_000;
  let created: Call | undefined;
  while (Date.now() < recoverBy && created?.status !== 201) {
    created = await call('create', 'POST', '/api/tasks/', { title: 'after' }, { 'Idempotency-Key': randomUUID() });
    if (created.status !== 201) await sleep(250);
  }
  assert.is(created?.status, 201, 'writes are acknowledged again once Redis is back');
  await sleep(1_000);
  stop = true;
  await Promise.all(clients);
  assert.equal(workers(), before, 'no child was restarted');

  assert.is(await admittedFrom('198.51.100.3', 10), 5, 'the anonymous limit counts again after the outage');
  assert.is(
    (await waitForReport(during.location!, 60_000)).status,
    'done',
    'the report accepted during the outage is done',
  );
  // The producer reconnects on its own back-off, up to 5 s between attempts (src/stores/redis-client.ts), later
  // than the requests' connection: within 10 s of Redis's return a report is enqueued by it again, not left to
  // the sweeper. Every report asked for meanwhile is done all the same.
  const notEnqueued = (id: unknown) =>
    new RegExp(`not enqueued[^\\n]*${id}|${id}[^\\n]*not enqueued`).test(cluster!.output());
  const enqueuedBy = Date.now() + 10_000;
  let enqueued = false;
  for (let to = 3; !enqueued && (to === 3 || Date.now() < enqueuedBy); to += 1) {
    const after = await call('report', 'POST', '/api/reports/', {
      ...reportBody,
      to: `2026-11-${String(to).padStart(2, '0')}`,
    });
    assert.is(after.status, 202);
    assert.is(
      (await waitForReport(after.location!, 60_000)).status,
      'done',
      'a report requested after the outage is done',
    );
    enqueued = !notEnqueued(after.body.id);
  }
  assert.ok(enqueued, 'the producer reconnected');

  // Every answer was prompt; the only 5xx are 503s with Retry-After and a detail.
  assert.is(calls.filter((c) => c.status === 0).length, 0, 'no request went unanswered');
  const bad = calls.filter(
    (c) => c.status >= 500 && !(c.status === 503 && Number(c.retryAfter) > 0 && typeof c.body?.detail === 'string'),
  );
  assert.is(bad.length, 0, `5xx other than a 503 with Retry-After and a detail: ${JSON.stringify(bad.slice(0, 3))}`);
  const down = calls.filter((c) => c.sentAt > killedAt + 200 && c.sentAt + c.ms < restartedAt);
  assert.is(down.filter((c) => c.ms > OUTAGE_ANSWER_BOUND_MS).length, 0, 'every answer during the outage was prompt');
  const downWrites = down.filter((c) => c.kind === 'create' || c.kind === 'change');
  assert.ok(
    downWrites.length > 0 && downWrites.every((c) => c.status === 503),
    `writes during the outage: ${downWrites.map((c) => c.status).join(',')}`,
  );
  assert.match(downWrites[0]!.body.detail, /Redis/);
  const downReads = down.filter((c) => c.kind === 'list');
  assert.ok(
    downReads.length > 0 && downReads.every((c) => c.status === 200),
    `reads during the outage: ${downReads.map((c) => c.status).join(',')}`,
  );

  // The log holds every acknowledged write and no refused one.
  const db = connectDatabase(databaseUrl, 1);
  try {
    const ids = new Set(
      (await sql<{ id: string }>`select metadata->>'request_id' as id from events`.execute(db)).rows.map((r) => r.id),
    );
    const writes = calls.filter((c) => c.kind === 'create' || c.kind === 'change');
    for (const c of writes) {
      if (c.status === 200 || c.status === 201) assert.ok(ids.has(c.requestId), `acknowledged ${c.kind} is in the log`);
      if (c.status >= 500) assert.not.ok(ids.has(c.requestId), `refused ${c.kind} is not in the log`);
    }
    const reports = await db.selectFrom('reports').select(['id', 'status']).execute();
    assert.is(reports.length, 3, 'three reports recorded');
    assert.ok(
      reports.every((r) => r.status === 'done'),
      'every accepted report is done',
    );
  } finally {
    await db.destroy();
  }
});

test.run();
