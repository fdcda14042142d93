import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { migrateToLatest } from '../../../db/migrate.js';
import { childPids, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';
import type { RunningService } from '../../../src/embedded/service.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { request } from '../../helpers/http.js';

// PostgreSQL killed (SIGKILL of the postmaster) under a mixed load of reads and writes, and
// brought back on the same data directory and port (docs/security.md "Outages"). While it is down every
// request is answered promptly: 503 with Retry-After and a JSON detail, or a read the read cache
// can prove current (docs/architecture.md "Read cache"), which must then be exact. Once it is back
// the same worker processes serve again. Nothing acknowledged is lost, nothing refused is written,
// and a create retried with its Idempotency-Key after an unclear end happened exactly once.

const test = suite('PostgreSQL killed under load');
const scratch = process.env.TEST_TMP_DIR ?? '/tmp';
const pgDir = join(scratch, 'outage-pg');
const DATABASE_WAIT_MS = 1_000;
/** A request still unanswered after this is a hang (the client gives up on it). */
const CLIENT_DEADLINE_MS = 15_000;
/** Generous bound on an answer during the outage: the server's own deadlines are ~1-2 s. */
const OUTAGE_ANSWER_BOUND_MS = 8_000;

let pgPort = 0;
let postgres: RunningService | undefined;
let cluster: RunningCluster | undefined;
let databaseUrl = '';
let token = '';

interface Call {
  kind: 'list' | 'detail' | 'create' | 'change' | 'delete';
  path: string;
  requestId: string;
  key?: string;
  sentAt: number;
  ms: number;
  /** 0: no answer within CLIENT_DEADLINE_MS (or the connection failed). */
  status: number;
  retryAfter: string | null;
  body: any;
}

const calls: Call[] = [];
let killedAt = Infinity;
let restartedAt = Infinity;

async function call(kind: Call['kind'], method: string, path: string, body?: unknown, key?: string): Promise<Call> {
  const requestId = randomUUID();
  const headers: Record<string, string> = { 'X-Request-Id': requestId, ...(key ? { 'Idempotency-Key': key } : {}) };
  const sentAt = Date.now();
  const record: Call = { kind, path, requestId, key, sentAt, ms: 0, status: 0, retryAfter: null, body: null };
  const answer = await request(cluster!.base, method, path, {
    token,
    body,
    headers,
    deadlineMs: CLIENT_DEADLINE_MS,
  }).catch(() => undefined);
  if (answer)
    Object.assign(record, { status: answer.status, retryAfter: answer.headers.get('retry-after'), body: answer.body });
  record.ms = Date.now() - sentAt;
  calls.push(record);
  return record;
}

/** A create, retried with the same Idempotency-Key while its outcome is unclear (no answer). */
async function create(n: number): Promise<number | undefined> {
  const key = `outage-${randomUUID()}`;
  for (let attempt = 0; attempt < 5; attempt++) {
    const answer = await call('create', 'POST', '/api/tasks/', { title: `task ${n}` }, key);
    if (answer.status !== 0) return answer.status === 201 ? answer.body.id : undefined;
  }
  return undefined;
}

/** One client: lists, a detail, creates, changes and deletes of its own tasks, until `stop()`. */
async function client(index: number, stopped: () => boolean): Promise<void> {
  const mine: number[] = [];
  for (let step = 0; !stopped(); step++) {
    const roll = (step * 7 + index * 3) % 10;
    if (roll < 3) await call('list', 'GET', '/api/tasks/?ordering=-id');
    else if (roll === 3) await call('list', 'GET', '/api/tasks/?ordering=-id&limit=5');
    else if (roll === 4 && mine.length > 0) await call('detail', 'GET', `/api/tasks/${mine.at(-1)}/`);
    else if (roll <= 6 || mine.length < 2) {
      const id = await create(step * 10 + index);
      if (id !== undefined) mine.push(id);
    } else if (roll <= 8)
      await call('change', 'PATCH', `/api/tasks/${mine.at(-1)}/`, {
        title: `changed ${step}`,
        completed: step % 2 === 0,
      });
    else {
      const answer = await call('delete', 'DELETE', `/api/tasks/${mine[0]}/`);
      if (answer.status === 204 || answer.status === 404) mine.shift();
    }
    await sleep(20);
  }
}

/** The primary's children that run the entry point (not, say, a compiler service). */
function workers(): number[] {
  return childPids(cluster!.child.pid!)
    .filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('main'))
    .sort((a, b) => a - b);
}

async function untilWorkers(count: number): Promise<number[]> {
  const deadline = Date.now() + 30_000;
  while (workers().length < count && Date.now() < deadline) await sleep(200);
  assert.is(workers().length, count, 'two web children and a jobs child');
  await sleep(1_000); // the jobs child's processors start after its fork
  return workers();
}

async function postmasterPid(): Promise<number> {
  return Number((await readFile(join(pgDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

async function startPostgres(): Promise<RunningService> {
  // The killed server's backends notice and exit on their own; until then the port or its shared
  // memory may still be held, so a start is retried for a while.
  for (let attempt = 1; ; attempt++) {
    try {
      // persistent: fsync and synchronous_commit on, as npm start runs it; a throwaway server's
      // asynchronous commit would lose acknowledged commits still in the killed server's WAL buffers.
      return await startEmbeddedPostgres({
        dataDir: pgDir,
        port: pgPort,
        persistent: true,
        database: 'outage',
        onUnexpectedExit: () => {},
      });
    } catch (error) {
      if (attempt >= 10) throw error;
      await sleep(1_000);
    }
  }
}

test.before(async () => {
  pgPort = await findFreePort();
  postgres = await startPostgres();
  databaseUrl = postgres.url;
  const db = connectDatabase(databaseUrl, 1);
  await migrateToLatest(db);
  const user = await createUser(db, 'olive', 'olive-pass-123');
  if (!user.ok) throw new Error('could not create olive');
  token = (await issueToken(db, 'olive', 'olive-pass-123', 3_600_000, new Date()))!.token;
  await db.destroy();
  cluster = await startCluster({
    ...testStoresEnv('outage-pg', databaseUrl),
    WEB_CONCURRENCY: '2',
    JOB_CONCURRENCY: '1',
    THROTTLE_USER: '100000/min',
    DATABASE_WAIT_MS: String(DATABASE_WAIT_MS),
    DATABASE_STATEMENT_TIMEOUT_MS: '2000',
    READ_MODEL_POLL_MS: '100',
  });
});

test.after(async () => {
  await cluster?.stop();
  await postgres?.stop();
});

test('answers promptly while PostgreSQL is down, recovers in the same processes, loses and invents nothing', async () => {
  const workersBefore = await untilWorkers(3);
  let stop = false;
  const clients = [0, 1, 2, 3].map((index) => client(index, () => stop));

  await sleep(3_000);
  const pid = await postmasterPid();
  killedAt = Date.now();
  process.kill(pid, 'SIGKILL');
  await sleep(5_000);
  restartedAt = Date.now();
  postgres = await startPostgres();

  // Recovery: a create and a list answered by PostgreSQL again, within a bounded wait.
  const deadline = Date.now() + 30_000;
  let recovered = false;
  while (!recovered && Date.now() < deadline) {
    const created = await call('create', 'POST', '/api/tasks/', { title: 'after' }, `outage-after-${randomUUID()}`);
    const listed = await call('list', 'GET', '/api/tasks/?ordering=-id&limit=3');
    recovered = created.status === 201 && listed.status === 200 && listed.body.results[0]?.id === created.body.id;
    if (!recovered) await sleep(250);
  }
  assert.ok(recovered, 'the service answers writes and reads again after PostgreSQL is back');
  await sleep(2_000);
  stop = true;
  await Promise.all(clients);

  assert.equal(workers(), workersBefore, 'no child was restarted');
  assert.not.match(cluster!.output(), /"level":50.*request failed/, 'no request failed with an unexpected error');

  // No 5xx other than 503, none without Retry-After and a detail, and no request hung.
  const hung = calls.filter((c) => c.status === 0);
  assert.is(
    hung.length,
    0,
    `requests with no answer within ${CLIENT_DEADLINE_MS} ms: ${hung.map((c) => `${c.kind} ${c.ms}ms`).join(', ')}`,
  );
  const bad = calls.filter(
    (c) => c.status >= 500 && !(c.status === 503 && Number(c.retryAfter) > 0 && typeof c.body?.detail === 'string'),
  );
  assert.is(
    bad.length,
    0,
    `5xx answers other than a 503 with Retry-After and a detail: ${JSON.stringify(bad.slice(0, 3))}`,
  );
  const during = calls.filter((c) => c.sentAt > killedAt + 200 && c.sentAt + c.ms < restartedAt);
  const refused = during.filter((c) => c.status === 503);
  assert.ok(refused.length >= 5, `requests during the outage were refused (${refused.length} of ${during.length})`);
  const slow = refused.filter((c) => c.ms > OUTAGE_ANSWER_BOUND_MS);
  assert.is(slow.length, 0, `503s slower than ${OUTAGE_ANSWER_BOUND_MS} ms: ${slow.map((c) => c.ms).join(', ')}`);
  assert.is(
    during.filter((c) => c.kind !== 'list' && c.kind !== 'detail' && c.status < 300).length,
    0,
    'no write acknowledged while PostgreSQL was down',
  );

  const db = connectDatabase(databaseUrl, 1);
  try {
    const events = (
      await sql<{
        position: number;
        stream_id: number;
        version: number;
        type: string;
        data: any;
        request_id: string | null;
      }>`
      select position, stream_id, version, type, data, metadata->>'request_id' as request_id from events order by position`.execute(
        db,
      )
    ).rows;
    const byRequest = new Map<string, typeof events>();
    for (const event of events)
      if (event.request_id) byRequest.set(event.request_id, [...(byRequest.get(event.request_id) ?? []), event]);

    // Every acknowledged change and delete is in the log; no refused write is.
    const writes = calls.filter((c) => c.kind === 'change' || c.kind === 'delete');
    for (const c of writes.filter((c) => c.status === 200 || c.status === 204))
      assert.ok(
        byRequest.has(c.requestId),
        `acknowledged ${c.kind} ${c.path} is in the log: ${JSON.stringify(calls.filter((d) => d.path === c.path && d.kind !== 'list'))} ${JSON.stringify(events.filter((e) => String(e.stream_id) === c.path.split('/')[3]))}`,
      );
    const failedWrites = calls.filter((c) => c.kind !== 'list' && c.kind !== 'detail' && c.status >= 500);
    assert.ok(failedWrites.length > 0, 'some writes were refused during the outage');
    for (const c of failedWrites)
      assert.not.ok(byRequest.has(c.requestId), `refused ${c.kind} ${c.path} (${c.status}) was not written`);

    // Creates, by Idempotency-Key: created exactly once when acknowledged, never when refused.
    const attempts = new Map<string, Call[]>();
    for (const c of calls.filter((c) => c.kind === 'create'))
      attempts.set(c.key!, [...(attempts.get(c.key!) ?? []), c]);
    for (const [key, tries] of attempts) {
      const created = tries.flatMap((c) => byRequest.get(c.requestId) ?? []).filter((e) => e.type === 'TaskCreated');
      const acknowledged = tries.filter((c) => c.status === 201);
      if (acknowledged.length > 0) {
        assert.is(
          created.length,
          1,
          `key ${key} created exactly once: ${JSON.stringify(tries)} ${JSON.stringify(events.filter((e) => e.stream_id === acknowledged[0]!.body.id))} killed ${killedAt} restarted ${restartedAt}`,
        );
        for (const c of acknowledged) assert.is(c.body.id, created[0]!.stream_id, `key ${key} answered its task`);
      } else if (tries.every((c) => c.status >= 400))
        assert.is(created.length, 0, `key ${key}, refused every time, created nothing`);
    }

    // Reads answered while PostgreSQL was down came from the read cache: each must equal the
    // store as it was after every write acknowledged before the read was sent.
    const lastAckedBefore = (time: number) =>
      Math.max(
        0,
        ...calls
          .filter(
            (c) => c.kind !== 'list' && c.kind !== 'detail' && c.status < 300 && c.status > 0 && c.sentAt + c.ms < time,
          )
          .flatMap((c) => byRequest.get(c.requestId) ?? [])
          .map((e) => e.position),
      );
    const served = during.filter((c) => (c.kind === 'list' || c.kind === 'detail') && c.status === 200);
    for (const read of served) {
      const floor = lastAckedBefore(read.sentAt);
      const ok = events.some((e) => e.position >= floor && sameAsStoreAt(read, events, e.position));
      assert.ok(
        ok,
        `${read.path} served during the outage matches the store at or after position ${floor}: ${JSON.stringify(read.body).slice(0, 300)}`,
      );
    }
  } finally {
    await db.destroy();
  }
});

interface Folded {
  title: string;
  version: number;
  completed: boolean;
}

/** Whether `read`'s answer is what the events up to `position` make of the tasks. */
function sameAsStoreAt(
  read: Call,
  events: ReadonlyArray<{ position: number; stream_id: number; version: number; type: string; data: any }>,
  position: number,
): boolean {
  const tasks = new Map<number, Folded>();
  for (const e of events) {
    if (e.position > position) break;
    if (e.type === 'TaskDeleted') tasks.delete(e.stream_id);
    else
      tasks.set(e.stream_id, {
        ...(tasks.get(e.stream_id) ?? { title: '', completed: false }),
        ...e.data,
        ...completion(e.type),
        version: e.version,
      });
  }
  const show = (id: number, t: Folded) => `${id}:${t.title}:${t.version}:${t.completed}`;
  if (read.kind === 'detail') {
    const id = Number(read.path.split('/')[3]);
    const task = tasks.get(id);
    return task !== undefined && show(id, task) === show(read.body.id, read.body);
  }
  const ids = [...tasks.keys()]
    .sort((a, b) => b - a)
    .slice(0, read.body.results.length === 5 || read.path.includes('limit=5') ? 5 : 10);
  const want = ids.map((id) => show(id, tasks.get(id)!)).join(',');
  const got = read.body.results.map((t: Folded & { id: number }) => show(t.id, t)).join(',');
  return read.body.count === tasks.size && got === want;
}

function completion(type: string): Partial<Folded> {
  if (type === 'TaskCompleted') return { completed: true };
  if (type === 'TaskReopened') return { completed: false };
  return {};
}

test.run();
