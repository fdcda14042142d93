import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { failureOf, outcomeName, SHED_BODY, tallyOutcomes } from '../../helpers/answers.js';
import { scrape, sumOf } from '../../helpers/metrics.js';

// docs/throttling.md "Cost: requests that weigh more", "Exact, in units": two real clusters of two web workers each
// (two "hosts" on their own ports) share one PostgreSQL database and one Redis prefix. 30 anonymous clients send
// pages that cost 1 (10 rows) and pages that cost 5 (500 rows, MAX_PAGE_SIZE=500), all at once and shuffled, each on
// a new connection, alternating hosts: every client's admitted units stay within its limit. Then each sends pages
// of cost 1 until refused: it is admitted exactly its limit in units. The window is an hour, so every admission of
// the test is in one window, and "in any window" is the total.

const LIMIT = 40;
const CLIENTS = 30;
const HEAVY = 10; // cost-5 pages per client: 50 units, more than the limit alone
const LIGHT = 25; // cost-1 pages per client
const test = suite(`request costs exact: 2 hosts × WEB_CONCURRENCY=2 on one Redis, ${CLIENTS} clients, ${LIMIT}/hour`);
let hosts: RunningCluster[] = [];
let dropDatabase: () => Promise<void> = async () => {};

interface Sent {
  client: number;
  cost: 1 | 5;
}

/** What one request got: its status, or 0 and why it got no answer; `shed` when admission refused it before Koa. */
interface Answer {
  status: number;
  failure?: string;
  shed?: boolean;
}

/** A page of 10 rows (cost 1) or of 500 rows (cost 5) for `client`, on a connection of its own. */
function hit(base: string, { client, cost }: Sent): Promise<Answer> {
  return new Promise((resolve) => {
    const failed = (error: unknown) => resolve({ status: 0, failure: failureOf(error) });
    const path = cost === 5 ? '/api/tasks/?page_size=500' : '/api/tasks/';
    const headers = { 'X-Forwarded-For': `198.51.100.${client + 1}` };
    const req = httpRequest(new URL(path, base), { agent: false, headers, timeout: 30_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, shed: res.statusCode === 503 && body === SHED_BODY }));
      res.on('error', failed);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('client timeout'), { name: 'TimeoutError' })));
    req.on('error', failed);
    req.end();
  });
}

async function allWorkersUp(host: RunningCluster): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!host.output().includes('Paceline is up')) {
    if (Date.now() > deadline) throw new Error(`not all web workers came up:\n${host.output()}`);
    await sleep(100);
  }
}

test.before(async () => {
  const database = await createTestDatabase('throttle-cost-exact');
  dropDatabase = database.drop;
  const env = {
    ...testStoresEnv('throttle-cost-exact', database.url),
    WEB_CONCURRENCY: '2',
    TRUST_PROXY_HOPS: '1',
    THROTTLE_ANON: `${LIMIT}/hour`,
    MAX_PAGE_SIZE: '500',
    // Exactness is promised for checks the store answers; a loaded shared host may be slower than the default.
    THROTTLE_TIMEOUT_MS: '5000',
    LOG_LEVEL: 'info',
    DATABASE_POOL_SIZE: '4',
  };
  hosts = await Promise.all([startCluster(env, 120_000), startCluster(env, 120_000)]);
  await Promise.all(hosts.map(allWorkersUp));
});

test.after(async () => {
  await Promise.allSettled(hosts.map((host) => host.stop()));
  await dropDatabase();
});

test(`${CLIENTS} clients mixing cost-1 and cost-5 pages: units within the limit, then exactly the limit`, async () => {
  const requests: Sent[] = [];
  for (let client = 0; client < CLIENTS; client++) {
    for (let i = 0; i < HEAVY; i++) requests.push({ client, cost: 5 });
    for (let i = 0; i < LIGHT; i++) requests.push({ client, cost: 1 });
  }
  let seed = 20_261_202; // a fixed shuffle (Fisher–Yates over an LCG), so a failure can be rerun as is
  for (let i = requests.length - 1; i > 0; i -= 1) {
    seed = (Math.imul(seed, 1_664_525) + 1_013_904_223) >>> 0;
    const j = seed % (i + 1);
    [requests[i], requests[j]] = [requests[j]!, requests[i]!];
  }
  const answers: Answer[] = new Array(requests.length);
  let next = 0;
  let resent = 0;
  const lane = async () => {
    for (let i = next++; i < requests.length; i = next++) {
      answers[i] = await hit(hosts[i % 2]!.base, requests[i]!);
      // A shed request never reached the throttle: it is sent again, as a client would, at most five times.
      for (let again = 0; answers[i]!.shed && again < 5; again += 1, resent += 1)
        answers[i] = await hit(hosts[i % 2]!.base, requests[i]!);
    }
  };
  await Promise.all(Array.from({ length: 200 }, lane));

  // Any other 503, or a timeout, is no decision: said by name, and a timeout leaves the count unknowable.
  const burst = tallyOutcomes(answers);
  const undecided = Object.keys(burst).filter((kind) => kind !== '200 admitted' && kind !== '429 refused');
  assert.equal(undecided, [], `the burst's answers, by kind: ${JSON.stringify(burst)} (${resent} shed and sent again)`);

  const units = new Array<number>(CLIENTS).fill(0);
  const admittedOf = { 1: 0, 5: 0 };
  requests.forEach((sent, i) => {
    if (answers[i]!.status !== 200) return;
    units[sent.client]! += sent.cost;
    admittedOf[sent.cost] += 1;
  });
  for (let client = 0; client < CLIENTS; client++)
    assert.ok(
      units[client]! <= LIMIT,
      `client ${client}: ${units[client]} units admitted in the burst, limit ${LIMIT}`,
    );
  assert.ok(admittedOf[1] > 0 && admittedOf[5] > 0, `both costs admitted: ${JSON.stringify(admittedOf)}`);

  // Each client's budget is then filled with pages of cost 1 until the first refusal: exactly the limit in all.
  await Promise.all(
    units.map(async (used, client) => {
      const seen: Answer[] = [];
      for (let i = 0; i <= LIMIT - used; i++) {
        const answer = await hit(hosts[(client + i) % 2]!.base, { client, cost: 1 });
        seen.push(answer);
        if (answer.status === 200) units[client]! += 1;
        if (answer.status !== 200) break;
      }
      const last = seen[seen.length - 1]!;
      assert.is(
        outcomeName(last),
        '429 refused',
        `client ${client}: after ${units[client]} units ${outcomeName(last)}`,
      );
      assert.is(units[client], LIMIT, `client ${client}: admitted ${used} units in the burst, ${units[client]} in all`);
    }),
  );
  console.log(
    `# burst: ${requests.length} requests, ${JSON.stringify(burst)}; admitted ${admittedOf[1]} of cost 1, ` +
      `${admittedOf[5]} of cost 5; after filling, every client at ${LIMIT} units`,
  );
});

test('the hosts counted no store errors: every check was decided by Redis', async () => {
  const samples = (await Promise.all(hosts.map((host) => scrape(host.metricsBase)))).flatMap((s) => s.samples);
  assert.is(sumOf(samples, 'paceline_throttle_decisions_total', { decision: 'store_error' }), 0);
});

test.run();
