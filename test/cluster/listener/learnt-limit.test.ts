import { Agent, request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { scrape } from '../../helpers/metrics.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';

// docs/throttling.md "Past capacity: admission and shedding": the learnt limit of a web worker's admission moves
// with the latency of requests that did their work, never with answers that did none. One web worker, its limit
// read from its gauge, paceline_admission_limit.

const test = suite('admission learns its limit from work only');
let cluster: RunningCluster;
let token = '';
let dropDatabase: () => Promise<void> = async () => {};
const INITIAL_LIMIT = 64; // src/listener/adaptive-limit.ts INITIAL, within ADMISSION_LIMIT_MIN/MAX's defaults

test.before(async () => {
  const database = await createTestDatabase('learnt_limit');
  dropDatabase = database.drop;
  const db = connectDatabase(database.url, 1);
  await createUser(db, 'ada', 'ada-pass-1234');
  await db.destroy();
  cluster = await startCluster(
    {
      ...testStoresEnv('learnt-limit', database.url),
      WEB_CONCURRENCY: '1',
      // The first anonymous request of the address spends its budget: every later one is a 429 from memory.
      THROTTLE_ANON: '1/hour',
      THROTTLE_USER: '100000/min',
    },
    120_000,
  );
  const login = await request(cluster.base, 'POST', '/api/auth/token/', {
    body: { username: 'ada', password: 'ada-pass-1234' },
  });
  assert.is(login.status, 200, login.text);
  token = login.body.token;
});

test.after(async () => {
  await cluster?.stop();
  await dropDatabase();
});

async function learntLimit(): Promise<number> {
  const { samples } = await scrape(cluster.metricsBase);
  const limit = samples.find((s) => s.name === 'paceline_admission_limit');
  assert.ok(limit, 'paceline_admission_limit is exported');
  return limit!.value;
}

/** `connections` keep-alive clients sending `path` back to back for `ms`; the statuses they got, counted. */
async function flood(
  path: (i: number) => string,
  connections: number,
  ms: number,
  headers: Record<string, string> = {},
): Promise<Record<string, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const statuses: Record<string, number> = {};
  const end = Date.now() + ms;
  let sent = 0;
  const client = async () => {
    while (Date.now() < end) {
      const status = await new Promise<string>((resolve) => {
        const req = httpRequest(
          { agent, host: '127.0.0.1', port: cluster.port, path: path((sent += 1)), headers },
          (res) => {
            res.resume();
            res.on('end', () => resolve(String(res.statusCode)));
          },
        );
        req.setTimeout(10_000, () => req.destroy());
        req.on('error', () => resolve('no answer'));
        req.end();
      });
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: connections }, () => client()));
  agent.destroy();
  return statuses;
}

test('a flood of anonymous clients refused from memory (429) leaves the learnt limit where it was', async () => {
  assert.is(await learntLimit(), INITIAL_LIMIT, 'no request has taught it anything yet');
  // Pages no worker keeps (each offset its own), so each goes through admission to the early refusal.
  const statuses = await flood((i) => `/api/tasks/?limit=3&offset=${i}`, 200, 4_000);
  assert.ok((statuses['429'] ?? 0) > 500, `the flood was refused: ${JSON.stringify(statuses)}`);
  const after = await learntLimit();
  assert.ok(
    after <= INITIAL_LIMIT,
    `the limit stayed at ${INITIAL_LIMIT} or below after ${JSON.stringify(statuses)}; it is ${after}`,
  );
});

test('fast reads that do their work raise it; a flood of slow database reads then lowers it', async () => {
  const before = await learntLimit();
  const auth = { Authorization: `Bearer ${token}` };
  // Enough tasks that a page of 1,000 is many times the work of one task.
  // A create the client's connection lost (a kept connection the server closed as it was reused) is sent again.
  const create = (title: string) => {
    const send = () => request(cluster.base, 'POST', '/api/tasks/', { token, body: { title } });
    return send().catch(send);
  };
  for (let batch = 0; batch < 20; batch += 1)
    await Promise.all(Array.from({ length: 50 }, (_, i) => create(`task ${batch}-${i}`)));
  const fast = await flood(() => '/api/tasks/1/', 80, 4_000, auth);
  assert.ok((fast['200'] ?? 0) > 500, `fast reads answered: ${JSON.stringify(fast)}`);
  const raised = await learntLimit();
  assert.ok(raised > before, `fast work raised the limit: ${before} → ${raised}`);
  // Each request a page of its own (offsets 0-996), and a write every 50 ms that moves the published head: the pages
  // are rendered rather than answered from what the worker keeps (a kept page takes the fast lane and no slot, and
  // would teach nothing). Three offsets in turn were kept between two writes on a loaded host, where the writes
  // came slower: 9,274 answers in 6 s, nearly all from memory, and the limit did not move.
  // A write that got no answer (its connection lost under the flood) is counted and named, not a failure: the writes
  // only keep the head moving.
  let writing = true;
  const writes = { answered: 0, lost: 0 };
  const writer = (async () => {
    for (let i = 0; writing; i += 1) {
      await request(cluster.base, 'POST', '/api/tasks/', { token, body: { title: `moves the head ${i}` } }).then(
        () => (writes.answered += 1),
        () => (writes.lost += 1),
      );
      await sleep(50);
    }
  })();
  const slow = await flood((i) => `/api/tasks/?limit=1000&offset=${i % 997}`, 200, 6_000, auth).finally(() => {
    writing = false;
  });
  await writer;
  assert.ok((slow['200'] ?? 0) > 20, `slow reads answered: ${JSON.stringify(slow)}`);
  const lowered = await learntLimit();
  assert.ok(
    lowered < raised,
    `slow work lowered the limit: ${raised} → ${lowered} (${JSON.stringify(slow)}; head-moving writes ${JSON.stringify(writes)})`,
  );
});

test.run();
