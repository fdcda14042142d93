import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { answerClientErrors } from '../../../src/server/client-errors.js';
import { holdConnection } from '../../helpers/held-connection.js';

// docs/security.md "Slow clients": the JSON answer to a request Node's parser times out is the
// last thing on its connection, whatever the client does next. Node's own timeouts only (no
// per-connection deadline beside them), on a bare server with the API's error answers.

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 3_000;
/** Past every timeout of the server, twice over: a connection still open then is open for good. */
const GIVE_UP_MS = 3 * REQUEST_TIMEOUT_MS;
const HEAD = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${'a'.repeat(200)}`;

const test = suite<{ server: Server; port: number }>('a client error answer ends its connection');

test.before(async (ctx) => {
  ctx.server = createServer({
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionsCheckingInterval: HEADERS_TIMEOUT_MS / 4,
  });
  answerClientErrors(ctx.server);
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  ctx.port = (ctx.server.address() as AddressInfo).port;
});

test.after(({ server }) => {
  server.closeAllConnections();
  server.close();
});

test('a trickling client that ignores the 408 and keeps sending is disconnected', async ({ port }) => {
  const held = await holdConnection(port, { text: HEAD, dripEveryMs: 200, ignoreEnd: true, giveUpMs: GIVE_UP_MS });
  assert.match(held.answer, /^HTTP\/1\.1 408 /);
  assert.ok(held.closedAfterMs < GIVE_UP_MS, `still open after ${held.closedAfterMs} ms`);
});

test('a trickling client that reads the 408 sees the connection closed', async ({ port }) => {
  const held = await holdConnection(port, { text: HEAD, dripEveryMs: 200, giveUpMs: GIVE_UP_MS });
  assert.match(held.answer, /^HTTP\/1\.1 408 /);
  assert.ok(held.closedAfterMs < GIVE_UP_MS, `still open after ${held.closedAfterMs} ms`);
});

test.run();
