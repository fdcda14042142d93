import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import hashSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { seedCompletedHistory } from '../../helpers/seed-events.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { describeOthers, send, sendFresh, tallyOutcomes, type Outcome } from '../../helpers/answers.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { scrape, sumOf } from '../../helpers/metrics.js';
import { random } from '../../helpers/random.js';
import { startRedisCluster, type ClusterNode, type TestRedisCluster } from '../../helpers/redis-cluster.js';

// docs/scaling.md "Redis Cluster": two real Paceline hosts (4 web workers and a jobs child each) on one
// PostgreSQL and a real Redis Cluster of 3 masters with a replica each. Limits stay exact, reports
// run, cursor walks stay exact while both hosts write; then a master is SIGKILLed under traffic,
// its replica takes over, and the test measures what that cost and asserts what must hold.

const TMP = process.env.TEST_TMP_DIR ?? '';
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

const LIMIT = 20;
// The hosts' deadlines here (generous: ten processes share two cores), and the bound docs/scaling.md "Redis
// Cluster" puts on an answer during a failover (four turns, three Redis calls), with one statement timeout for a
// write's queries and admission's queue on this loaded host. No request of the failover is waited for longer.
const DATABASE_WAIT_MS = 5_000;
const THROTTLE_TIMEOUT_MS = 5_000;
const STATEMENT_TIMEOUT_MS = 5_000;
const ANSWER_DEADLINE_MS = 4 * DATABASE_WAIT_MS + 3 * THROTTLE_TIMEOUT_MS + STATEMENT_TIMEOUT_MS + 1_000;
const SEEDED_TASKS = 600;
const test = suite('Paceline on a Redis Cluster: 2 hosts × 4 web workers, 3 masters + 3 replicas');
let redisCluster: TestRedisCluster | undefined;
let hosts: RunningCluster[] = [];
let inspector: Cluster | undefined;
let dropDatabase: () => Promise<void> = async () => {};
let token = '';
const prefix = `test:rc:${randomBytes(4).toString('hex')}:`;
const range = { from: '2026-11-01', to: '2026-11-03' };

/** GET `path` on a connection of its own (so every worker of a host gets some); as the test saw it. */
const hit = (base: string, path: string, headers: Record<string, string>) =>
  sendFresh(base, path, headers, ANSWER_DEADLINE_MS);

/** Runs `work` over `items`, at most `inFlight` at a time. */
async function pool<T>(items: T[], inFlight: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) await work(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, items.length) }, lane));
}

const anon = (ip: string) => ({ 'X-Forwarded-For': ip });
const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;
const slotOfIp = (ip: string) => hashSlot(`ip:${ip}`);
const owns = (node: ClusterNode, slot: number) => node.slots.some(([a, b]) => a <= slot && slot <= b);

async function allWorkersUp(host: RunningCluster): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (!host.output().includes('Paceline is up')) {
    if (Date.now() > deadline) throw new Error(`not all web workers came up:\n${host.output()}`);
    await sleep(100);
  }
}

/** Polls a report on alternating hosts until it is done or failed; its resource. */
async function reportOutcome(
  path: string,
  timeoutMs: number,
): Promise<{ status: string; attempts: number; created_at: string }> {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; ; i++) {
    const response = await request(hosts[i % 2]!.base, 'GET', path, { token }).catch(() => undefined);
    if (response?.status === 200 && ['done', 'failed'].includes(response.body.status)) return response.body;
    if (Date.now() > deadline) throw new Error(`${path} stayed ${response?.text}`);
    await sleep(200);
  }
}

/** POSTs a report, again while the answer is a 503, on alternating hosts; its path and the 503s it met. */
async function requestReport(): Promise<{ path: string; refused: number }> {
  for (let refused = 0; refused < 200; refused++) {
    const response = await request(hosts[refused % 2]!.base, 'POST', '/api/reports/', { token, body: range }).catch(
      () => undefined,
    );
    if (response?.status === 202) return { path: new URL(response.headers.get('location')!).pathname, refused };
    if (response && response.status !== 503)
      throw new Error(`POST /api/reports/ answered ${response.status} ${response.text}`);
    await sleep(100);
  }
  throw new Error('POST /api/reports/ never accepted');
}

test.before(async () => {
  try {
    await setUp();
  } catch (error) {
    // uvu reports a failed hook only as failed tests: say why.
    console.error(error);
    throw error;
  }
});

async function setUp(): Promise<void> {
  const [cluster, database] = await Promise.all([
    startRedisCluster(join(TMP, 'redis-cluster'), { masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 3_000 }),
    createTestDatabase('redis-cluster'),
  ]);
  redisCluster = cluster;
  dropDatabase = database.drop;
  const db = connectDatabase(database.url, 1);
  const user = await createUser(db, 'alice', 'alice-pass-123');
  if (!user.ok) throw new Error('could not create alice');
  await seedCompletedHistory(db, {
    tasks: SEEDED_TASKS,
    owner: user.user,
    start: new Date('2026-11-01T06:00:00Z'),
    spanMs: 2 * 86_400_000,
  });
  token = (await issueToken(db, 'alice', 'alice-pass-123', 3_600_000, new Date()))!.token;
  await db.destroy();
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: '',
    REDIS_CLUSTER_NODES: cluster.seeds,
    REDIS_PREFIX: prefix,
    CURSOR_SECRET: 'redis-cluster-test-secret-0123456789',
    WEB_CONCURRENCY: '4',
    JOB_CONCURRENCY: '1',
    TRUST_PROXY_HOPS: '1',
    THROTTLE_ANON: `${LIMIT}/hour`,
    THROTTLE_USER: '100000/min',
    THROTTLE_REPORTS: '100000/min',
    // Closed: a check Redis cannot answer is a 503, never an uncounted admission, so any admission
    // beyond a limit is a lost entry.
    THROTTLE_FAILURE_MODE: 'closed',
    THROTTLE_TIMEOUT_MS: String(THROTTLE_TIMEOUT_MS),
    DATABASE_WAIT_MS: String(DATABASE_WAIT_MS),
    DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
    LOG_LEVEL: 'info',
    ACCESS_LOG: 'off',
    DATABASE_POOL_SIZE: '3',
    REPORT_BATCH_SIZE: '100',
    REPORT_BATCH_DELAY_MS: '100',
    REPORT_SWEEP_INTERVAL_MS: '3000',
    JOB_LOCK_DURATION_MS: '5000',
    JOB_STALLED_INTERVAL_MS: '2000',
  };
  hosts = await Promise.all([startCluster(env, 300_000), startCluster(env, 300_000)]);
  await Promise.all(hosts.map(allWorkersUp));
  inspector = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0]! }], { redisOptions: cluster.adminCredentials });
  inspector.on('error', () => {});
}

test.after(async () => {
  await Promise.allSettled(hosts.map((host) => host.stop()));
  inspector?.disconnect();
  await redisCluster?.stop();
  await dropDatabase();
});

/** Keys under `pattern` on each master, by port. */
async function keysPerMaster(pattern: string): Promise<Map<number, number>> {
  const masters = inspector!.nodes('master');
  const counts = await Promise.all(
    masters.map(async (node) => [node.options.port!, (await node.keys(pattern)).length] as const),
  );
  return new Map(counts);
}

test(`30 clients × ${LIMIT + 10} requests over both hosts at once: each admitted exactly ${LIMIT}, keys on every master`, async () => {
  const readiness = await request(hosts[0]!.base, 'GET', '/readyz');
  assert.equal(readiness.body, { status: 'ready', checks: { database: 'ok', redis: 'ok' } });
  const clients = Array.from({ length: 30 }, (_, i) => `198.51.100.${i + 1}`);
  const requests = clients.flatMap((ip) => Array.from({ length: LIMIT + 10 }, () => ip));
  const next = random(20_261_124);
  for (let i = requests.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [requests[i], requests[j]] = [requests[j]!, requests[i]!];
  }
  const answers = new Map<string, Outcome[]>(clients.map((ip) => [ip, []]));
  await pool(
    requests,
    60,
    async (ip, i) => void answers.get(ip)!.push(await hit(hosts[i % 2]!.base, '/api/tasks/', anon(ip))),
  );
  for (const ip of clients)
    assert.equal(tallyOutcomes(answers.get(ip)!), { '200 admitted': LIMIT, '429 refused': 10 }, ip);
  const perMaster = [...(await keysPerMaster(`${prefix}throttle:*`)).values()];
  assert.is(perMaster.length, 3);
  assert.ok(
    perMaster.every((n) => n > 0),
    `throttle keys on every master: ${perMaster.join(', ')}`,
  );
});

test('a report requested on one host runs in a jobs child and is read as done on the other; its queue lives in one slot', async () => {
  const { path } = await requestReport();
  const report = await reportOutcome(path, 60_000);
  assert.is(report.status, 'done');
  const bull = [...(await keysPerMaster(`${prefix}{bull}:*`)).entries()].filter(([, n]) => n > 0);
  assert.is(bull.length, 1, `BullMQ keys on one master only: ${JSON.stringify(bull)}`);
  assert.is(bull[0]![0], await redisCluster!.masterOf(hashSlot('bull')));
});

test('a cursor walk while both hosts write: every task once, in order, each write read back on the other host', async () => {
  const created: Array<{ id: number; at: number }> = [];
  const staleReads: string[] = [];
  let walking = true;
  const writer = async (w: number) => {
    for (let n = 0; n < 40 && walking; n++) {
      const response = await request(hosts[w]!.base, 'POST', '/api/tasks/', {
        token,
        body: { title: `written ${w}.${n}` },
      });
      assert.is(response.status, 201, response.text);
      created.push({ id: response.body.id, at: Date.now() });
      const readBack = await request(hosts[1 - w]!.base, 'GET', `/api/tasks/${response.body.id}/`, { token });
      if (readBack.status !== 200) staleReads.push(`task ${response.body.id}: ${readBack.status}`);
    }
  };
  const walk = async () => {
    const seen: number[] = [];
    let lastAsked = 0;
    let url: string | null = `${hosts[0]!.base}/api/tasks/?cursor=&page_size=25`;
    for (let page = 0; url; page++) {
      const target: URL = new URL(url);
      target.port = String(hosts[page % 2]!.port);
      lastAsked = Date.now();
      const response: { status: number; text: string; body: any } = await request(
        target.origin,
        'GET',
        target.pathname + target.search,
        { token },
      );
      assert.is(response.status, 200, response.text);
      seen.push(...response.body.results.map((task: { id: number }) => task.id));
      url = response.body.next;
    }
    walking = false;
    return { seen, lastAsked };
  };
  const [{ seen, lastAsked }] = await Promise.all([walk(), writer(0), writer(1)]);
  assert.ok(
    seen.every((id, i) => i === 0 || id > seen[i - 1]!),
    'strictly increasing ids',
  );
  const present = new Set(seen);
  const missing = [
    ...Array.from({ length: SEEDED_TASKS }, (_, i) => i + 1),
    ...created.filter((c) => c.at < lastAsked).map((c) => c.id),
  ].filter((id) => !present.has(id));
  assert.equal(
    missing,
    [],
    'every task that existed when the walk started, and every one acknowledged before its last page',
  );
  assert.ok(created.length > 0, 'the writers wrote during the walk');
  assert.equal(staleReads, [], 'a write acknowledged by one host is read on the other');
});

/** How the job of report `path` got into the queue, from its BullMQ record and the hosts' logs. */
async function jobOrigin(path: string, createdAt: string): Promise<string> {
  const id = path.split('/').at(-2)!;
  const added = Number(await inspector!.hget(`${prefix}{bull}:reports:${id}`, 'timestamp'));
  const notEnqueued = hosts.some((host) => host.output().includes(id) && host.output().includes('not enqueued'));
  const bySweeper = added - Date.parse(createdAt) >= 2_500;
  if (!bySweeper) return 'enqueued by its request, kept';
  return notEnqueued
    ? 'not enqueued by its request (Redis refused), added by the sweeper'
    : 'enqueued by its request, lost with the master, added again by the sweeper';
}

test('a master SIGKILLed under traffic: its replica takes over; what that costs, and what holds', async () => {
  const bullSlot = hashSlot('bull');
  const before = await redisCluster!.topology();
  const victim = before.find((node) => node.role === 'master' && owns(node, bullSlot))!;
  const replica = before.find((node) => node.masterId === victim.id)!;
  assert.ok(replica, 'the master has a replica');
  const clients = Array.from({ length: 30 }, (_, i) => `203.0.113.${i + 1}`);
  const onVictim = new Set(clients.filter((ip) => owns(victim, slotOfIp(ip))));
  assert.ok(onVictim.size > 0 && onVictim.size < clients.length, `clients on the lost master: ${onVictim.size}`);
  const seen = new Map(clients.map((ip) => [ip, [] as Outcome[]]));
  const writes: Outcome[] = [];
  const probes: Outcome[] = [];
  let round = 0;
  const sendRound = async () => {
    const r = round++;
    const body = { title: `round ${r}` };
    const write = send(hosts[r % 2]!.base, 'POST', '/api/tasks/', { token, body, deadlineMs: ANSWER_DEADLINE_MS });
    const written = write.then((outcome) => void writes.push(outcome));
    await pool(
      clients,
      15,
      async (ip, i) => void seen.get(ip)!.push(await hit(hosts[(i + r) % 2]!.base, '/api/tasks/', anon(ip))),
    );
    await written;
  };

  for (let i = 0; i < 10; i++) await sendRound();
  const first = await requestReport();
  const killedAt = Date.now();
  redisCluster!.kill(victim.port);
  const second = requestReport();
  let promotedAt = 0;
  const promoted = redisCluster!
    .waitUntil(
      (nodes) => nodes.some((node) => node.port === replica.port && node.role === 'master' && owns(node, bullSlot)),
      60_000,
    )
    .then(() => (promotedAt = Date.now()));
  // Traffic goes on during the failover: a round every half second, not waiting for the slow ones.
  const during: Array<Promise<void>> = [];
  while (!promotedAt && Date.now() - killedAt < 60_000) {
    during.push(sendRound());
    await sleep(500);
  }
  await promoted;
  let readyAt = 0;
  while (!readyAt) {
    const ready = await Promise.all(
      hosts.map((host) => send(host.base, 'GET', '/readyz', { deadlineMs: ANSWER_DEADLINE_MS })),
    );
    probes.push(...ready);
    if (ready.every(({ status }) => status === 200)) readyAt = Date.now();
    else if (Date.now() - killedAt > 90_000) assert.unreachable('the hosts never became ready again');
    else during.push(sendRound());
    await sleep(500);
  }
  await Promise.all(during);
  for (let i = 0; i < 25; i++) await sendRound();

  // What must hold: every request answered, no answer but 200, 429 or a 503 (a write 201 or 503 with
  // Retry-After); the last rounds all answered by Redis; no client on a surviving master admitted beyond its
  // limit; reports done; no process restarted. Times are from the SIGKILL.
  const all = [...seen.values()].flat();
  assert.is(describeOthers(all, [200, 429, 503], killedAt), '', 'reads: only 200, 429 and 503');
  assert.is(
    describeOthers(writes, [201, 503], killedAt),
    '',
    `writes: only 201 and 503, within ${ANSWER_DEADLINE_MS} ms`,
  );
  assert.is(writes.filter((w) => w.status === 503 && !w.retryAfter).length, 0, 'a 503 says Retry-After');
  assert.is(describeOthers(probes, [200, 503], killedAt), '', '/readyz: 200 or 503');
  const lastRounds = [...seen.values()].flatMap((answers) => answers.slice(-10));
  assert.is(
    count(
      lastRounds.map((a) => a.status),
      503,
    ),
    0,
    'the last ten rounds: every check answered',
  );
  const admitted = (ip: string) =>
    count(
      seen.get(ip)!.map((a) => a.status),
      200,
    );
  for (const ip of clients.filter((ip) => !onVictim.has(ip)))
    assert.ok(admitted(ip) <= LIMIT, `${ip} on a surviving master: ${admitted(ip)} admitted`);
  const excess = [...onVictim].map((ip) => admitted(ip) - LIMIT);
  const [r1, r2] = await Promise.all([first, second]);
  const [o1, o2] = await Promise.all([reportOutcome(r1.path, 90_000), reportOutcome(r2.path, 90_000)]);
  assert.is(o1.status, 'done', 'the report requested just before the failover');
  assert.is(o2.status, 'done', 'the report requested during the failover');
  const samples = (await Promise.all(hosts.map((host) => scrape(host.metricsBase)))).flatMap(
    (scraped) => scraped.samples,
  );
  assert.is(sumOf(samples, 'paceline_worker_restarts_total'), 0, 'no process restarted');
  const lastWrite = writes.filter((w) => w.status === 201).at(-1)!;
  for (const host of hosts)
    assert.is(
      (await request(host.base, 'GET', `/api/tasks/${lastWrite.id}/`, { token })).status,
      200,
      'the last write is read on both hosts',
    );

  // Exact again afterwards, on the promoted replica too.
  const fresh = Array.from({ length: 12 }, (_, i) => `192.0.2.${i + 1}`);
  assert.ok(fresh.some((ip) => owns(victim, slotOfIp(ip))));
  const after = new Map<string, Outcome[]>(fresh.map((ip) => [ip, []]));
  const burst = fresh.flatMap((ip) => Array.from({ length: LIMIT + 5 }, () => ip));
  await pool(
    burst,
    60,
    async (ip, i) => void after.get(ip)!.push(await hit(hosts[i % 2]!.base, '/api/tasks/', anon(ip))),
  );
  for (const ip of fresh)
    assert.equal(
      tallyOutcomes(after.get(ip)!),
      { '200 admitted': LIMIT, '429 refused': 5 },
      `${ip} after the failover`,
    );

  const window = all.filter(({ at }) => at >= killedAt && at <= readyAt);
  const victimAnswers = [...onVictim].flatMap((ip) => seen.get(ip)!);
  const firstServed = victimAnswers
    .filter(({ at, status }) => at > killedAt && status !== 503)
    .sort((a, b) => a.at - b.at)[0];
  const storeErrors = sumOf(samples, 'paceline_throttle_decisions_total', { decision: 'store_error' });
  console.log(
    [
      `# failover of the master holding {bull} (${onVictim.size} of ${clients.length} clients' slots): replica promoted ${promotedAt - killedAt} ms after the SIGKILL, both hosts ready ${readyAt - killedAt} ms after, clients on the lost slots answered again ${(firstServed?.at ?? NaN) - killedAt} ms after`,
      `# throttle checks between the kill and ready again: ${window.length}, refused 503: ${count(
        window.map((a) => a.status),
        503,
      )} (${count(
        victimAnswers.filter((a) => a.at >= killedAt && a.at <= readyAt).map((a) => a.status),
        503,
      )} of them on the lost slots); store_error decisions counted by the hosts: ${storeErrors} (in THROTTLE_FAILURE_MODE=open each would have been an uncounted admission)`,
      `# admissions beyond the limit (lost throttle entries) for the ${onVictim.size} clients on the lost master: ${excess.reduce((a, b) => a + Math.max(0, b), 0)} in all, per client ${excess.join(' ')}`,
      `# writes during the run: ${writes.length}, 201: ${count(
        writes.map((w) => w.status),
        201,
      )}, 503: ${count(
        writes.map((w) => w.status),
        503,
      )}, the slowest answered after ${Math.max(...writes.map((w) => w.at - w.sentAt))} ms`,
      `# report requested just before: ${await jobOrigin(r1.path, o1.created_at)}; done after ${o1.attempts} attempt(s), ${r1.refused} POSTs refused`,
      `# report requested during: ${await jobOrigin(r2.path, o2.created_at)}; done after ${o2.attempts} attempt(s), ${r2.refused} POSTs refused 503 first`,
    ].join('\n'),
  );
});

test.run();
