// Needs: prometheus
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { childPids, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { runCli } from '../../helpers/cli.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { postLogin } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';
import { scrape, sumOf } from '../../helpers/metrics.js';
import { hasTool, promtool, resultValues, startPrometheus, type RunningPrometheus } from '../../helpers/prometheus.js';

// docs/architecture.md "Observability": the shipped alert rules and scrape config pass promtool, a live scrape passes
// `promtool check metrics`, and every PromQL expression of the Grafana dashboard and of the
// alert rules returns data from a real Prometheus that scraped a real host (2 web workers and a
// job worker) under traffic with 429s in three scopes and a crowd of writes past the workers' pinned
// admission limit. Three panels are held to what they claim (docs/operations.md "Grafana dashboard"): the
// lag of the worst child, refusals in the limit's unit, and a host's requests against its summed limit.

const RULES = resolve('ops/prometheus/alerts.yml');
/** The dashboard as operators import it: the JSON that `node ops/grafana/dashboard.ts` prints. */
const DASHBOARD = JSON.parse(execFileSync(process.execPath, ['ops/grafana/dashboard.ts'], { encoding: 'utf8' }));
/** What Grafana would put in place of its variables for a 5-minute dashboard of every host. */
const GRAFANA_VARIABLES: Array<[RegExp, string]> = [
  [/\$__rate_interval/g, '1m'],
  [/\$__range/g, '5m'],
  [/\$__interval/g, '15s'],
  [/\$\{?instance\}?/g, '.*'],
];
const missing = ['prometheus', 'promtool'].filter((tool) => !hasTool(tool));
/** How long the lag test stops one child at a time. */
const STALL_MS = 250;
/** Each web worker's admission limit, pinned (ADMISSION_LIMIT_MIN = MAX), with no queue behind it. */
const WORKER_LIMIT = 2;
/** Writes sent at once whose bodies never come: more than the 2 workers have slots for, whatever worker gets each. */
const CROWD = 3 * WORKER_LIMIT;

/** `expr` with Grafana's variables put in. */
function withGrafanaVariables(expr: string): string {
  return GRAFANA_VARIABLES.reduce((text, [pattern, value]) => text.replace(pattern, value), expr);
}

/** The query `refId` of the panel titled `title`, as Grafana sends it. */
function panelQuery(title: string, refId: string): string {
  const panel = (DASHBOARD.panels as any[]).find((p) => p.title === title);
  const target = panel?.targets?.find((t: any) => t.refId === refId);
  assert.ok(target, `the dashboard has a panel "${title}" with a query ${refId}`);
  return withGrafanaVariables(target.expr);
}

/** Each series of an instant query by its `label`: its value. */
async function valuesBy(expr: string, label: string): Promise<Record<string, number>> {
  const { result } = await prometheus!.query(expr);
  return Object.fromEntries(
    (result as Array<{ metric: Record<string, string>; value: [number, string] }>).map((series) => [
      series.metric[label] ?? '',
      Number(series.value[1]),
    ]),
  );
}

const test = suite('prometheus');
let cluster: RunningCluster | undefined;
let prometheus: RunningPrometheus | undefined;
let dropDatabase: () => Promise<void> = async () => {};

/** Logs in and makes one request of each kind, so every series exists before the traffic. */
async function seedSeries(base: string, databaseUrl: string): Promise<string> {
  const db = connectDatabase(databaseUrl, 1);
  await createUser(db, 'watcher', 'watcher-password').finally(() => db.destroy());
  // A 503 is tried again (a clean-clone run saw one just after the start).
  const login = await postLogin(base, 'watcher', 'watcher-password');
  assert.is(login.status, 200, login.text);
  const token = login.body.token as string;
  assert.is((await request(base, 'GET', '/api/tasks/')).status, 200);
  assert.is((await request(base, 'GET', '/api/tasks/987654/')).status, 404);
  assert.is((await request(base, 'GET', '/api/tasks/', { token })).status, 200);
  assert.is((await request(base, 'POST', '/api/tasks/', { token, body: { title: 'watch' } })).status, 201);
  return token;
}

/** The traffic the dashboard shows: creates, lists, a 404, 400s and 429s in anon, user and token-obtain. */
async function driveTraffic(base: string, token: string): Promise<void> {
  for (let i = 0; i < 4; i += 1)
    assert.is(
      (await request(base, 'POST', '/api/auth/token/', { body: { username: 'watcher', password: 'no' } })).status,
      i < 2 ? 400 : 429,
    );
  for (let i = 0; i < 7; i += 1)
    assert.is((await request(base, 'POST', '/api/tasks/', { token, body: { title: `watch ${i}` } })).status, 201);
  for (let i = 0; i < 10; i += 1)
    assert.is((await request(base, 'GET', '/api/tasks/', { token })).status, i < 6 ? 200 : 429);
  for (let i = 0; i < 6; i += 1) assert.is((await request(base, 'GET', '/api/tasks/')).status, i < 3 ? 200 : 429);
  assert.is((await request(base, 'GET', '/healthz')).status, 200);
}

/** A token of a user of its own, so that the crowd's writes leave the watcher's budget as driveTraffic counts it. */
async function crowdToken(databaseUrl: string): Promise<string> {
  const db = connectDatabase(databaseUrl, 1);
  try {
    await createUser(db, 'crowd', 'crowd-password');
    return (await issueToken(db, 'crowd', 'crowd-password', 3_600_000, new Date()))!.token;
  } finally {
    await db.destroy();
  }
}

/**
 * CROWD writes at once, each on a connection of its own, whose bodies never come: those that start
 * hold their worker's slot, the rest find it full with no queue and are shed. Once every one was
 * started or shed, the held ones are let go; resolves when no request is in progress any more.
 */
async function sendCrowd(port: number, token: string): Promise<void> {
  const head =
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
    'Content-Type: application/json\r\nContent-Length: 40\r\n\r\n';
  const admission = async () => {
    const { samples } = await scrape(cluster!.metricsBase);
    return {
      running: sumOf(samples, 'paceline_admission_in_progress'),
      shed: sumOf(samples, 'paceline_admission_shed_total'),
    };
  };
  const shedBefore = (await admission()).shed;
  const settled = async () => {
    const { running, shed } = await admission();
    return running + shed - shedBefore;
  };
  const sockets = Array.from({ length: CROWD }, () => connect({ port, host: '127.0.0.1' }).on('error', () => {}));
  for (const socket of sockets) socket.write(head);
  try {
    for (let i = 0; (await settled()) < CROWD; i += 1) {
      if (i > 100) assert.unreachable(`only ${await settled()} of the crowd of ${CROWD} were started or shed`);
      await sleep(50);
    }
  } finally {
    for (const socket of sockets) socket.destroy();
  }
  for (let i = 0; (await admission()).running > 0; i += 1) {
    if (i > 100) assert.unreachable("the crowd's held writes never ended");
    await sleep(50);
  }
}

/** Waits until Prometheus's latest scrape holds every request the host has answered so far. */
async function untilScraped(): Promise<void> {
  // Both read again each time: a request still being answered when the host was first read (a probe of the set-up)
  // is counted a moment later, and Prometheus then has more than that first reading.
  const served = async () => sumOf((await scrape(cluster!.metricsBase)).samples, 'paceline_http_requests_total');
  const seen = async () => resultValues(await prometheus!.query('sum(paceline_http_requests_total)'))[0];
  for (let i = 0; ; i += 1) {
    const [host, scraped] = [await served(), await seen()];
    if (scraped === host) return;
    if (i > 150) assert.unreachable(`Prometheus never scraped all ${host} requests (has ${scraped})`);
    await sleep(200);
  }
}

/** The primary starts the job worker after the web workers: waits until its gauge is in /metrics. */
async function untilJobWorkerReports(): Promise<void> {
  for (let i = 0; !(await scrape(cluster!.metricsBase)).samples.some((s) => s.name === 'paceline_jobs'); i += 1) {
    if (i > 300) assert.unreachable('the job worker never reported paceline_jobs');
    await sleep(200);
  }
}

// uvu reports a `before` hook that throws as every test failed, without its error (its runner returns from a
// `finally`): the hook prints its own error first, so that a failed start says why.
test.before(() =>
  startAll().catch((error: unknown) => {
    console.error('prometheus.test.ts: the set-up failed:', error);
    throw error;
  }),
);

async function startAll(): Promise<void> {
  // npm test installs them (ops/ensure-tools.sh); without them these checks fail rather than pass unrun.
  assert.equal(missing, [], 'prometheus and promtool are installed (Debian: apt-get install prometheus)');
  const database = await createTestDatabase('prometheus');
  dropDatabase = database.drop;
  const env = {
    ...testStoresEnv('prometheus', database.url),
    WEB_CONCURRENCY: '2',
    JOB_CONCURRENCY: '1',
    THROTTLE_ANON: '5/min',
    THROTTLE_USER: '15/min',
    THROTTLE_TOKEN_OBTAIN: '3/min',
    JOB_METRICS_INTERVAL_MS: '1000',
    ADMISSION_LIMIT_MIN: String(WORKER_LIMIT),
    ADMISSION_LIMIT_MAX: String(WORKER_LIMIT),
    ADMISSION_QUEUE_SIZE: '0',
  };
  cluster = await startCluster(env);
  await untilJobWorkerReports();
  // An override in force for the "Overrides in force" panel, for addresses no request of the traffic comes from.
  const override = await runCli(env, [
    'limit:override',
    '192.0.2.0/24',
    'anon=100/min',
    '--until',
    '1h',
    '--reason',
    'the dashboard lists it',
  ]);
  assert.is(override.code, 0, override.stderr);
  prometheus = await startPrometheus(
    join(process.env.TEST_TMP_DIR!, `prometheus-${randomBytes(3).toString('hex')}`),
    `127.0.0.1:${cluster.metricsPort}`,
    [RULES],
  );
  const token = await seedSeries(cluster.base, database.url);
  const crowd = await crowdToken(database.url);
  // A counter's series starts at its first count, which no rate shows: the second crowd's are.
  await sendCrowd(cluster.port, crowd);
  await untilScraped(); // rates need a sample before the traffic and one after
  await driveTraffic(cluster.base, token);
  await sendCrowd(cluster.port, crowd);
  await untilScraped();
  await sleep(2_500); // a few more scrapes and rule evaluations
}

test.after(async () => {
  await prometheus?.stop();
  await cluster?.stop();
  await dropDatabase();
});

test('promtool accepts the alert rules, the scrape config and a live scrape', async () => {
  for (const args of [
    ['check', 'rules', RULES],
    ['check', 'config', 'ops/prometheus/prometheus.yml'],
  ]) {
    const run = promtool(args);
    assert.is(run.status, 0, run.output);
  }
  const { text } = await scrape(cluster!.metricsBase);
  const metrics = promtool(['check', 'metrics'], text);
  assert.ok(metrics.status === 0 && metrics.output.trim() === '', `promtool check metrics: ${metrics.output}`);
});

// That the dashboard imports as is (a datasource variable, the panels it must have) is a lint check
// (ops/lint/documents.ts); here its queries meet a real Prometheus.
test('every dashboard and alert expression returns data from a real Prometheus scraping the host', async () => {
  const groups = (await prometheus!.api('/api/v1/rules')).groups as any[];
  const rules = groups.flatMap((g) => g.rules);
  assert.ok(rules.length >= 8, `${rules.length} rules loaded`);
  const checks: Array<{ where: string; expr: string }> = (DASHBOARD.panels as any[]).flatMap((panel) =>
    (panel.targets ?? []).map((t: any) => ({ where: `panel "${panel.title}" ${t.refId}`, expr: t.expr })),
  );
  // An annotation marks what its `<signal> > 0` selects; its signal must return data like a panel's.
  for (const annotation of DASHBOARD.annotations.list.filter((a: any) => a.expr)) {
    const signal = /^([\s\S]+)\s>\s+0$/.exec(annotation.expr.trim());
    assert.ok(signal, `annotation ${annotation.name} is not "<signal> > 0": ${annotation.expr}`);
    checks.push({ where: `annotation "${annotation.name}"`, expr: `${signal![1]} >= bool 0` });
  }
  for (const rule of rules) {
    assert.is(rule.health, 'ok', `${rule.name}: ${rule.lastError ?? ''}`);
    const bool = /^([\s\S]+)\s(==|!=|>=|<=|>|<)\s+(-?[\d.]+)$/.exec(rule.query.trim());
    assert.ok(bool, `alert ${rule.name} is not "<signal> <comparison> <number>": ${rule.query}`);
    checks.push({ where: `alert ${rule.name}`, expr: `${bool![1]} ${bool![2]} bool ${bool![3]}` });
  }
  const problems: string[] = [];
  for (const { where, expr } of checks) {
    const promql = withGrafanaVariables(expr);
    if (/\$[a-z_{]/i.test(promql)) problems.push(`${where}: unknown variable in ${promql}`);
    const values = await prometheus!.query(promql).then(resultValues, (error: Error) => [`${error.message}`]);
    if (!values.some((v) => typeof v === 'number' && Number.isFinite(v)))
      problems.push(`${where}: no data (${JSON.stringify(values)}) for ${promql}`);
  }
  assert.equal(problems, [], `\n${problems.join('\n')}`);
});

test('the past-capacity row shows each host against its summed limit, and what it shed by class and reason', async () => {
  const start = DASHBOARD.panels.findIndex((p: any) => p.type === 'row' && p.title === 'Past capacity');
  const end = DASHBOARD.panels.findIndex((p: any, i: number) => i > start && p.type === 'row');
  const row = (DASHBOARD.panels as any[]).slice(start + 1, end);
  assert.is(row.length, 6, row.map((p) => p.title).join(', '));
  for (const panel of row)
    for (const { refId } of panel.targets) {
      const values = resultValues(await prometheus!.query(panelQuery(panel.title, refId)));
      assert.ok(values.some(Number.isFinite), `${panel.title} ${refId}: ${JSON.stringify(values)}`);
    }
  const host = `127.0.0.1:${cluster!.metricsPort}`;
  const inProgress = 'Requests in progress against the learnt limit';
  assert.equal(
    await valuesBy(panelQuery(inProgress, 'B'), 'instance'),
    { [host]: 2 * WORKER_LIMIT },
    "the workers' limits summed",
  );
  assert.equal(await valuesBy(panelQuery(inProgress, 'A'), 'instance'), { [host]: 0 }, 'the crowd let go');
  assert.equal(await valuesBy(panelQuery('Queued requests', 'A'), 'instance'), { [host]: 0 });
  // However the primary spread the crowd, at least CROWD - 2 × WORKER_LIMIT writes found no slot.
  const { result } = await prometheus!.query(panelQuery('Shed per second by class and reason', 'A'));
  const series = result as Array<{ metric: Record<string, string>; value: [number, string] }>;
  // Every class and reason is exported from the start at 0; only what was shed rises above it.
  assert.ok(series.length >= 12, `${series.length} shed series`);
  const shed = series.filter(({ value }) => Number(value[1]) > 0);
  assert.equal(
    shed.map(({ metric }) => [metric.instance, metric.class, metric.reason]),
    [[host, 'write', 'full']],
  );
  assert.ok(Number(shed[0]!.value[1]) > 0, `shed per second: ${shed[0]!.value[1]}`);
  const waited = await valuesBy(panelQuery('Queue time p99 by class', 'A'), 'class');
  assert.equal(Object.keys(waited).sort(), ['anonymous', 'read', 'write'], 'every class the traffic started');
});

test('the lag panel shows the worst child: one stalled child is not averaged with the idle ones', async () => {
  const lag = panelQuery('Event loop lag p99', 'A');
  // prom-client already takes the longest delay of any process as the host's `max`.
  const longest = withGrafanaVariables('max by (instance) (nodejs_eventloop_lag_max_seconds{instance=~"$instance"})');
  const [stalled] = childPids(cluster!.child.pid!);
  assert.ok(stalled, 'the primary has children');
  // Stopped STALL_MS at a time, running 20 ms in between: that child's loop records a few delays
  // between two scrapes, most of them a stall, so its p99 is its longest delay, the host's longest;
  // the two others idle at a few ms. An average over the three children would show about a third.
  let stalling = true;
  const stall = (async () => {
    while (stalling) {
      process.kill(stalled!, 'SIGSTOP');
      await sleep(STALL_MS);
      process.kill(stalled!, 'SIGCONT');
      await sleep(20);
    }
  })();
  const seen: Array<{ p99: number; max: number }> = [];
  const worstShown = () => {
    const last = seen.at(-1);
    return last !== undefined && last.p99 >= (0.8 * STALL_MS) / 1000 && last.p99 >= 0.95 * last.max;
  };
  try {
    // Each scrape reads the delays since the one before: a few scrapes into the stalls are enough.
    for (let i = 0; i < 40 && !worstShown(); i += 1) {
      await sleep(250);
      const [p99, max] = await Promise.all([lag, longest].map(async (q) => resultValues(await prometheus!.query(q))));
      seen.push({ p99: p99![0] ?? 0, max: max![0] ?? 0 });
    }
  } finally {
    stalling = false;
    await stall;
  }
  assert.ok(worstShown(), `p99 and longest delay shown (s): ${JSON.stringify(seen)}`);
});

test("the heaviest-client panel counts refusals per window of the scope's limit, the limit line's unit", async () => {
  const title = "Heaviest client against its scope's limit";
  const refused = await valuesBy(panelQuery(title, 'A'), 'scope');
  const limit = await valuesBy(panelQuery(title, 'B'), 'scope');
  // driveTraffic's client was refused 3 anonymous requests (5/min) and 4 of its user's (15/min),
  // all within THROTTLE_TOP_WINDOW (5 minutes): per 1-minute window, 3/5 and 4/5 on average.
  const per = (count: number) => (count * 60) / 300;
  for (const [scope, count, allowed] of [
    ['anon', 3, 5],
    ['user', 4, 15],
  ] as const) {
    assert.ok(Math.abs(refused[scope]! - per(count)) < 1e-9, `${scope}: ${refused[scope]} refused per window`);
    assert.is(limit[scope], allowed, `${scope}: the limit per window`);
  }
});

test.run();
