import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { holdConnection, type HeldOutcome } from '../../helpers/held-connection.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';

// docs/configuration.md "Metrics" on the real entry point: the primary's metrics port is no way
// in. A scrape without METRICS_AUTH's credentials gets 401 and no metrics; idle and half-sent
// connections are closed once METRICS_HEADERS_TIMEOUT_MS has passed, those past
// METRICS_MAX_CONNECTIONS at once; and the API answers throughout.

const TOKEN = 'scrape-token-0123456789abcdef';
const HEADERS_TIMEOUT_MS = 1_000;
const MAX_CONNECTIONS = 20;
const IDLE = 300;
/** Room for a loaded machine on top of the limit; a connection still open at GIVE_UP_MS fails the test. */
const MARGIN_MS = 4_000;
const GIVE_UP_MS = 20_000;

const test = suite('metrics port');
let cluster: RunningCluster;
let dropDatabase: () => Promise<void> = async () => {};

/** Opens a connection that sends `send` (nothing: idle) and resolves when the server closes it. */
function hold(port: number, send = ''): Promise<HeldOutcome> {
  return holdConnection(port, { text: send, giveUpMs: GIVE_UP_MS });
}

test.before(async () => {
  const database = await createTestDatabase('metrics_port');
  dropDatabase = database.drop;
  cluster = await startCluster({
    ...testStoresEnv('metrics-port', database.url),
    WEB_CONCURRENCY: '2',
    METRICS_AUTH: `bearer:${TOKEN}`,
    METRICS_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    METRICS_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
  });
});

test.after(async () => {
  await cluster?.stop();
  await dropDatabase();
});

test('a scrape without the configured credentials gets 401 with WWW-Authenticate and no metrics', async () => {
  const attempts: Array<Record<string, string>> = [
    {},
    { Authorization: 'Bearer wrong' },
    { Authorization: `Basic ${TOKEN}` },
  ];
  for (const headers of attempts) {
    const answer = await request(cluster.metricsBase, 'GET', '/metrics', { headers, deadlineMs: 30_000 });
    assert.is(answer.status, 401, JSON.stringify(headers));
    assert.is(answer.headers.get('www-authenticate'), 'Bearer realm="metrics"');
    assert.not.match(answer.text, /paceline_/);
  }
  const other = await request(cluster.metricsBase, 'GET', '/anything', { deadlineMs: 30_000 });
  assert.is(other.status, 401, 'nothing on the port answers without credentials');
});

test('with the token, as Prometheus sends it, the scrape gets the metrics', async () => {
  const answer = await request(cluster.metricsBase, 'GET', '/metrics', {
    headers: { Authorization: `Bearer ${TOKEN}` },
    deadlineMs: 30_000,
  });
  assert.is(answer.status, 200);
  assert.match(answer.text, /paceline_worker_restarts_total/);
});

test('/metrics takes GET and HEAD: another method is 405 with Allow, another path 404; the API port has no /metrics', async () => {
  const scrape = (method: string, path = '/metrics') =>
    request(cluster.metricsBase, method, path, { headers: { Authorization: `Bearer ${TOKEN}` }, deadlineMs: 30_000 });
  for (const method of ['POST', 'PUT', 'DELETE']) {
    const answer = await scrape(method);
    assert.is(answer.status, 405, `${method}: ${answer.text}`);
    assert.is(answer.headers.get('allow'), 'GET, HEAD', method);
    assert.is(answer.text, `Method ${method} not allowed: /metrics answers GET and HEAD\n`);
  }
  const head = await scrape('HEAD');
  assert.equal([head.status, head.text], [200, '']);
  assert.match(head.headers.get('content-type') ?? '', /^text\/plain/);
  const elsewhere = await scrape('POST', '/other');
  assert.equal([elsewhere.status, elsewhere.text], [404, 'Not found: metrics are at /metrics\n']);
  // On the API port /metrics is no resource, whatever the method: DRF's 404, as for any unknown path.
  for (const method of ['GET', 'POST']) {
    const api = await request(cluster.base, method, '/metrics', { deadlineMs: 30_000 });
    assert.equal([api.status, api.body], [404, { detail: 'Not found.' }], method);
  }
});

test(`${IDLE} idle and half-sent connections are all closed within the headers timeout; the API answers meanwhile`, async () => {
  const held = Array.from({ length: IDLE }, (_, i) =>
    hold(cluster.metricsPort, i % 2 === 0 ? '' : 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n'),
  );
  const api = await Promise.all(Array.from({ length: 20 }, () => request(cluster.base, 'GET', '/healthz')));
  assert.ok(
    api.every((answer) => answer.status === 200),
    'the API answered while the metrics port was flooded',
  );
  const results = await Promise.all(held);
  const late = results.filter((r) => r.closedAfterMs > HEADERS_TIMEOUT_MS + MARGIN_MS);
  assert.is(late.length, 0, `${late.length} of ${IDLE} stayed open past the limit`);
  // Those past the cap were closed as they were accepted, with no answer; those held got 408.
  const refused = results.filter((r) => r.answer === '').length;
  assert.ok(refused >= IDLE - MAX_CONNECTIONS, `${refused} closed unanswered, past the cap of ${MAX_CONNECTIONS}`);
  const scrape = await request(cluster.metricsBase, 'GET', '/metrics', {
    headers: { Authorization: `Bearer ${TOKEN}` },
    deadlineMs: 30_000,
  });
  assert.is(scrape.status, 200, 'the port serves scrapes again once they are gone');
});

test.run();
