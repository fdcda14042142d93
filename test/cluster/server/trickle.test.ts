import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { holdConnection, type HeldOutcome } from '../../helpers/held-connection.js';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';

// docs/security.md "Slow clients" on the real entry point with two web workers: a client that
// trickles a request's headers a byte at a time is answered 408 and closed once
// HTTP_HEADERS_TIMEOUT_MS has passed, every time, on a fresh host and on one that has served
// logins, a task's creation and deletion and probes in between (the sequence that once left all
// of them open), including clients that ignore the answer and keep sending.

const HEADERS_TIMEOUT_MS = 1_000;
/** Node checks the limit every HEADERS_TIMEOUT_MS / 4; the rest is room for a loaded machine. */
const MARGIN_MS = 4_000;
const TRICKLERS = 40;
const ROUNDS = 6;
const GIVE_UP_MS = 20_000;

const test = suite('trickling connections are always closed');
let cluster: RunningCluster;
let dropDatabase: () => Promise<void> = async () => {};
let token = '';

/**
 * Opens a connection that sends a request's head one byte every 200 ms; resolves when the server
 * closes it. With `ignoreEnd`, the client ignores the answer's end and goes on sending.
 */
function trickle(port: number, ignoreEnd: boolean): Promise<HeldOutcome> {
  const head = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${'a'.repeat(200)}`;
  return holdConnection(port, { text: head, dripEveryMs: 200, ignoreEnd, giveUpMs: GIVE_UP_MS });
}

/** Login attempts from `count` distinct addresses, a task created and deleted: what the host did before trickling. */
async function serveTraffic(round: number, count: number): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, (_, i) =>
      request(cluster.base, 'POST', '/api/auth/token/', {
        headers: { 'X-Forwarded-For': `10.${round}.${i >> 8}.${i & 255}` },
        body: { username: `nobody-${round}-${i}`, password: 'not-a-password' },
      }),
    ),
  );
  const created = await request(cluster.base, 'POST', '/api/tasks/', { token, body: { title: `round ${round}` } });
  assert.is(created.status, 201, created.text);
  const deleted = await request(cluster.base, 'DELETE', `/api/tasks/${created.body.id}/`, { token });
  assert.is(deleted.status, 204, deleted.text);
}

async function trickleRound(label: string): Promise<void> {
  // One in four ignores the server's end of the stream and keeps sending: the server must close those itself.
  const trickling = Array.from({ length: TRICKLERS }, (_, i) => trickle(cluster.port, i % 4 === 0));
  const probes = await Promise.all(Array.from({ length: 10 }, () => request(cluster.base, 'GET', '/healthz')));
  assert.ok(
    probes.every((p) => p.status === 200),
    `${label}: /healthz answered while trickling`,
  );
  const results = await Promise.all(trickling);
  const late = results.filter((r) => r.closedAfterMs > HEADERS_TIMEOUT_MS + MARGIN_MS);
  assert.is(late.length, 0, `${label}: ${late.length} of ${TRICKLERS} left open past the limit`);
  const timedOut = results.filter((r) => r.answer.startsWith('HTTP/1.1 408')).length;
  assert.is(timedOut, TRICKLERS, `${label}: every trickling connection answered 408`);
}

test.before(async () => {
  const database = await createTestDatabase('trickle');
  dropDatabase = database.drop;
  cluster = await startCluster({
    ...testStoresEnv('trickle', database.url),
    WEB_CONCURRENCY: '2',
    HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    HTTP_REQUEST_TIMEOUT_MS: '5000',
    TRUST_PROXY_HOPS: '1',
    TRUSTED_PROXIES: '127.0.0.1',
    THROTTLE_USER: '10000/min',
    THROTTLE_ANON: '10000/min',
  });
  const db = connectDatabase(database.url, 1);
  await createUser(db, 'trickle', 'trickle-password');
  await db.destroy();
  const login = await request(cluster.base, 'POST', '/api/auth/token/', {
    body: { username: 'trickle', password: 'trickle-password' },
  });
  token = login.body.token;
});

test.after(async () => {
  await cluster?.stop();
  await dropDatabase();
});

test('on a fresh host, every trickling connection is answered 408 and closed within the headers timeout', async () => {
  await trickleRound('fresh');
});

test(`after logins, a task created and deleted, ${ROUNDS} rounds in a row: every one closed every time`, async () => {
  for (let round = 1; round <= ROUNDS; round += 1) {
    await serveTraffic(round, 20);
    await trickleRound(`round ${round}`);
  }
});

test.run();
