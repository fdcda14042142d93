import { Writable } from 'node:stream';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readyBanner } from '../../src/cluster/primary.js';
import { loadConfig } from '../../src/config.js';
import { createLogger, formatLine } from '../../src/logger.js';
import { requestContext } from '../../src/http/request-context.middleware.js';
import { createMetrics } from '../../src/metrics.js';

/** A logger at `level` whose JSON lines are collected. */
function collecting(level = 'debug') {
  const lines: Array<{ level: number; route: string; status: number }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

async function serve(middleware: ReturnType<typeof requestContext>, path: string, status: number) {
  const ctx = { get: () => '', set: () => {}, state: {}, method: 'GET', status: 404, _matchedRoute: path } as never;
  await middleware(ctx, async () => {
    (ctx as { status: number }).status = status;
  });
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

test('health and readiness probes are logged at debug, other requests at info', async () => {
  const { logger, lines } = collecting();
  const middleware = requestContext(logger, createMetrics(), 'all');
  await serve(middleware, '/healthz', 200);
  await serve(middleware, '/readyz', 200);
  await serve(middleware, '/readyz', 503);
  await serve(middleware, '/api/tasks/', 200);
  await flush();
  assert.equal(
    lines.map((line) => [line.route, line.status, line.level]),
    [
      ['/healthz', 200, 20],
      ['/readyz', 200, 20],
      ['/readyz', 503, 30],
      ['/api/tasks/', 200, 30],
    ],
  );
});

test('ACCESS_LOG=errors logs only 4xx and 5xx; off logs nothing; anything else is refused', async () => {
  for (const [mode, expected] of [
    ['errors', [404, 500]],
    ['off', []],
  ] as const) {
    const { logger, lines } = collecting();
    const middleware = requestContext(logger, createMetrics(), loadConfig({ ACCESS_LOG: mode }).ACCESS_LOG);
    for (const status of [200, 304, 404, 500]) await serve(middleware, '/api/tasks/', status);
    await flush();
    assert.equal(
      lines.map((line) => line.status),
      [...expected],
      mode,
    );
  }
  assert.is(loadConfig({}).ACCESS_LOG, 'all');
  assert.throws(() => loadConfig({ ACCESS_LOG: 'some' }), /^invalid ACCESS_LOG="some"/);
});

test('on a terminal, lines are short and readable; otherwise JSON', () => {
  const line = formatLine(
    JSON.stringify({
      level: 30,
      time: '2026-11-26T12:00:01.123Z',
      pid: 42,
      role: 'web',
      msg: 'request',
      method: 'GET',
      status: 200,
    }),
  );
  assert.is(line, '12:00:01 INFO  web#42 request method=GET status=200\n');
  assert.is(createLogger({ LOG_LEVEL: 'info' }, 'web', false).level, 'info');
});

test('the ready banner names the API root, the metrics and the next command', () => {
  const banner = readyBanner({ PORT: 8000, METRICS_PORT: 9464 });
  assert.match(banner, 'http://127.0.0.1:8000/api/ ');
  assert.match(banner, 'http://127.0.0.1:9464/metrics');
  assert.match(banner, 'npm run cli -- user:create NAME');
});

test.run();
