import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { DatabaseDeadlineError } from '../../../db/deadline.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';
import { startTcpRelay, type TcpRelay } from '../../helpers/tcp-relay.js';

// docs/architecture.md "Bounded work": a PostgreSQL that stops answering (frozen, or cut off without a reset)
// ends no statement_timeout. The app reaches its database through a loopback relay the test can
// freeze: bytes stop in both directions, connections stay open, as with a stopped server. Every
// request that needs the database must still be answered 503 within its deadlines, nothing
// answered "busy" may be written once the server answers again, and the service recovers.

const STATEMENT_TIMEOUT_MS = 400;
const WAIT_MS = 600;
/** The answer deadline is the statement timeout plus 1 s; a request may also wait WAIT_MS for a connection. */
const WITHIN_MS = STATEMENT_TIMEOUT_MS + 1_000 + WAIT_MS + 1_500;

let app: TestApp;
let relay: TcpRelay;
let token = '';

const Frozen = suite('a database that stops answering');

Frozen.before(async () => {
  relay = await startTcpRelay(process.env.TEST_DATABASE_URL!);
  app = await startTestApp(
    {
      DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      DATABASE_WAIT_MS: String(WAIT_MS),
      DATABASE_POOL_SIZE: '3',
    },
    'frozen-db',
    { databaseEnv: (databaseUrl) => ({ DATABASE_URL: relay.through(databaseUrl) }) },
  );
});

Frozen.after(async () => {
  relay.thaw();
  await app?.close();
  await relay.close();
});

Frozen(
  'requests in flight and new ones are answered 503 within their deadlines; nothing answered busy is written; the service recovers',
  async () => {
    token = await app.login('frida');
    const created = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'before' } });
    assert.is(created.status, 201);
    // Every pool connection open and idle in the pool.
    await Promise.all(
      Array.from({ length: 6 }, () => request(app.base, 'GET', `/api/tasks/${created.body.id}/events/`, { token })),
    );

    relay.freeze();
    const started = performance.now();
    // A request still unanswered past the bound fails the test rather than hanging it.
    const deadlineMs = WITHIN_MS;
    const answers = await Promise.all([
      ...Array.from({ length: 4 }, (_, i) =>
        request(app.base, 'POST', '/api/tasks/', {
          token,
          body: { title: `frozen ${i}` },
          headers: { 'Idempotency-Key': `frozen-${i}` },
          deadlineMs,
        }),
      ),
      request(app.base, 'PATCH', `/api/tasks/${created.body.id}/`, {
        token,
        body: { title: 'frozen patch' },
        deadlineMs,
      }),
      request(app.base, 'GET', `/api/tasks/${created.body.id}/events/`, { token, deadlineMs }),
      request(app.base, 'GET', '/api/tasks/stats/', { token, deadlineMs }),
    ]).catch((error: unknown) => {
      assert.unreachable(`a request was not answered within ${WITHIN_MS} ms: ${String(error)}`);
      throw error;
    });
    const elapsed = performance.now() - started;
    console.log(
      `# frozen database: ${answers.map((a) => a.status).join(' ')} in ${Math.round(elapsed)} ms; ${[...new Set(answers.map((a) => a.body?.detail))].join(' | ')}`,
    );
    // The writes need the database; a read may still be answered from the read cache.
    answers.forEach((answer, i) => {
      if (i >= 5 && answer.status === 200) return;
      assert.is(answer.status, 503, answer.text);
      assert.is(answer.headers.get('retry-after'), '1');
      assert.type(answer.body.detail, 'string');
    });
    assert.ok(elapsed < WITHIN_MS, `all answered within ${Math.round(elapsed)} ms (bound ${WITHIN_MS} ms)`);

    relay.thaw();
    // Whatever the relay held reaches the server now; give it a moment to act on it.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    let recovered = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'after' } });
    for (let i = 0; i < 20 && recovered.status !== 201; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      recovered = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'after' } });
    }
    assert.is(recovered.status, 201, `the service recovers: ${recovered.text}`);

    const db = connectDatabase(app.databaseUrl, 1);
    try {
      const titles = (
        await db
          .selectFrom('events')
          .select(sql<string>`data->>'title'`.as('title'))
          .execute()
      ).map((row) => row.title);
      answers.slice(0, 5).forEach((answer, i) => {
        const title = i < 4 ? `frozen ${i}` : 'frozen patch';
        // A COMMIT left in flight may still land, and says so; every other 503 wrote nothing.
        if (!/may still be made/.test(answer.body.detail))
          assert.not.ok(titles.includes(title), `"${title}" was answered ${answer.body.detail} but written`);
      });
    } finally {
      await db.destroy();
    }
    // A create repeated with its key now answers once, the same for every repeat.
    const again = await request(app.base, 'POST', '/api/tasks/', {
      token,
      body: { title: 'frozen 0' },
      headers: { 'Idempotency-Key': 'frozen-0' },
    });
    const replay = await request(app.base, 'POST', '/api/tasks/', {
      token,
      body: { title: 'frozen 0' },
      headers: { 'Idempotency-Key': 'frozen-0' },
    });
    assert.ok([200, 201].includes(again.status), again.text);
    assert.is(replay.body.id, again.body.id);
  },
);

Frozen('a COMMIT left unanswered is reported in doubt, and may still land once the server answers', async () => {
  const db = connectDatabase(relay.through(app.databaseUrl), 1, 'frozen-commit', { answerDeadlineMs: 500 });
  const witness = connectDatabase(app.databaseUrl, 1);
  try {
    await sql`CREATE TABLE IF NOT EXISTS frozen_commit (n int)`.execute(witness);
    const outcome = db
      .transaction()
      .execute(async (trx) => {
        await sql`INSERT INTO frozen_commit VALUES (1)`.execute(trx);
        // The COMMIT follows this statement; the server stops answering before it arrives.
        relay.freeze();
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    const error = await outcome;
    assert.instance(error, DatabaseDeadlineError);
    assert.ok((error as DatabaseDeadlineError).inDoubt, 'the COMMIT is in doubt');
    relay.thaw();
    // The held COMMIT reaches the server; the relay's upstream socket may be gone by then,
    // in which case PostgreSQL rolls back. Either outcome is what "in doubt" promises.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM frozen_commit`.execute(witness);
    assert.ok([0, 1].includes(rows.rows[0]!.n));
    // A query that fails the deadline before COMMIT is not in doubt: nothing of it is written.
    await sql`SELECT 1`.execute(db);
    relay.freeze();
    const plain = await sql`SELECT 1`.execute(db).then(
      () => undefined,
      (e: unknown) => e,
    );
    relay.thaw();
    assert.instance(plain, DatabaseDeadlineError);
    assert.not.ok((plain as DatabaseDeadlineError).inDoubt);
  } finally {
    relay.thaw();
    await db.destroy();
    await sql`DROP TABLE IF EXISTS frozen_commit`.execute(witness);
    await witness.destroy();
  }
});

Frozen.run();
