import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createApi } from '../../../src/api/app.js';
import { answerEarlyRefusals } from '../../../src/listener/early-refusal.js';
import { createApiServer } from '../../../src/server/server.js';
import { pseudonymOf } from '../../../src/throttle/pseudonym.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';

// A client the throttle already refused is answered before the app (src/listener/early-refusal.ts): the
// same bytes as the app's own 429 (Date and a generated X-Request-Id apart), counted in the same
// metric series and logged by the same sample. One app serves two ports: `appOnly` hands every
// request to Koa, `early` tries the early refusal first and notes which requests it answered.

const lines: Array<Record<string, unknown>> = [];
let app: TestApp;
const servers: Server[] = [];
let appOnlyPort = 0;
let earlyPort = 0;
/** The X-Request-Id the client sent with each request the early refusal answered on `early`. */
const answeredEarly: string[] = [];

function captureLogger() {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return pino({ level: 'info' }, sink);
}

async function listen(listener: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  const server = createApiServer(app.deps.config, listener);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A raw answer: its status line, header lines in order, and body. */
interface RawAnswer {
  head: string[];
  body: string;
}

/** Sends `text` on a new connection and reads one answer (its headers, then Content-Length bytes). */
function exchange(port: number, text: string, method: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let received = Buffer.alloc(0);
    const deadline = setTimeout(() => fail(new Error('no whole answer within 10 s')), 10_000);
    const fail = (error: Error) => {
      clearTimeout(deadline);
      socket.destroy();
      reject(error);
    };
    socket.on('error', fail);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = received.subarray(0, end).toString('latin1').split('\r\n');
      const length = Number(/^content-length: (\d+)$/im.exec(head.join('\n'))?.[1] ?? 0);
      const body = received.subarray(end + 4);
      if (method !== 'HEAD' && body.length < length) return;
      clearTimeout(deadline);
      socket.destroy();
      resolve({ head, body: body.toString('utf8') });
    });
  });
}

/** The answer with Date's value, and X-Request-Id's unless the client chose it, written as `*`. */
function normalised({ head, body }: RawAnswer, keepRequestId: boolean): RawAnswer {
  const masked = head.map((line) =>
    /^date: /i.test(line) || (!keepRequestId && /^x-request-id: /i.test(line)) ? `${line.split(':')[0]}: *` : line,
  );
  return { head: masked, body };
}

const requestOf = (method: string, target: string, ip: string, extra = '', body = '') =>
  `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: ${ip}\r\n${extra}` +
  (body ? `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` : '') +
  `\r\n${body}`;

/** Spends `ip`'s anon budget (3) through the app and returns the 429 Redis refused it with. */
async function spend(ip: string): Promise<RawAnswer> {
  for (let i = 0; i < 3; i++)
    assert.is((await exchange(appOnlyPort, requestOf('GET', '/api/tasks/', ip), 'GET')).head[0], 'HTTP/1.1 200 OK');
  const refused = await exchange(appOnlyPort, requestOf('GET', '/api/tasks/', ip), 'GET');
  assert.is(refused.head[0], 'HTTP/1.1 429 Too Many Requests');
  return refused;
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  return sumOf(parseMetrics(await app.deps.metrics.registry.metrics()), name, labels);
}

const test = suite("a refusal answered before the app is the app's own 429, counted and logged alike");

test.before(async () => {
  app = await startTestApp({ THROTTLE_ANON: '3/hour', TRUST_PROXY_HOPS: '1', LOG_LEVEL: 'info' }, 'early-refusal', {
    logger: captureLogger(),
  });
  const { app: koa, lookup, allowOf, recorder } = createApi(app.deps);
  const answerEarly = answerEarlyRefusals({ lookup, allowOf, recorder });
  const handle = koa.callback();
  appOnlyPort = await listen((req, res) => void handle(req, res));
  earlyPort = await listen((req, res) => {
    if (answerEarly(req, res)) answeredEarly.push(String(req.headers['x-request-id']));
    else void handle(req, res);
  });
});

test.after(async () => {
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  await app?.close();
});

test('byte for byte the 429 the app sends, on every method and path a guard refuses', async () => {
  const ip = '198.51.100.61';
  await spend(ip);
  const cases: Array<[method: string, target: string, extra?: string, body?: string]> = [
    ['GET', '/api/tasks/'],
    ['GET', '/api/tasks/?page=2&page_size=5'],
    ['HEAD', '/api/tasks/'],
    ['POST', '/api/tasks/', '', '{"title":"never read"}'],
    ['GET', '/api/tasks/42/'],
    ['DELETE', '/api/tasks/'],
    ['OPTIONS', '/api/tasks/42/'],
    ['GET', '/api/'],
    ['GET', '/api/tasks/', 'X-Request-Id: chosen-by-the-client\r\n'],
    ['GET', '/api/tasks/', 'Connection: close\r\nAccept: application/json\r\n'],
  ];
  for (const [method, target, extra = '', body = ''] of cases) {
    const text = requestOf(method, target, ip, extra, body);
    const label = `${method} ${target} ${extra.trim()}`;
    const earlyBefore = answeredEarly.length;
    // Retry-After counts down: the two answers are compared when taken within the same second of it.
    let pair: [RawAnswer, RawAnswer] | undefined;
    for (let attempt = 0; attempt < 5 && !pair; attempt++) {
      const [inApp, early] = [await exchange(appOnlyPort, text, method), await exchange(earlyPort, text, method)];
      const wait = (answer: RawAnswer) => answer.head.find((line) => line.startsWith('Retry-After: '));
      if (wait(inApp) === wait(early)) pair = [inApp, early];
    }
    assert.ok(pair, `${label}: Retry-After agreed in one of 5 attempts`);
    const [inApp, early] = pair;
    assert.is(early.head[0], 'HTTP/1.1 429 Too Many Requests', label);
    assert.ok(answeredEarly.length > earlyBefore, `${label}: answered before the app`);
    const keepId = extra.includes('X-Request-Id');
    assert.equal(normalised(early, keepId), normalised(inApp, keepId), label);
  }
});

test('the same 429 as the one Redis refused with, but for the seconds left', async () => {
  const ip = '198.51.100.62';
  const fromRedis = await spend(ip);
  const early = await exchange(earlyPort, requestOf('GET', '/api/tasks/', ip), 'GET');
  const seconds = (answer: RawAnswer) => normalised(answer, false).head.map((line) => line.replace(/\d+/g, 'N'));
  assert.equal(seconds(early), seconds(fromRedis));
  assert.is(early.body.replace(/\d+/g, 'N'), fromRedis.body.replace(/\d+/g, 'N'));
});

test('counted in the same metric series, logged by the same sample, and no credentials answered early', async () => {
  const ip = '198.51.100.63';
  await spend(ip);
  const labels = { method: 'GET', route: '/api/tasks/', status: '429' };
  const [requests, throttled] = [
    await metric('paceline_http_requests_total', labels),
    await metric('paceline_throttle_decisions_total', { scope: 'anon', decision: 'throttled' }),
  ];
  const logged = lines.length;
  const earlyBefore = answeredEarly.length;
  const ids = Array.from({ length: 20 }, (_, i) => `flood-${i}`);
  for (const id of ids) {
    const answer = await exchange(earlyPort, requestOf('GET', '/api/tasks/', ip, `X-Request-Id: ${id}\r\n`), 'GET');
    assert.is(answer.head[0], 'HTTP/1.1 429 Too Many Requests');
  }
  assert.equal(answeredEarly.slice(earlyBefore), ids, 'every one answered before the app');
  assert.is(await metric('paceline_http_requests_total', labels), requests + 20, 'requests by route and status');
  assert.is(
    await metric('paceline_throttle_decisions_total', { scope: 'anon', decision: 'throttled' }),
    throttled + 20,
    'throttle decisions',
  );
  assert.is(lines.length, logged, 'the client was logged when Redis refused it: its flood only counts');

  // With credentials, never early: the guard decides (here a bad token, counted and refused by the throttle).
  const before = answeredEarly.length;
  const withToken = await request(`http://127.0.0.1:${earlyPort}`, 'GET', '/api/tasks/', {
    headers: { 'X-Forwarded-For': ip, Authorization: `Bearer ${'0'.repeat(64)}` },
  });
  assert.is(withToken.status, 429);
  assert.is(answeredEarly.length, before, 'a request with Authorization is left to the app');
});

test('the first refusal the log sees from a client, answered early, is its request line', async () => {
  const ip = '198.51.100.65';
  // Refused through the first app (its log has seen the client), then answered by another app, whose log has not.
  await spend(ip);
  const { app: koa, lookup, allowOf, recorder } = createApi(app.deps);
  const answerEarly = answerEarlyRefusals({ lookup, allowOf, recorder });
  const handle = koa.callback();
  const port = await listen((req, res) => void (answerEarly(req, res) || handle(req, res)));
  const seen = lines.length;
  await exchange(port, requestOf('GET', '/api/tasks/', ip, 'X-Request-Id: first-seen\r\n'), 'GET');
  await exchange(port, requestOf('GET', '/api/tasks/', ip, 'X-Request-Id: second-seen\r\n'), 'GET');
  const added = lines.slice(seen);
  assert.is(added.length, 1, JSON.stringify(added));
  const [line] = added;
  assert.is(line?.requestId, 'first-seen');
  assert.is(line?.route, '/api/tasks/');
  assert.is(line?.method, 'GET');
  assert.is(line?.status, 429);
  assert.is(line?.scope, 'anon');
  assert.is(line?.client, `ip:${ip}`);
  assert.is(line?.local, true);
  assert.ok(Number(line?.retryAfterS) > 3_500, String(line?.retryAfterS));
  assert.is(line?.pseudonym, pseudonymOf(app.deps.cursorSecret, `ip:${ip}`));
});

test.run();
