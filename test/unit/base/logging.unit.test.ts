import { Writable } from 'node:stream';
import { stripVTControlCharacters } from 'node:util';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { degradedBanner, readyBanner } from '../../../src/cluster/ready-banner.js';
import { loadConfig } from '../../../src/settings/config.js';
import { announce, createLogger, readableLines } from '../../../src/base/logger.js';
import { requestContext } from '../../../src/edge/request-context.js';
import { createMetrics } from '../../../src/base/metrics.js';

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
  const ctx = { get: () => '', set: () => {}, state: {}, method: 'GET', status: 404, routerPath: path } as never;
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

test("on a terminal, lines are pino-pretty's, one per record; otherwise JSON", async () => {
  let text = '';
  const screen = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = pino(
    { base: { pid: 42, role: 'web' }, timestamp: pino.stdTimeFunctions.isoTime },
    readableLines(screen),
  );
  logger.info({ method: 'GET', status: 200 }, 'request');
  logger.warn('slow');
  await flush();
  assert.match(
    stripVTControlCharacters(text),
    /^\[\d\d:\d\d:\d\d\] INFO \(42\): web request \{"method":"GET","status":200\}\n\[\d\d:\d\d:\d\d\] WARN \(42\): web slow\n$/,
  );
  assert.is(createLogger({ LOG_LEVEL: 'info' }, 'web', false).level, 'info');
});

const LOOPBACK = { host: '127.0.0.1', port: 8000 };
const METRICS = { METRICS_HOST: '127.0.0.1', METRICS_PORT: 9464 };

test('the ready banner names the address the API is bound to, the docs page, the metrics, and user:create while no user exists', () => {
  const [first, next, ...rest] = readyBanner(METRICS, LOOPBACK, false);
  assert.is(
    first,
    'Paceline is up: API http://127.0.0.1:8000/api/ (listening on 127.0.0.1:8000, this machine only), ' +
      'docs http://127.0.0.1:8000/api/docs/, metrics http://127.0.0.1:9464/metrics',
  );
  assert.is(next, 'next, in another terminal: npm run cli -- user:create NAME');
  assert.equal(rest, []);
  assert.equal(readyBanner(METRICS, LOOPBACK, true), [first], 'users exist: no hint');
  assert.equal(readyBanner(METRICS, LOOPBACK, undefined), [first], 'not known: no hint');
});

test('bound to every interface, the banner says so and gives a loopback URL', () => {
  assert.match(
    readyBanner(METRICS, { host: '0.0.0.0', port: 8000 }, true)[0]!,
    'API http://127.0.0.1:8000/api/ (listening on 0.0.0.0:8000, every interface)',
  );
  assert.match(
    readyBanner(METRICS, { host: '::', port: 8001 }, true)[0]!,
    'API http://[::1]:8001/api/ (listening on [::]:8001, every interface), docs http://[::1]:8001/api/docs/',
  );
  assert.match(readyBanner(METRICS, { host: '10.0.0.11', port: 8000 }, true)[0]!, /\(listening on 10.0.0.11:8000\)/);
  assert.match(
    degradedBanner({ THROTTLE_FAILURE_MODE: 'open', READ_CACHE_BYTES: 0 }, { host: '0.0.0.0', port: 8000 }, ['Redis']),
    /^Paceline is up WITHOUT Redis .*API http:\/\/127.0.0.1:8000\/api\/ \(listening on 0.0.0.0:8000, every interface\)$/,
  );
});

test('a banner is plain text on a terminal, one log line otherwise', async () => {
  const { logger, lines } = collecting();
  announce(logger, 'info', { port: 8000 }, ['Paceline is up: …', 'next: …'], false);
  await flush();
  const [line] = lines as unknown as Array<{ level: number; msg: string; port: number }>;
  assert.equal([line?.level, line?.msg, line?.port], [30, 'Paceline is up: … ; next: …', 8000]);
  let written = '';
  const write = process.stdout.write;
  process.stdout.write = ((chunk: string) => ((written += chunk), true)) as typeof write;
  try {
    announce(logger, 'info', {}, ['Paceline is up: …', 'next: …'], true);
  } finally {
    process.stdout.write = write;
  }
  assert.is(written, 'Paceline is up: …\nnext: …\n');
  await flush();
  assert.is(lines.length, 1, 'nothing logged besides');
});

test.run();
