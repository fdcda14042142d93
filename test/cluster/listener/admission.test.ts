// Needs: ss
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { listenBacklog } from '../../helpers/listen-backlog.js';
import { scrape, sumOf } from '../../helpers/metrics.js';

// docs/throttling.md "Past capacity: admission and shedding", on the real entry point: one web worker
// whose limit is pinned at 2 requests in progress (ADMISSION_LIMIT_MIN = MAX), so that two requests
// whose bodies have not arrived hold every slot, and what comes next queues or is shed. Connections go
// straight to the worker (CONNECTION_DOOR=cluster), so a request without its body reaches admission.

const test = suite('admission control: who is shed first, probes never, and no work for a client that left');
let cluster: RunningCluster;
let hasty: RunningCluster;
let token = '';
let dropDatabase: () => Promise<void> = async () => {};
const answered: string[] = []; // labels of the raw requests, in the order their answers arrived

interface Raw {
  socket: Socket;
  answer: Promise<{ status: number; text: string }>;
}

/** Sends `head` (and `body`, unless held back) on a connection of its own; `label` records when it was answered. */
function send(port: number, label: string, head: string, body = ''): Raw {
  const socket = connect({ port, host: '127.0.0.1' });
  socket.write(head + body);
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.on('error', () => {});
  const answer = new Promise<{ status: number; text: string }>((resolve) => {
    const done = () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
    socket.on('data', () => {
      if (/\r\n\r\n/.test(text) && !answered.includes(label)) answered.push(label);
      if (/\r\n\r\n[\s\S]*[}\]]$/.test(text)) done();
    });
    socket.on('close', done);
  });
  return { socket, answer };
}

const get = (path: string, auth = true) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth ? `Authorization: Bearer ${token}\r\n` : ''}\r\n`;
const post = (title: string, length?: number) => {
  const body = JSON.stringify({ title });
  const head =
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length ?? Buffer.byteLength(body)}\r\n\r\n`;
  return { head, body };
};

/** Two writes whose bodies never come: they hold both slots until their sockets are destroyed. */
async function holdBothSlots(port: number): Promise<Raw[]> {
  const held = [1, 2].map((i) => send(port, `held ${i}`, post('never sent', 40).head));
  await sleep(300); // both started: their headers are in, their bodies are awaited
  return held;
}

test.before(async () => {
  const database = await createTestDatabase('admission');
  dropDatabase = database.drop;
  const db = connectDatabase(database.url, 1);
  await createUser(db, 'ada', 'ada-pass-1234');
  await db.destroy();
  const env = {
    ...testStoresEnv('admission', database.url),
    WEB_CONCURRENCY: '1',
    THROTTLE_ANON: '100000/min',
    THROTTLE_USER: '100000/min',
    ADMISSION_LIMIT_MIN: '2',
    ADMISSION_LIMIT_MAX: '2',
    ADMISSION_QUEUE_SIZE: '2',
    // node:cluster's round robin: PORT's one listening socket is the primary's (checked below).
    CONNECTION_DOOR: 'cluster',
  };
  [cluster, hasty] = await Promise.all([
    startCluster({ ...env, ADMISSION_QUEUE_MS: '20000' }, 120_000),
    startCluster({ ...env, ADMISSION_QUEUE_MS: '300' }, 120_000),
  ]);
  const login = await request(cluster.base, 'POST', '/api/auth/token/', {
    body: { username: 'ada', password: 'ada-pass-1234' },
  });
  token = login.body.token;
});

test.after(async () => {
  await Promise.all([cluster?.stop(), hasty?.stop()]);
  await dropDatabase();
});

test('a full queue sheds docs first, then anonymous reads; probes are answered; writes and reads run in class order', async () => {
  const held = await holdBothSlots(cluster.port);
  const docs = send(cluster.port, 'docs', get('/api/schema/'));
  await sleep(100);
  const anonymous = send(cluster.port, 'anonymous', get('/api/tasks/', false));
  await sleep(100);
  const read = send(cluster.port, 'read', get('/api/tasks/'));
  await sleep(100);
  const write = post('queued write');
  const written = send(cluster.port, 'write', write.head, write.body);
  const [shedDocs, shedAnonymous] = await Promise.all([docs.answer, anonymous.answer]);
  for (const shed of [shedDocs, shedAnonymous]) {
    assert.is(shed.status, 503, shed.text);
    assert.match(shed.text, /\r\nRetry-After: [123]\r\n/);
    assert.match(shed.text, /\{"detail":"Service temporarily unavailable, try again later\."\}$/);
  }
  assert.equal(answered.slice(0, 2), ['docs', 'anonymous'], 'the lowest class is shed first');
  const live = await request(cluster.base, 'GET', '/healthz');
  const ready = await request(cluster.base, 'GET', '/readyz');
  assert.equal([live.status, live.body, ready.status], [200, { status: 'ok' }, 200], 'probes pass every slot');
  for (const { socket } of held) socket.destroy();
  const [wrote, readAnswer] = await Promise.all([written.answer, read.answer]);
  assert.equal([wrote.status, readAnswer.status], [201, 200]);
  assert.equal(answered.slice(2), ['write', 'read'], 'a freed slot goes to the highest class first');
  for (const raw of [docs, anonymous, read, written]) raw.socket.destroy();
});

test('answers needing no PostgreSQL for a known client are not held behind the requests that hold every slot', async () => {
  // Pages kept by the worker, anonymous and authenticated, and the caller's own budget (Redis only). The same
  // requests as those sent below (the Host is part of what is kept), twice: kept, then current, and the token
  // remembered by the worker.
  const fast = [
    { label: 'kept page', head: get('/api/tasks/?limit=3', false) },
    { label: 'kept page with a token', head: get('/api/tasks/?limit=4') },
    { label: 'own budget with a token', head: get('/api/rate-limits/') },
  ];
  for (let i = 0; i < 2; i += 1) {
    for (const { label, head } of fast) {
      const warm = send(cluster.port, `warm ${i} ${label}`, head);
      assert.is((await warm.answer).status, 200, label);
      warm.socket.destroy();
    }
  }
  const before = await memoryAnswers();
  const held = await holdBothSlots(cluster.port);
  const sent = fast.map(({ label, head }) => ({ label, raw: send(cluster.port, label, head) }));
  // A read that needs PostgreSQL (one task, not kept) waits behind the held slots: the control.
  const slow = send(cluster.port, 'uncached read', get('/api/tasks/999999/'));
  try {
    for (const { label, raw } of sent) {
      const answer = await Promise.race([raw.answer, sleep(5_000).then(() => ({ status: 0, text: 'none in 5 s' }))]);
      assert.is(answer.status, 200, `${label}: ${answer.text}`);
    }
    const control = await Promise.race([slow.answer, sleep(300).then(() => undefined)]);
    assert.is(control, undefined, `a read that needs PostgreSQL waited for a slot (answered: ${control?.text})`);
    assert.ok(
      held.every(({ socket }) => !socket.destroyed),
      'while both slots were still held',
    );
  } finally {
    for (const { socket } of held) socket.destroy();
    for (const { raw } of sent) raw.socket.destroy();
  }
  assert.is((await slow.answer).status, 404, 'the control is answered once a slot frees');
  slow.socket.destroy();
  const after = await memoryAnswers();
  assert.ok(after - before >= fast.length, `paceline_admission_memory_total grew by ${after - before}`);
});

async function memoryAnswers(): Promise<number> {
  return sumOf((await scrape(cluster.metricsBase)).samples, 'paceline_admission_memory_total');
}

test('a queued request whose client left does no work: the write it carried is never made', async () => {
  const held = await holdBothSlots(cluster.port);
  const write = post('left before its turn');
  const leaving = send(cluster.port, 'leaving', write.head, write.body);
  await sleep(200);
  leaving.socket.destroy();
  await once(leaving.socket, 'close');
  await sleep(100);
  for (const { socket } of held) socket.destroy();
  await sleep(500);
  const list = await request(cluster.base, 'GET', '/api/tasks/?page_size=100', { token });
  assert.is(list.status, 200);
  const titles = (list.body.results as Array<{ title: string }>).map((task) => task.title);
  assert.not.ok(titles.includes('left before its turn'), titles.join(', '));
  const metrics = await (await fetch(`${cluster.metricsBase}/metrics`)).text();
  const abandoned = Number(/^paceline_admission_abandoned_total (\d+)/m.exec(metrics)?.[1] ?? 0);
  assert.ok(abandoned >= 1, `abandoned counted: ${abandoned}`);
});

test('a shed write keeps its connection for the next request; one whose body is chunked is closed', async () => {
  const held = await holdBothSlots(cluster.port);
  const queued = [1, 2].map((i) => {
    const write = post(`queued ${i}`);
    return send(cluster.port, `queued ${i}`, write.head, write.body);
  });
  await sleep(200); // both waiting: the queue (2) is full of writes, so the next write is shed at once
  const write = post('shed at once');
  const shed = send(cluster.port, 'shed write', write.head, write.body);
  const first = await shed.answer;
  assert.is(first.status, 503, first.text);
  assert.not.match(first.text, /\r\nConnection: close\r\n/i, 'the connection is kept');
  // The same connection, once the shed body was read past, carries the next request.
  const next = new Promise<string>((resolve) => {
    let text = '';
    shed.socket.on('data', (chunk: string) => {
      text += chunk;
      if (/\{"status":"ok"\}$/.test(text)) resolve(text);
    });
    shed.socket.on('close', () => resolve(text));
  });
  shed.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  assert.match(await next, /^HTTP\/1\.1 200 /, 'answered on the kept connection');
  const chunked = send(
    cluster.port,
    'chunked write',
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
      'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
  );
  const refused = await chunked.answer;
  assert.is(refused.status, 503, refused.text);
  assert.match(refused.text, /\r\nConnection: close\r\n/i, 'a body of unknown length is not read');
  for (const { socket } of held) socket.destroy();
  for (const { answer } of queued) assert.is((await answer).status, 201);
  for (const raw of [...queued, shed, chunked]) raw.socket.destroy();
});

test('with node:cluster at the door (CONNECTION_DOOR=cluster), PORT also queues 4,096 connections not yet accepted', () => {
  const { backlogs, expected, listing } = listenBacklog(cluster.port);
  assert.equal(backlogs, [expected], `one socket, the primary's: ${listing}`);
});

test('a request left waiting in a standing queue, past ADMISSION_QUEUE_MS, is shed rather than served late', async () => {
  const held = await holdBothSlots(hasty.port);
  const late = send(hasty.port, 'late', get('/api/tasks/'));
  const { status, text } = await late.answer;
  for (const { socket } of held) socket.destroy();
  late.socket.destroy();
  assert.is(status, 503, text);
  const metrics = await (await fetch(`${hasty.metricsBase}/metrics`)).text();
  assert.match(metrics, /^paceline_admission_shed_total\{class="read",reason="waited"\} [1-9]/m);
});

test.run();
