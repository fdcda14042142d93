import { connect, type Socket } from 'node:net';
import { sql } from 'kysely';
import pg from 'pg';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { APPEND_LOCK } from '../../../src/events/store/append-batch.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';

const STATEMENT_TIMEOUT_MS = 400;
const WAIT_MS = 600;
const HEADERS_TIMEOUT_MS = 1_500;
const MAX_CONNECTIONS = 30;

let app: TestApp;
let token: string;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A connection of its own to the app's database, outside the app's pool. */
async function otherConnection(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: app.databaseUrl });
  await client.connect();
  return client;
}

/** A request and how long its answer took. */
async function timed(method: string, path: string, body?: unknown) {
  const started = performance.now();
  const response = await request(app.base, method, path, { token, body });
  return { ...response, ms: performance.now() - started };
}

function assertUnavailable(response: Awaited<ReturnType<typeof timed>>, within: number, label: string) {
  assert.is(response.status, 503, `${label}: ${response.status} ${response.text}`);
  assert.is(response.headers.get('retry-after'), '1', label);
  assert.match(response.headers.get('content-type') ?? '', /json/, label);
  assert.type(response.body.detail, 'string', label);
  assert.ok(response.ms < within, `${label}: answered after ${Math.round(response.ms)} ms`);
}

const Bounded = suite('every database wait has a deadline, and the HTTP server its limits');

Bounded.before(async () => {
  app = await startTestApp(
    {
      DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      DATABASE_WAIT_MS: String(WAIT_MS),
      DATABASE_POOL_SIZE: '3',
      HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      HTTP_REQUEST_TIMEOUT_MS: '3000',
      HTTP_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
    },
    'bounded-work',
  );
  token = await app.login('alice');
  assert.is((await timed('POST', '/api/tasks/', { title: 'Before' })).status, 201);
});
Bounded.after(() => app.close());

Bounded(
  'a statement cancelled by statement_timeout is 503 + Retry-After, and the service answers afterwards',
  async () => {
    const holder = await otherConnection();
    try {
      await holder.query('begin');
      await holder.query('lock table tasks in access exclusive mode');
      // A URL no earlier request read, so no kept answer can serve it.
      const response = await timed('GET', '/api/tasks/?page_size=7');
      assertUnavailable(response, STATEMENT_TIMEOUT_MS + 1_500, 'read behind a table lock');
      await holder.query('rollback');
    } finally {
      await holder.end();
    }
    const after = await timed('GET', '/api/tasks/?page_size=7');
    assert.is(after.status, 200);
    assert.is(after.body.count, 1);
  },
);

Bounded('no pool connection within DATABASE_WAIT_MS is 503, and the service answers afterwards', async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  // Hold every connection of the app's pool (DATABASE_POOL_SIZE=3).
  const holders = Array.from({ length: 3 }, () =>
    app.deps.db.connection().execute(async () => {
      held += 1;
      await released;
    }),
  );
  while (held < 3) await sleep(5);
  try {
    const response = await timed('GET', '/api/tasks/?page_size=8');
    assertUnavailable(response, WAIT_MS + 1_500, 'read without a free connection');
    assert.ok(response.ms >= WAIT_MS - 50, `answered after ${Math.round(response.ms)} ms, before the deadline`);
  } finally {
    release();
    await Promise.all(holders);
  }
  assert.is((await timed('GET', '/api/tasks/?page_size=8')).status, 200);
});

Bounded('writes stuck behind the append lock are 503 within the deadline and are never appended', async () => {
  const holder = await otherConnection();
  const before = await app.deps.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  try {
    await holder.query('select pg_advisory_lock($1)', [APPEND_LOCK]);
    // The first goes into a batch waiting for the lock; the ones after it wait in the queue.
    const first = timed('POST', '/api/tasks/', { title: 'Blocked 1' });
    await sleep(50);
    const others = [2, 3, 4].map((n) => timed('POST', '/api/tasks/', { title: `Blocked ${n}` }));
    const answers = await Promise.all([first, ...others]);
    answers.forEach((response, i) => assertUnavailable(response, WAIT_MS + 1_500, `write ${i + 1}`));
    // A delete of an existing task, stuck the same way.
    assertUnavailable(await timed('DELETE', '/api/tasks/1/'), WAIT_MS + 1_500, 'delete');
  } finally {
    await holder.query('select pg_advisory_unlock($1)', [APPEND_LOCK]);
    await holder.end();
  }
  // Whatever was still on its way has had time to run.
  await sleep(300);
  const blocked = await sql<{
    n: number;
  }>`select count(*)::int as n from events where data->>'title' like 'Blocked%'`.execute(app.deps.db);
  assert.is(blocked.rows[0]!.n, 0, 'no write answered 503 was appended');
  const after = await app.deps.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  assert.is(Number(after.n), Number(before.n));
  assert.is((await timed('GET', '/api/tasks/1/')).status, 200, 'the delete answered 503 did not happen');
  const created = await timed('POST', '/api/tasks/', { title: 'After' });
  assert.is(created.status, 201, created.text);
  assert.is(created.body.id, 2, 'ids stay without gaps');
});

Bounded(
  'a connection trickling its headers is closed within the headers timeout; others are served meanwhile',
  async () => {
    const socket = connect(Number(new URL(app.base).port), '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const started = performance.now();
    let received = '';
    socket.on('data', (chunk) => (received += chunk));
    socket.on('error', () => {});
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - started)));
    const header = 'GET /api/ HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(60);
    let sent = 1;
    const trickle = setInterval(() => {
      if (socket.destroyed) return;
      socket.write(header[sent % header.length]!);
      sent += 1;
    }, 1_000);
    socket.write(header[0]!);
    try {
      // Meanwhile another client is served as usual.
      for (let i = 0; i < 3; i++) {
        const served = await timed('GET', '/api/');
        assert.is(served.status, 200);
        assert.ok(served.ms < 500);
        await sleep(300);
      }
      const ms = await closed;
      assert.ok(ms >= HEADERS_TIMEOUT_MS - 100, `closed after ${Math.round(ms)} ms`);
      assert.ok(ms < HEADERS_TIMEOUT_MS + 1_200, `closed after ${Math.round(ms)} ms`);
      assert.match(received, /^HTTP\/1\.1 408 /);
      assert.match(received, /"detail":"Request timeout\."/);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  },
);

Bounded(
  "a body the client abandons is counted and logged as the client's failure, never as the database's 503",
  async () => {
    const counted = async (status: string) =>
      sumOf(parseMetrics(await app.deps.metrics.registry.metrics()), 'paceline_http_requests_total', {
        method: 'POST',
        route: '/api/auth/token/',
        status,
      });
    const [before400, before503] = [await counted('400'), await counted('503')];
    const socket = connect(Number(new URL(app.base).port), '127.0.0.1');
    socket.on('error', () => {});
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(
      'POST /api/auth/token/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user',
    );
    await sleep(200);
    socket.destroy();
    const deadline = Date.now() + 5_000;
    while ((await counted('400')) === before400 && Date.now() < deadline) await sleep(50);
    assert.is(await counted('400'), before400 + 1, 'the abandoned request is counted as a 400');
    assert.is(await counted('503'), before503, 'and not as a 503');
  },
);

Bounded(
  'connections over HTTP_MAX_CONNECTIONS are closed as they are accepted; the service answers afterwards',
  async () => {
    const sockets: Socket[] = [];
    const outcomes = await Promise.all(
      Array.from({ length: MAX_CONNECTIONS + 10 }, async () => {
        const socket = connect(Number(new URL(app.base).port), '127.0.0.1');
        sockets.push(socket);
        socket.on('error', () => {});
        let text = '';
        socket.on('data', (chunk) => (text += chunk));
        // Listened to from the start: a connection over the cap is closed as soon as it is accepted.
        const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
        await sleep(200);
        if (!socket.destroyed) socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', () => {});
        await Promise.race([ended, sleep(1_500)]);
        return text.includes('\r\n\r\n') ? ('answered' as const) : ('closed' as const);
      }),
    );
    const answered = outcomes.filter((o) => o === 'answered').length;
    assert.ok(answered <= MAX_CONNECTIONS && answered > 0, `${answered} answered`);
    assert.ok(outcomes.length - answered >= 10, `${outcomes.length - answered} closed`);
    for (const socket of sockets) socket.destroy();
    await sleep(100);
    assert.is((await timed('GET', '/api/')).status, 200);
  },
);

Bounded.run();
