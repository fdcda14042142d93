import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { keptCrowd } from '../../helpers/kept-crowd.js';
import { scrape, sumOf } from '../../helpers/metrics.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';

// docs/throttling.md "Past capacity: admission and shedding": whatever takes a connection on PORT, the bytes a
// client sends are framed once, by node:http's parser (llhttp), in the process that answers them. Each case below
// is a byte sequence, with the delays that exposed a hand-over between two readers, that a lone node:http server
// frames without losing or reinterpreting a byte: a body is never run as a request, a pipelined request is never
// dropped, a chunked body is stored whole or refused. On the real entry point with two web workers, as shipped.

const test = suite('every byte a client sends is framed once: none lost, none reinterpreted');
let cluster: RunningCluster;
let token = '';
let dropDatabase: () => Promise<void> = async () => {};
const BODY_LIMIT = 4_096;

test.before(async () => {
  const database = await createTestDatabase('framing');
  dropDatabase = database.drop;
  const db = connectDatabase(database.url, 1);
  await createUser(db, 'ada', 'ada-pass-1234');
  await db.destroy();
  cluster = await startCluster(
    {
      ...testStoresEnv('framing', database.url),
      WEB_CONCURRENCY: '2',
      THROTTLE_ANON: '100000/min',
      THROTTLE_USER: '100000/min',
      BODY_LIMIT_BYTES: String(BODY_LIMIT),
    },
    120_000,
  );
  const login = await request(cluster.base, 'POST', '/api/auth/token/', {
    body: { username: 'ada', password: 'ada-pass-1234' },
  });
  token = login.body.token;
});

test.after(async () => {
  await cluster?.stop();
  await dropDatabase();
});

interface Answer {
  status: number;
  head: string;
  body: string;
}

/** A connection that records every byte it is answered, and reads answers off it as node:http would frame them. */
class Wire {
  readonly socket: Socket;
  #received = '';
  #closed = false;

  constructor(port = cluster.port) {
    this.socket = connect({ port, host: '127.0.0.1', noDelay: true });
    this.socket.setEncoding('latin1');
    this.socket.on('data', (chunk: string) => (this.#received += chunk));
    this.socket.on('error', () => {});
    this.socket.on('close', () => (this.#closed = true));
  }

  connected(): Promise<void> {
    return new Promise((resolve) => this.socket.once('connect', () => resolve()));
  }

  send(text: string): Promise<void> {
    return new Promise((resolve) => this.socket.write(text, 'latin1', () => resolve()));
  }

  /** The answers whole so far (an interim 100 Continue among them). */
  answers(): Answer[] {
    const answers: Answer[] = [];
    let rest = this.#received;
    for (;;) {
      const end = rest.indexOf('\r\n\r\n');
      if (end === -1) return answers;
      const head = rest.slice(0, end);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (rest.length < end + 4 + length) return answers;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      answers.push({ status, head, body: rest.slice(end + 4, end + 4 + length) });
      rest = rest.slice(end + 4 + length);
    }
  }

  /** Waits until `count` final answers (not 1xx) have arrived, the connection closed, or `withinMs` passed. */
  async until(count: number, withinMs = 8_000): Promise<Answer[]> {
    const final = () => this.answers().filter((answer) => answer.status >= 200);
    for (const end = Date.now() + withinMs; final().length < count && !this.#closed && Date.now() < end;)
      await sleep(5);
    return final();
  }

  close(): void {
    this.socket.destroy();
  }
}

const GET_ROOT = 'GET /api/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

function create(title: string, extra = ''): string {
  const body = JSON.stringify({ title });
  return (
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`
  );
}

/** Titles of ada's tasks that start with `prefix`. */
async function titles(prefix: string): Promise<string[]> {
  const list = await request(cluster.base, 'GET', '/api/tasks/?limit=1000', { token });
  assert.is(list.status, 200, list.text);
  return (list.body.results as Array<{ title: string }>).map((t) => t.title).filter((t) => t.startsWith(prefix));
}

test('a body sent 300 ms after its head, while the first request is answered, is a body: the request in it never runs', async () => {
  for (let i = 0; i < 9; i += 1) {
    const hidden = create(`smuggled-${i}`);
    const wire = new Wire();
    await wire.connected();
    await wire.send(GET_ROOT);
    await sleep(0.5 + (i % 4) * 0.5);
    await wire.send(
      `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n` +
        `Content-Length: ${hidden.length}\r\n\r\n`,
    );
    await sleep(300);
    await wire.send(hidden);
    // The two answers due, however slow a loaded host is; then a second for any third (the smuggled create's).
    await wire.until(2);
    const answers = await wire.until(3, 1_000);
    wire.close();
    // The anonymous POST is refused (401) whatever its body; the body is read past as a body.
    assert.equal(
      answers.map((a) => a.status),
      [200, 401],
      `try ${i}: the GET and the outer POST are answered, nothing else: ${JSON.stringify(answers.map((a) => a.head.split('\r\n')[0]))}`,
    );
  }
  assert.equal(await titles('smuggled-'), [], 'no request hidden in a body created a task');
});

test('a request pipelined 3 ms after the first is answered, every time', async () => {
  for (let i = 0; i < 6; i += 1) {
    const wire = new Wire();
    await wire.connected();
    await wire.send(GET_ROOT);
    await sleep(1 + (i % 3));
    await wire.send('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const answers = await wire.until(2);
    wire.close();
    assert.equal(
      answers.map((a) => a.status),
      [200, 200],
      `try ${i}: both answered: ${answers.map((a) => a.body).join(' | ')}`,
    );
    assert.is(answers[1]!.body, '{"status":"ok"}', `try ${i}: the second answer is the probe's`);
  }
});

/**
 * A lone node:http server, the reference: it answers each request it frames with its method, URL and body as
 * JSON, so that what Paceline answers the same bytes can be held to where node:http alone puts every boundary.
 */
async function plainNodeHttp(): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('latin1');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => res.end(JSON.stringify({ method: req.method, url: req.url, body })));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Writes `bytes` on a new connection in pieces of `size`, 1 ms apart, and returns the answers to `count` requests. */
async function sendSplit(port: number, bytes: string, size: number, count: number): Promise<Answer[]> {
  const wire = new Wire(port);
  await wire.connected();
  for (let at = 0; at < bytes.length; at += size) {
    await wire.send(bytes.slice(at, at + size));
    await sleep(1);
  }
  const answers = await wire.until(count);
  wire.close();
  return answers;
}

test('bytes split 1 ms apart with a request pipelined behind: framed where a lone node:http frames them', async () => {
  // Twice: alone, and beside a crowd of kept connections that makes the workers' connections take turns (a kept
  // connection held between its requests while the next one waits unread in the kernel).
  const reference = await plainNodeHttp();
  let crowd: ReturnType<typeof keptCrowd> | undefined;
  const probe = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  try {
    for (let i = 0; i < 24; i += 1) {
      if (i === 12) crowd = keptCrowd(cluster.port, 600);
      const title = `split-${i}`;
      const body = JSON.stringify({ title });
      const chunked =
        `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
      const bytes = (i % 2 === 0 ? create(title) : chunked) + probe;
      const size = 3 + (i % 5) * 4;
      const plain = (await sendSplit(reference.port, bytes, size, 2)).map((a) => JSON.parse(a.body));
      let ours = await sendSplit(cluster.port, bytes, size, 2);
      // Beside the crowd, a loaded host may answer the POST 503 (shed, or a store late), framed and stored nothing:
      // that says nothing of framing, so the try is sent again, at most three times, and said with what it got.
      for (let again = 0; again < 3 && ours[0]?.status === 503; again += 1) {
        const got = `${ours[0].body} then ${ours[1]?.status ?? 'nothing'}`;
        console.log(`# try ${i}: the POST was answered 503 (${got}); sent again`);
        ours = await sendSplit(cluster.port, bytes, size, 2);
      }
      assert.equal(
        plain.map((r: { method: string; url: string }) => `${r.method} ${r.url}`),
        ['POST /api/tasks/', 'GET /healthz'],
        `try ${i}: node:http frames two requests`,
      );
      assert.is(JSON.parse(plain[0].body).title, title, `try ${i}: node:http reads the whole body`);
      assert.equal(
        ours.map((a) => a.status),
        [201, 200],
        `try ${i}: Paceline answers the same two: ${ours.map((a) => a.head.split('\r\n')[0]).join(' | ')}`,
      );
      assert.is(JSON.parse(ours[0]!.body).title, title, `try ${i}: the task holds the whole body`);
      assert.is(ours[1]!.body, '{"status":"ok"}', `try ${i}: the second answer is the probe's`);
    }
  } finally {
    await crowd?.stop();
    await reference.close();
  }
  assert.is((await titles('split-')).length, 24, 'each create stored once');
  const { samples } = await scrape(cluster.metricsBase);
  assert.ok(sumOf(samples, 'paceline_kept_connections_deferred_total') > 0, 'the crowd made connections take turns');
});

test('a body sent 2 ms after an Expect: 100-continue head is read: 201 at once, not 408', async () => {
  for (let i = 0; i < 4; i += 1) {
    const body = JSON.stringify({ title: `continued-${i}` });
    const wire = new Wire();
    await wire.connected();
    await wire.send(
      `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    await sleep(2);
    await wire.send(body);
    const answers = await wire.until(1, 5_000);
    wire.close();
    assert.equal(
      answers.map((a) => a.status),
      [201],
      `try ${i}: created within 5 s: ${JSON.stringify(answers)}`,
    );
  }
  assert.is((await titles('continued-')).length, 4, 'each body was stored');
});

test('after a 413 for a body past BODY_LIMIT_BYTES, the next request on the connection is answered, or the 413 says close', async () => {
  for (let i = 0; i < 4; i += 1) {
    const wire = new Wire();
    await wire.connected();
    const big = 'x'.repeat(BODY_LIMIT + 100);
    await wire.send(
      `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
    );
    const [refused] = await wire.until(1);
    assert.is(refused?.status, 413, `try ${i}: the oversized body is refused`);
    const closes = /\r\nconnection: *close/i.test(refused!.head);
    await wire.send(GET_ROOT);
    const answers = await wire.until(2);
    wire.close();
    if (!closes)
      assert.equal(
        answers.map((a) => a.status),
        [413, 200],
        `try ${i}: a 413 that keeps the connection answers the next request`,
      );
  }
});

/** A chunked create whose chunks arrive `gapMs` apart; `last` is the last chunk with whatever follows it. */
async function chunkedCreate(chunks: string[], last: string, gapMs: number): Promise<Answer[]> {
  const wire = new Wire();
  await wire.connected();
  await wire.send(
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
  );
  for (const chunk of chunks) {
    await wire.send(`${Buffer.byteLength(chunk, 'latin1').toString(16)}\r\n${chunk}\r\n`);
    if (gapMs > 0) await sleep(gapMs);
  }
  await wire.send(last);
  const answers = await wire.until(1, 5_000);
  wire.close();
  return answers;
}

test("a chunk whose data holds the last chunk's bytes does not end the body: what is acknowledged is stored whole", async () => {
  for (let i = 0; i < 8; i += 1) {
    const title = `chunked-${i}`;
    // Valid JSON whose whitespace spells "\r\n0\r\n\r\n" inside the first chunk's data.
    const answers = await chunkedCreate(
      [`{"title":"${title}","list":[\r\n0\r\n\r\n]`, ',"description":"the middle chunk"', '}'],
      '0\r\n\r\n',
      1 + (i % 3),
    );
    assert.equal(
      answers.map((a) => a.status),
      [201],
      `try ${i}: created: ${JSON.stringify(answers)}`,
    );
    const created = JSON.parse(answers[0]!.body) as { id: number; description: string };
    assert.is(created.description, 'the middle chunk', `try ${i}: the answer holds the middle chunk`);
    const stored = await request(cluster.base, 'GET', `/api/tasks/${created.id}/`, { token });
    assert.is(stored.body.description, 'the middle chunk', `try ${i}: the stored task holds the middle chunk`);
  }
});

test('a last chunk with an extension, written 000, or followed by a trailer ends the body at once', async () => {
  const endings = ['0;a=b\r\n\r\n', '000\r\n\r\n', '0\r\nX-Trailer: 1\r\n\r\n'];
  for (const [i, ending] of endings.entries()) {
    const started = Date.now();
    const answers = await chunkedCreate([`{"title":"ending-${i}"}`], ending, 0);
    assert.equal(
      answers.map((a) => a.status),
      [201],
      `${JSON.stringify(ending)}: created (in ${Date.now() - started} ms): ${JSON.stringify(answers)}`,
    );
  }
  assert.is((await titles('ending-')).length, endings.length);
});

/** The resident memory of the primary, in MiB. */
function primaryRssMiB(): number {
  const status = readFileSync(`/proc/${cluster.child.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

test("a flood of one-byte sends from 300 connections leaves the primary's memory where it was", async () => {
  const before = primaryRssMiB();
  const wires = Array.from({ length: 300 }, () => new Wire());
  await Promise.all(wires.map((wire) => wire.connected()));
  const line = 'GET /api/tasks/?' + 'a'.repeat(8_000);
  let sends = 0;
  const end = Date.now() + 5_000;
  let peak = before;
  for (let round = 0; Date.now() < end; round += 1) {
    for (const wire of wires) wire.socket.write(line[round % line.length]!);
    sends += wires.length;
    if (round % 50 === 0) peak = Math.max(peak, primaryRssMiB());
    await new Promise((resolve) => setImmediate(resolve));
  }
  for (const wire of wires) wire.close();
  await sleep(1_000);
  const after = primaryRssMiB();
  assert.ok(sends > 100_000, `the flood sent ${sends} bytes`);
  assert.ok(
    after - before < 48,
    `the primary held ${before.toFixed(0)} MiB before, ${peak.toFixed(0)} at the peak, ${after.toFixed(0)} after ${sends} one-byte sends`,
  );
  const probe = await request(cluster.base, 'GET', '/healthz');
  assert.is(probe.status, 200);
});

test.run();
