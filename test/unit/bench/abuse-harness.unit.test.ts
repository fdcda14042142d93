import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { burst, percentile } from '../../helpers/burst.js';
import { holdIdleConnections } from '../../helpers/idle-connections.js';

// The abuse benchmark's counters report what happened (ops/bench/abuse/): a server's closes of
// idle connections are seen and none is invented, and every answer of a burst is counted by status.

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

const harness = suite('abuse benchmark harness');

harness('idle connections a server closes by its header timeout are counted as closed by it', async () => {
  const server = createServer({ headersTimeout: 200, requestTimeout: 1_000, connectionsCheckingInterval: 50 });
  const port = await listen(server);
  try {
    const outcome = await holdIdleConnections(port, 20, 5_000, () => {});
    assert.is(outcome.opened, 20);
    assert.is(outcome.failed, 0);
    assert.is(outcome.closed, 20);
  } finally {
    server.close();
  }
});

harness(
  'idle connections a server keeps are closed by the benchmark, none counted as closed by the server',
  async () => {
    const server = createServer();
    const port = await listen(server);
    try {
      const outcome = await holdIdleConnections(port, 20, 300, () => {});
      assert.is(outcome.opened, 20);
      assert.is(outcome.closed, 0);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  },
);

harness('a burst counts every answer by status and every byte of body', async () => {
  const server = createServer((req, res) => {
    res.statusCode = req.url === '/refused' ? 429 : 200;
    res.end('abcd');
  });
  const port = await listen(server);
  try {
    const result = await burst(`http://127.0.0.1:${port}`, 10, 3, (i) => ({ path: i % 2 ? '/refused' : '/' }));
    assert.equal(result.statuses, { 200: 5, 429: 5 });
    assert.is(result.bodyBytes, 40);
    assert.is(result.requests, 10);
  } finally {
    server.close();
  }
});

harness('percentiles are nearest-rank', () => {
  const values = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.is(percentile(values, 0.5), 50);
  assert.is(percentile(values, 0.99), 99);
  assert.is(percentile([7], 0.99), 7);
  assert.ok(Number.isNaN(percentile([], 0.5)));
});

harness.run();
