// Needs: haproxy, prometheus
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { Agent, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import type { Database } from '../../../db/database.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { startHaproxy, type RunningHaproxy } from '../../helpers/haproxy.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { scrape, sumOf } from '../../helpers/metrics.js';
import { failureOf, tallyOutcomes } from '../../helpers/answers.js';
import { resultValues, startPrometheus, type RunningPrometheus } from '../../helpers/prometheus.js';
import { checkWalk, spawnWriters, walkWithCursor, type Walk } from '../../helpers/writers.js';

// docs/scaling.md "Running at scale": two Paceline hosts (separate primaries with their own PORT,
// METRICS_PORT and DATA_DIR, one PostgreSQL database, one Redis prefix) behind a real HAProxy
// running the shipped example configuration (ops/haproxy/paceline.cfg): roundrobin, /readyz
// health checks, `option forwardfor`, retries with redispatch. Clients connect from distinct
// loopback addresses (127.0.0.10, .11, ...), so the balancer sees distinct client IPs and appends
// them to X-Forwarded-For; the hosts trust it (TRUSTED_PROXIES=127.0.0.1, TRUST_PROXY_HOPS=1).

const ANON_LIMIT = 12;
const CLIENTS = 10;
const EXTRA = 8;
const DRAIN_DELAY_MS = 3_000;
const CHECK_INTERVAL = '500ms'; // × fall 2 = 1 s, well under DRAIN_DELAY_MS
const PAGE_SIZE = 7;

const test = suite('two hosts behind HAProxy');
const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
const scratch = join(tmp, `load-balancer-${randomBytes(3).toString('hex')}`);
let shared: Record<string, string> = {};
const ports: Array<{ PORT: string; METRICS_PORT: string; DATA_DIR: string }> = [];
const hosts: RunningCluster[] = [];
let balancer: RunningHaproxy | undefined;
let prometheus: RunningPrometheus | undefined;
let db: Kysely<Database> | undefined;
let dropDatabase: () => Promise<void> = async () => {};
const tokens: string[] = [];
/** What the clients saw, to compare with what the hosts' metrics say. */
const seen = { anonAllowed: 0, anonThrottled: 0, userRequests: 0, created: 0 };

const hostEnv = (i: number) => ({ ...shared, ...ports[i]! });

/** One request through the balancer on a new connection from `source` (a loopback address); resolves with the status, 0 on a connection error. */
function fromAddress(
  source: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; failure?: string }> {
  return new Promise((resolve) => {
    const failed = (error: unknown) => resolve({ status: 0, failure: failureOf(error) });
    const req = httpRequest(new URL(path, balancer!.base), { agent: false, localAddress: source, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      res.on('error', failed);
    });
    req.on('error', failed);
    req.end();
  });
}

// uvu reports a failing hook only as failed tests: say why.
test.before(() =>
  setUp().catch((error: unknown) => {
    console.error('setting up the hosts and the balancer failed:', error);
    throw error;
  }),
);

async function setUp(): Promise<void> {
  await mkdir(scratch, { recursive: true });
  const database = await createTestDatabase('load-balancer');
  dropDatabase = database.drop;
  shared = {
    ...testStoresEnv('load-balancer', database.url),
    WEB_CONCURRENCY: '1',
    TRUST_PROXY_HOPS: '1',
    TRUSTED_PROXIES: '127.0.0.1',
    THROTTLE_ANON: `${ANON_LIMIT}/min`,
    THROTTLE_USER: '100000/min',
    // Exactness holds for checks Redis answers; a loaded host must not fall back to "open".
    THROTTLE_TIMEOUT_MS: '5000',
    DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    DATABASE_POOL_SIZE: '4',
  };
  for (const name of ['host1', 'host2']) {
    ports.push({
      PORT: String(await findFreePort()),
      METRICS_PORT: String(await findFreePort()),
      DATA_DIR: join(scratch, name),
    });
  }
  hosts.push(...(await Promise.all([0, 1].map((i) => startCluster(hostEnv(i), 120_000)))));
  balancer = await startHaproxy(
    scratch,
    hosts.map((host, i) => ({ name: `host${i + 1}`, address: `127.0.0.1:${host.port}` })),
    CHECK_INTERVAL,
  );
  prometheus = await startPrometheus(
    join(scratch, 'prometheus'),
    hosts.map((host) => `127.0.0.1:${host.metricsPort}`),
    [],
  );
  db = connectDatabase(database.url, 2);
  for (let i = 0; i < 4; i += 1) {
    await createUser(db, `user${i}`, 'a-long-password');
    tokens.push((await issueToken(db, `user${i}`, 'a-long-password', 3_600_000, new Date()))!.token);
  }
}

test.after(async () => {
  await prometheus?.stop();
  await balancer?.stop();
  await Promise.allSettled(hosts.map((host) => host.stop()));
  await db?.destroy();
  await dropDatabase();
});

test(`${CLIENTS} clients from their own addresses, ${ANON_LIMIT + EXTRA} requests each over both hosts: exactly ${ANON_LIMIT} admitted per client`, async () => {
  const clients = Array.from({ length: CLIENTS }, (_, i) => `127.0.0.${10 + i}`);
  const statuses = await Promise.all(
    clients.map(async (source, c) => {
      const mine: Array<{ status: number; failure?: string }> = [];
      for (let n = 0; n < ANON_LIMIT + EXTRA; n += 1) {
        // Odd clients also claim to be someone else on every request: the balancer appends the
        // real address, and only that one counts.
        const headers: Record<string, string> = c % 2 === 1 ? { 'X-Forwarded-For': `203.0.113.${n}` } : {};
        mine.push(await fromAddress(source, '/api/tasks/', headers));
      }
      return mine;
    }),
  );
  statuses.forEach((mine, c) => {
    const allowed = mine.filter((a) => a.status === 200).length;
    const throttled = mine.filter((a) => a.status === 429).length;
    seen.anonAllowed += allowed;
    seen.anonThrottled += throttled;
    assert.equal(
      tallyOutcomes(mine),
      { '200 admitted': ANON_LIMIT, '429 refused': EXTRA },
      `client ${clients[c]}: ${mine.map((a) => a.failure ?? a.status).join(' ')}`,
    );
  });
  // Roundrobin spread them: each host decided a good share of them.
  for (const host of hosts) {
    const decided = sumOf((await scrape(host.metricsBase)).samples, 'paceline_throttle_decisions_total', {
      scope: 'anon',
    });
    assert.ok(
      decided >= (CLIENTS * (ANON_LIMIT + EXTRA)) / 4,
      `host on ${host.port} decided ${decided} anonymous requests`,
    );
  }
});

test('cursor walks through the balancer stay exact while writers POST to both hosts', async () => {
  const writers = spawnWriters(balancer!.base, tokens.slice(0, 3), {
    durationMs: 3_000,
    concurrency: 3,
    maxPosts: 1_500,
  });
  let active = true;
  const finished = writers.finished.finally(() => (active = false));
  await writers.firstCreated;
  const orderings: Array<Walk['ordering']> = ['id', 'id', '-id'];
  const walks = (
    await Promise.all(
      orderings.map(async (ordering) => {
        const mine: Walk[] = [];
        do mine.push(await walkWithCursor(balancer!.base, db!, ordering, PAGE_SIZE, 5_000, tokens[3]));
        while (active);
        return mine;
      }),
    )
  ).flat();
  const written = await finished;
  const problems = [...written.failures, ...walks.flatMap((walk) => checkWalk(walk, written.created))];
  console.log(
    `# ${written.created.length} tasks created through the balancer; ${walks.length} walks of ${walks.reduce((n, w) => n + w.pages, 0)} pages`,
  );
  assert.equal(problems, []);
  assert.ok(written.created.length > 0 && walks.length >= orderings.length);
  seen.created += written.created.length;
  seen.userRequests += written.created.length + walks.reduce((n, w) => n + w.pages, 0);
  // Both hosts wrote: each appended some of the events.
  for (const host of hosts) {
    const appended = sumOf((await scrape(host.metricsBase)).samples, 'paceline_events_appended_total');
    assert.ok(appended > 0, `host on ${host.port} appended nothing`);
  }
  const stored = await db!
    .selectFrom('tasks')
    .select(({ fn }) => fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  assert.is(Number(stored.n), written.created.length, 'every acknowledged task stored once');
});

test('Prometheus scraping both hosts sums to what the clients saw', async () => {
  const query = async (expr: string) => resultValues(await prometheus!.query(expr))[0] ?? 0;
  const expected: Array<[string, number]> = [
    ['sum(paceline_throttle_decisions_total{scope="anon",decision="allowed"})', seen.anonAllowed],
    ['sum(paceline_throttle_decisions_total{scope="anon",decision="throttled"})', seen.anonThrottled],
    ['sum(paceline_throttle_decisions_total{scope="user",decision="allowed"})', seen.userRequests],
    ['sum(paceline_http_requests_total{status="429"})', seen.anonThrottled],
    ['sum(paceline_http_requests_total{method="POST",status="201"})', seen.created],
    ['count(up{job="paceline"} == 1)', 2],
  ];
  const deadline = Date.now() + 30_000;
  for (const [expr, value] of expected) {
    while ((await query(expr)) !== value && Date.now() < deadline) await sleep(250);
    assert.is(await query(expr), value, expr);
  }
  assert.is(await query('sum(paceline_throttle_decisions_total{decision="store_error"})'), 0);
});

test('a rolling restart of both hosts through the balancer fails no request', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const failures: string[] = [];
  let sent = 0;
  let running = true;
  /** A steady client: lists and idempotent creates through the balancer until told to stop (bounded). */
  const lane = async (lane: number) => {
    for (let n = 0; running && n < 20_000; n += 1) {
      const post = n % 3 === 2;
      const status = await new Promise<number | string>((resolve) => {
        const headers: Record<string, string> = { Authorization: `Bearer ${tokens[lane % tokens.length]}` };
        if (post) Object.assign(headers, { 'Content-Type': 'application/json', 'Idempotency-Key': randomUUID() });
        const req = httpRequest(
          new URL('/api/tasks/', balancer!.base),
          { method: post ? 'POST' : 'GET', agent, headers },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
            res.on('error', (error) => resolve(String(error)));
          },
        );
        req.on('error', (error) => resolve(String(error)));
        req.end(post ? JSON.stringify({ title: `steady ${lane}.${n}` }) : undefined);
      });
      sent += 1;
      if (status !== (post ? 201 : 200) && failures.length < 20) failures.push(`${post ? 'POST' : 'GET'}: ${status}`);
    }
  };
  const lanes = Promise.all([0, 1, 2, 3].map(lane));
  try {
    for (let i = 0; i < hosts.length; i += 1) {
      const name = `host${i + 1}`;
      const before = sent;
      const old = hosts[i]!;
      // SIGTERM to the primary's PID: /readyz turns 503 while it still serves, HAProxy takes it
      // out, then it drains and exits.
      const t1 = Date.now();
      const stopped = old.stop('SIGTERM', 60_000);
      const readiness: string[] = [];
      for (let probe = 0; probe < 200; probe += 1) {
        const answer = await fetch(`${old.base}/readyz`).then(
          (r) => String(r.status),
          () => 'refused',
        );
        if (readiness.at(-1) !== answer) readiness.push(answer);
        if (answer !== '200') break;
        await sleep(50);
      }
      assert.is(
        readiness.find((answer) => answer !== '200'),
        '503',
        `${name} /readyz went ${readiness.join(' → ')}`,
      );
      await balancer!.untilStatus(name, 'DOWN', 30_000);
      const down = Date.now() - t1;
      assert.is(await stopped, 0, `${name} exit code`);
      const exited = Date.now() - t1;
      hosts[i] = await startCluster(hostEnv(i), 120_000);
      await balancer!.untilStatus(name, 'UP', 60_000);
      console.log(
        `# ${name}: out of the balancer after ${down} ms, exited after ${exited} ms, back in after ${Date.now() - t1} ms; ${sent - before} requests meanwhile`,
      );
      assert.ok(sent > before, 'the steady clients kept going');
    }
  } finally {
    running = false;
    await lanes;
    agent.destroy();
  }
  console.log(`# rolling restart: ${sent} requests through the balancer, ${failures.length} failed`);
  assert.equal(failures, []);
});

test.run();
