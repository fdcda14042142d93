// Needs: prometheus
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../db/connect.js';
import { createUser } from '../../src/auth/users.repository.js';
import { childPids, startCluster, type RunningCluster } from '../fixtures/cluster.js';
import { testStoresEnv } from '../helpers/cluster.js';
import { createTestDatabase } from '../helpers/database.js';
import { request } from '../helpers/http.js';
import { scrape, sumOf } from '../helpers/metrics.js';
import { hasTool, promtool, resultValues, startPrometheus, type RunningPrometheus } from '../helpers/prometheus.js';

// docs/architecture.md "Observability": the shipped alert rules and scrape config pass promtool, a live scrape passes
// `promtool check metrics`, and every PromQL expression of the Grafana dashboard and of the
// alert rules returns data from a real Prometheus that scraped a real host (2 web workers and a
// job worker) under traffic with 429s in three scopes. Two panels are held to what they claim
// (docs/operations.md "Grafana dashboard"): the lag of the worst child, and refusals in the limit's unit.

const RULES = resolve('ops/prometheus/alerts.yml');
const DASHBOARD = JSON.parse(readFileSync('ops/grafana/paceline-dashboard.json', 'utf8'));
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
  const login = await request(base, 'POST', '/api/auth/token/', {
    body: { username: 'watcher', password: 'watcher-password' },
  });
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

/** Waits until Prometheus's latest scrape holds every request the host has answered so far. */
async function untilScraped(): Promise<void> {
  const served = sumOf((await scrape(cluster!.metricsBase)).samples, 'paceline_http_requests_total');
  const seen = async () => resultValues(await prometheus!.query('sum(paceline_http_requests_total)'))[0];
  for (let i = 0; (await seen()) !== served; i += 1) {
    if (i > 150) assert.unreachable(`Prometheus never scraped all ${served} requests (has ${await seen()})`);
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

test.before(async () => {
  // npm test installs them (ops/ensure-tools.sh); without them these checks fail rather than pass unrun.
  assert.equal(missing, [], 'prometheus and promtool are installed (Debian: apt-get install prometheus)');
  const database = await createTestDatabase('prometheus');
  dropDatabase = database.drop;
  cluster = await startCluster({
    ...testStoresEnv('prometheus', database.url),
    WEB_CONCURRENCY: '2',
    JOB_CONCURRENCY: '1',
    THROTTLE_ANON: '5/min',
    THROTTLE_USER: '15/min',
    THROTTLE_TOKEN_OBTAIN: '3/min',
    JOB_METRICS_INTERVAL_MS: '1000',
  });
  await untilJobWorkerReports();
  prometheus = await startPrometheus(
    join(process.env.TEST_TMP_DIR!, `prometheus-${randomBytes(3).toString('hex')}`),
    `127.0.0.1:${cluster.metricsPort}`,
    [RULES],
  );
  const token = await seedSeries(cluster.base, database.url);
  await untilScraped(); // rates need a sample before the traffic and one after
  await driveTraffic(cluster.base, token);
  await untilScraped();
  await sleep(2_500); // a few more scrapes and rule evaluations
});

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

test('the dashboard imports as is: a datasource variable, used by every panel and query', () => {
  const variable = DASHBOARD.templating.list.find((v: any) => v.name === 'datasource');
  assert.is(variable?.type, 'datasource');
  assert.is(variable?.query, 'prometheus');
  assert.ok(Array.isArray(DASHBOARD.__inputs));
  for (const panel of DASHBOARD.panels.filter((p: any) => p.type !== 'row')) {
    assert.is(panel.datasource?.uid, '${datasource}', panel.title);
    for (const target of panel.targets)
      assert.is(target.datasource?.uid, '${datasource}', `${panel.title} ${target.refId}`);
  }
  const titles = DASHBOARD.panels.map((p: any) => p.title).join('\n');
  const wanted = [
    /admitted vs throttled/,
    /throttle ratio/i,
    /top routes by 429/i,
    /status class/,
    /latency percentiles/i,
    /throttle check latency/i,
    /store errors/,
    /appended/,
    /batch size/,
    /queue depth/,
    /restarts/i,
    /top throttled clients/i,
    /distinct throttled clients/i,
    /near-limit ratio/i,
    /shadow vs enforced/i,
    /against its scope's limit/i,
    /settings reloads/i,
  ];
  for (const title of wanted) assert.match(titles, title);
});

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
