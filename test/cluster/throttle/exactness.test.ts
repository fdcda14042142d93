import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { scrape, sumOf } from '../../helpers/metrics.js';
import { failureOf, SHED_BODY, tallyOutcomes } from '../../helpers/answers.js';

// docs/architecture.md "Throttling" "exact across processes and hosts": two real clusters of four web workers each (two
// "hosts" on their own ports) share one PostgreSQL database and one Redis prefix. Hundreds of
// concurrent requests of one client, each on a new connection so every worker of both hosts
// gets some, must admit exactly the limit, trial after trial; so must many clients at once.
// (DRF's throttle admitted 20–36 against a limit of 20 with four workers.)

const ANON_LIMIT = 50;
const USER_LIMIT = 30;
const test = suite('throttle exactness: 2 hosts × WEB_CONCURRENCY=4 on one Redis');
let hosts: RunningCluster[] = [];
let dropDatabase: () => Promise<void> = async () => {};
const tokens: string[] = [];
const sent = { anon: { allowed: 0, throttled: 0 }, user: { allowed: 0, throttled: 0 } };

interface Client {
  scope: 'anon' | 'user';
  headers: Record<string, string>;
}

/** What one request got: its status, or 0 and why it got no answer; `shed` when admission refused it before Koa. */
interface Answer {
  status: number;
  failure?: string;
  shed?: boolean;
}

const anonymous = (ip: string): Client => ({ scope: 'anon', headers: { 'X-Forwarded-For': ip } });
const authenticated = (token: string): Client => ({ scope: 'user', headers: { Authorization: `Bearer ${token}` } });

/** GET /api/tasks/ on a connection of its own; its status, or 0 and why it got no answer. */
function hit(base: string, client: Client): Promise<Answer> {
  return new Promise((resolve) => {
    const failed = (error: unknown) => resolve({ status: 0, failure: failureOf(error) });
    const req = httpRequest(new URL('/api/tasks/', base), { agent: false, headers: client.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, shed: res.statusCode === 503 && body === SHED_BODY }));
      res.on('error', failed);
    });
    req.on('error', failed);
    req.end();
  });
}

/**
 * Sends one request per entry of `clients`, alternating between the two hosts, at most
 * `inFlight` at a time; returns each client's statuses and keeps the totals for the metrics check.
 * A request the listener shed never reached the throttle: it is sent again, as a client would, at most five
 * times, and `resent` counts those resends for the assertions' messages.
 */
let resent = 0;
async function fire(clients: Client[], inFlight: number): Promise<Map<Client, Answer[]>> {
  const statuses = new Map<Client, Answer[]>();
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < clients.length; i = next++) {
      const client = clients[i]!;
      let answer = await hit(hosts[i % hosts.length]!.base, client);
      for (let again = 0; answer.shed && again < 5; again += 1, resent += 1)
        answer = await hit(hosts[i % hosts.length]!.base, client);
      statuses.set(client, [...(statuses.get(client) ?? []), answer]);
      if (answer.status === 200) sent[client.scope].allowed += 1;
      if (answer.status === 429) sent[client.scope].throttled += 1;
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, clients.length) }, lane));
  return statuses;
}

/** Waits until a host's primary says every web child is serving (not just the first one). */
async function allWorkersUp(host: RunningCluster): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!host.output().includes('Paceline is up')) {
    if (Date.now() > deadline) throw new Error(`not all web workers came up:\n${host.output()}`);
    await sleep(100);
  }
}

test.before(async () => {
  const database = await createTestDatabase('throttle-exact');
  dropDatabase = database.drop;
  const env = {
    ...testStoresEnv('throttle-exact', database.url),
    WEB_CONCURRENCY: '4',
    TRUST_PROXY_HOPS: '1',
    THROTTLE_ANON: `${ANON_LIMIT}/min`,
    THROTTLE_USER: `${USER_LIMIT}/min`,
    // Exactness is promised for checks the store answers: one that exceeds THROTTLE_TIMEOUT_MS
    // is admitted uncounted (open mode). Ten processes bursting on a small shared host can take
    // longer than the 100 ms default, so the limit here is generous and the last test asserts
    // that no check fell back.
    THROTTLE_TIMEOUT_MS: '5000',
    // info: the primary's "Paceline is up" line says all four web children are listening.
    LOG_LEVEL: 'info',
    DATABASE_POOL_SIZE: '4',
  };
  hosts = await Promise.all([startCluster(env, 120_000), startCluster(env, 120_000)]);
  await Promise.all(hosts.map(allWorkersUp));
  const db = connectDatabase(database.url, 1);
  for (let i = 0; i < 4; i += 1) {
    await createUser(db, `client${i}`, 'a-long-password');
    tokens.push((await issueToken(db, `client${i}`, 'a-long-password', 3_600_000, new Date()))!.token);
  }
  await db.destroy();
});

test.after(async () => {
  await Promise.allSettled(hosts.map((host) => host.stop()));
  await dropDatabase();
});

test(`one client, 300 concurrent requests over both hosts: exactly ${ANON_LIMIT} admitted, in each of 5 trials`, async () => {
  for (let trial = 1; trial <= 5; trial += 1) {
    const client = anonymous(`203.0.113.${trial}`); // a fresh identity per trial: no waiting for the window
    const statuses = await fire(
      Array.from({ length: 300 }, () => client),
      300,
    );
    assert.equal(
      tallyOutcomes(statuses.get(client)!),
      { '200 admitted': ANON_LIMIT, '429 refused': 300 - ANON_LIMIT },
      `trial ${trial} (${resent} shed and sent again so far)`,
    );
  }
});

test(`12 anonymous clients and 4 users at once, shuffled: each admitted exactly its limit`, async () => {
  const clients = [
    ...Array.from({ length: 12 }, (_, i) => anonymous(`198.51.100.${100 + i}`)),
    ...tokens.map(authenticated),
  ];
  const requests = clients.flatMap((client) =>
    Array.from({ length: client.scope === 'anon' ? 100 : 80 }, () => client),
  );
  let seed = 20_260_101; // a fixed shuffle (Fisher–Yates over an LCG), so a failure can be rerun as is
  for (let i = requests.length - 1; i > 0; i -= 1) {
    seed = (Math.imul(seed, 1_664_525) + 1_013_904_223) >>> 0;
    const j = seed % (i + 1);
    [requests[i], requests[j]] = [requests[j]!, requests[i]!];
  }
  const statuses = await fire(requests, 300);
  clients.forEach((client, i) => {
    const limit = client.scope === 'anon' ? ANON_LIMIT : USER_LIMIT;
    const total = statuses.get(client)!.length;
    assert.equal(
      tallyOutcomes(statuses.get(client)!),
      { '200 admitted': limit, '429 refused': total - limit },
      `client ${i} (${client.scope}; ${resent} shed and sent again so far)`,
    );
  });
});

test('both hosts /metrics agree with what the clients saw: every decision counted once, no store errors', async () => {
  const samples = (await Promise.all(hosts.map((host) => scrape(host.metricsBase)))).flatMap(
    (scraped) => scraped.samples,
  );
  for (const scope of ['anon', 'user'] as const) {
    for (const decision of ['allowed', 'throttled'] as const) {
      assert.is(
        sumOf(samples, 'paceline_throttle_decisions_total', { scope, decision }),
        sent[scope][decision],
        `${scope} ${decision}`,
      );
    }
  }
  assert.is(sumOf(samples, 'paceline_throttle_decisions_total', { decision: 'store_error' }), 0);
});

test.run();
