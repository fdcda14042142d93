import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { runCli } from '../../helpers/cli.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { scrape } from '../../helpers/metrics.js';
import { failureOf, tallyOutcomes } from '../../helpers/answers.js';

// docs/throttling.md "Plans and overrides": two hosts (two clusters of two web workers) on one Redis and one
// database. A plan given with `plan:set`, an override set with `limit:override` and one ended with `limit:remove`
// apply on both hosts within 1 s of the command's exit, exactly (concurrent requests spread over both hosts admit
// the new limit, not one more); an override ends by itself at --until; each change is in `limit:audit`.

const USER_LIMIT = 5;
const PARTNER_LIMIT = 12;
const ANON_LIMIT = 3;
const test = suite('plans and overrides: 2 hosts × WEB_CONCURRENCY=2 on one Redis');
let hosts: RunningCluster[] = [];
let env: Record<string, string> = {};
let dropDatabase: () => Promise<void> = async () => {};
const tokens: Record<string, string> = {};

interface Answer {
  status: number;
  failure?: string;
}

/** GET `path` on a connection of its own, as `headers` say; its status, or 0 and why it got no answer. */
function hit(base: string, path: string, headers: Record<string, string>): Promise<Answer & { body: string }> {
  return new Promise((resolve) => {
    const failed = (error: unknown) => resolve({ status: 0, failure: failureOf(error), body: '' });
    const req = httpRequest(new URL(path, base), { agent: false, headers }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', failed);
    });
    req.on('error', failed);
    req.end();
  });
}

const asUser = (name: string) => ({ Authorization: `Bearer ${tokens[name]}` });
const fromAddress = (ip: string) => ({ 'X-Forwarded-For': ip });

/** `count` concurrent requests of one client, alternating between the hosts: the outcomes, tallied. */
async function burst(count: number, headers: Record<string, string>): Promise<Record<string, number>> {
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) => hit(hosts[i % hosts.length]!.base, '/api/tasks/', headers)),
  );
  return tallyOutcomes(answers);
}

/** A scope's row of /api/rate-limits/ for the caller. */
interface RateRow {
  scope: string;
  rate: string;
  remaining: number | null;
  plan: string | null;
  override_until: string | null;
}

/** `scope`'s row for this client, as `host`'s /api/rate-limits/ says (the read counts against it too). */
async function rateOn(host: RunningCluster, scope: string, headers: Record<string, string>): Promise<RateRow> {
  const answer = await hit(host.base, '/api/rate-limits/', headers);
  if (answer.status !== 200)
    return { scope, rate: `status ${answer.status}`, remaining: null, plan: null, override_until: null };
  return (JSON.parse(answer.body) as RateRow[]).find((row) => row.scope === scope)!;
}

/** `scope`'s row for this client on each host. */
function ratesOnHosts(scope: string, headers: Record<string, string>): Promise<RateRow[]> {
  return Promise.all(hosts.map((host) => rateOn(host, scope, headers)));
}

/**
 * Runs a command of the CLI that changes plans or overrides, and waits until 1 s has passed since it exited: by
 * then every worker of both hosts must apply the change (docs/throttling.md "Plans and overrides").
 */
async function change(...args: string[]) {
  const run = await cli(...args);
  await sleep(1_000);
  return run;
}

/** The quota `RateLimit-Policy` names in an answer to this client (a 429 names it too). */
async function quotaOf(host: RunningCluster, headers: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL('/api/tasks/', host.base), { agent: false, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(/;q=(\d+)/.exec(String(res.headers['ratelimit-policy']))?.[1] ?? 'none'));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The `policies` of a 429 in problem details (docs/api.md "Problem details") to this client. */
async function violated(headers: Record<string, string>): Promise<unknown> {
  const answer = await hit(hosts[0]!.base, '/api/tasks/', { ...headers, Accept: 'application/problem+json' });
  assert.is(answer.status, 429, answer.body);
  return (JSON.parse(answer.body) as { policies: unknown }).policies;
}

async function cli(...args: string[]) {
  const run = await runCli(env, args);
  assert.is(run.code, 0, `cli ${args.join(' ')}: ${run.stderr}`);
  return run;
}

test.before(async () => {
  const database = await createTestDatabase('plans');
  dropDatabase = database.drop;
  env = {
    ...testStoresEnv('plans', database.url),
    WEB_CONCURRENCY: '2',
    TRUST_PROXY_HOPS: '1',
    THROTTLE_ANON: `${ANON_LIMIT}/min`,
    THROTTLE_USER: `${USER_LIMIT}/min`,
    THROTTLE_PLANS: `partner: user=${PARTNER_LIMIT}/min; free: user=2/min`,
    // Exactness is promised for checks the store answers: a loaded host's slow check is not admitted uncounted.
    THROTTLE_TIMEOUT_MS: '5000',
    DATABASE_POOL_SIZE: '4',
  };
  hosts = await Promise.all([startCluster(env, 120_000), startCluster(env, 120_000)]);
  const db = connectDatabase(database.url, 1);
  for (const name of ['ada', 'bob', 'cy', 'dee', 'eve']) {
    await createUser(db, name, 'a-long-password');
    tokens[name] = (await issueToken(db, name, 'a-long-password', 3_600_000, new Date()))!.token;
  }
  await db.destroy();
});

test.after(async () => {
  await Promise.allSettled(hosts.map((host) => host.stop()));
  await dropDatabase();
});

test('plan:set applies on both hosts within 1 s, enforced exactly across them; /api/rate-limits/ shows it', async () => {
  await change('plan:set', 'ada', 'partner', '--reason', 'launch', '--by', 'ops-test');
  assert.equal(await burst(40, asUser('ada')), { '200 admitted': PARTNER_LIMIT, '429 refused': 40 - PARTNER_LIMIT });
  assert.equal(await violated(asUser('ada')), [{ scope: 'user', quota: PARTNER_LIMIT, window: 60, plan: 'partner' }]);
  // A user given another plan, and one given none, keep theirs.
  await change('plan:set', 'dee', 'free');
  assert.equal(
    (await ratesOnHosts('user', asUser('dee'))).map((row) => [row.rate, row.plan, row.override_until]),
    [
      ['2/min', 'free', null],
      ['2/min', 'free', null],
    ],
  );
  assert.equal(await burst(10, asUser('cy')), { '200 admitted': USER_LIMIT, '429 refused': 10 - USER_LIMIT });
});

test('limit:override applies on both hosts within 1 s, exactly, and ends by itself at --until', async () => {
  const set = await change(
    'limit:override',
    'user',
    'bob',
    'user=20/min',
    '--until',
    '10s',
    '--reason',
    'launch week',
    '--by',
    'ops-test',
  );
  assert.equal(await burst(40, asUser('bob')), { '200 admitted': 20, '429 refused': 20 });
  const id = /override #(\d+)/.exec(set.stdout)?.[1];
  assert.equal(await violated(asUser('bob')), [{ scope: 'user', quota: 20, window: 60, override: id }]);
  await change('limit:override', 'user', 'eve', 'user=30/min', '--until', '1h', '--reason', 'partner trial');
  const [row] = await ratesOnHosts('user', asUser('eve'));
  assert.is(row!.rate, '30/min');
  assert.is(row!.plan, 'default');
  assert.ok(Math.abs(Date.parse(row!.override_until!) - Date.now() - 3_600_000) < 60_000, row!.override_until!);
  // Past --until the settings' rate is back, on both hosts, with no command: bob has spent far more than 5.
  // --until 10s counts from the command's own start, which a loaded host may delay: the end it printed.
  const ends = Date.parse(/ until (\S+)/.exec(set.stdout)?.[1] ?? '');
  assert.ok(Number.isFinite(ends), set.stdout);
  await sleep(Math.max(0, ends - Date.now()) + 1_000);
  assert.equal(await Promise.all(hosts.map((host) => quotaOf(host, asUser('bob')))), [
    `${USER_LIMIT}`,
    `${USER_LIMIT}`,
  ]);
  assert.equal(await burst(4, asUser('bob')), { '429 refused': 4 });
});

test('an address prefix override counts each address of it by the override; limit:remove ends it within 1 s', async () => {
  const run = await change(
    'limit:override',
    '203.0.113.0/24',
    'anon=10/min',
    '--until',
    '1h',
    '--reason',
    'partner NAT',
  );
  const id = /override #(\d+)/.exec(run.stdout)?.[1];
  assert.ok(id, run.stdout);
  assert.equal(await burst(16, fromAddress('203.0.113.77')), { '200 admitted': 10, '429 refused': 6 });
  assert.equal(await burst(8, fromAddress('198.51.100.77')), {
    '200 admitted': ANON_LIMIT,
    '429 refused': 8 - ANON_LIMIT,
  });
  const listed = await cli('limit:overrides');
  assert.match(listed.stdout, new RegExp(`#${id}\\s+address 203\\.0\\.113\\.0/24\\s+anon=10/min`));
  // The override in force is on the host's gauge, with its end.
  const { samples } = await scrape(hosts[0]!.metricsBase);
  const gauge = samples.find((s) => s.name === 'paceline_throttle_override_ends_seconds' && s.labels.override === id);
  assert.ok(gauge && gauge.value * 1000 > Date.now(), `the override is on the gauge: ${JSON.stringify(gauge)}`);
  await change('limit:remove', id!, '--reason', 'done');
  assert.equal(await burst(8, fromAddress('203.0.113.78')), {
    '200 admitted': ANON_LIMIT,
    '429 refused': 8 - ANON_LIMIT,
  });
});

test('limit:audit lists every change: who, what, before and after, why; refusals are counted by plan', async () => {
  const audit = await cli('limit:audit');
  const lines = audit.stdout.trim().split('\n');
  assert.match(
    lines.find((l) => l.includes('override-removed'))!,
    /address 203\.0\.113\.0\/24 .*"done"/,
  );
  assert.match(
    lines.find((l) => l.includes('plan-set') && l.includes('user ada'))!,
    /ops-test .*\{"plan":"default"\} → \{"plan":"partner"\}.*"launch"/,
  );
  assert.match(
    lines.find((l) => l.includes('override-set') && l.includes('user bob'))!,
    /ops-test .*"user":"20\/min".*"launch week"/,
  );
  const plans = await cli('plans');
  assert.match(plans.stdout, /partner: user=12\/min; 1 user\(s\)/);
  const { samples } = await scrape(hosts[0]!.metricsBase);
  const byPlan = (plan: string) =>
    samples
      .filter((s) => s.name === 'paceline_throttle_plan_refusals_total' && s.labels.plan === plan)
      .reduce((sum, s) => sum + s.value, 0);
  assert.ok(
    byPlan('partner') > 0 && byPlan('default') > 0,
    `refusals by plan: partner ${byPlan('partner')}, default ${byPlan('default')}`,
  );
});

test('the commands refuse what they cannot do, in one line', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['plan:set', 'ada', 'gold'], /no plan "gold": THROTTLE_PLANS declares partner, free/],
    [['plan:set', 'nobody', 'partner'], /no user "nobody"/],
    [['limit:override', 'user', 'ada', 'user=10/min', '--reason', 'x'], /needs --until/],
    [['limit:override', 'user', 'ada', 'user=10/min', '--until', '7d'], /needs --reason/],
    [['limit:override', 'user', 'ada', 'anon=10/min', '--until', '7d', '--reason', 'x'], /anon counts addresses/],
    [['limit:override', 'user', 'ada', 'user=lots', '--until', '7d', '--reason', 'x'], /user: /],
    [
      ['limit:override', '999.1.1.1', 'anon=1/min', '--until', '7d', '--reason', 'x'],
      /neither "user NAME" nor an address/,
    ],
    [['limit:override', 'user', 'ada', 'user=1/min', '--until', '2020-01-01T00:00:00Z', '--reason', 'x'], /has passed/],
    [['limit:remove', '424242'], /no override #424242 in force/],
  ];
  for (const [args, expected] of cases) {
    const run = await runCli(env, args);
    assert.is(run.code, 1, `${args.join(' ')} exits 1`);
    assert.match(run.stderr, expected, args.join(' '));
    assert.is(run.stderr.trim().split('\n').length, 1, `${args.join(' ')}: one line, ${run.stderr}`);
  }
});

test.run();
