/**
 * `npm run soak [-- --seconds N]` (or SOAK_SECONDS=N; default 600): a bounded run at a steady
 * mixed load against the real entry point (node:cluster primary, 2 web children, a jobs child)
 * with its own throwaway PostgreSQL and Redis on 127.0.0.1, to show that nothing grows without
 * bound and nothing fails over time (docs/security.md "Soak").
 *
 * Load: STEADY signed-in clients below their user rate, each mixing list reads in every
 * pagination style, single tasks, histories, creates with Idempotency-Key, changes and deletes
 * (keeping at most MAX_OWN tasks), one of them a report a minute; and GREEDY anonymous clients
 * reading lists well above their rate (most of it answered 429).
 *
 * Reports per minute: requests, p50/p99 latency, 2xx/429/other 4xx/5xx/no answer, the web and
 * jobs children's RSS and Redis's key count (DBSIZE); then the start and end figures and a last
 * line `SOAK {json}`. Exits 1 when any request got a 5xx or no answer, when no 429 was seen (the
 * throttled clients were not throttled), when the key count ends above its bound (clients ×
 * scopes + the report jobs kept + a constant) or a child's RSS ends above its bound (its RSS
 * after the first minute + the read cache's budget + 128 MB).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { runBench } from '../bench/harness/run.js';
import { createBenchUsers } from '../bench/harness/seed.js';
import { childPids, rssMiB, startService, startStores, type RunningCluster } from '../bench/harness/service.js';
import { readBenchCount } from '../bench/harness/settings.js';
import { latencies } from '../bench/harness/stats.js';

/** Signed-in clients, each its own user, well below THROTTLE_USER. */
const STEADY = 6;
const USER_RATE_PER_MIN = 300;
const STEADY_PER_S = 2;
/**
 * Anonymous clients, each its own address (X-Forwarded-For, TRUST_PROXY_HOPS=1), reading lists
 * on GREEDY_LANES connections at once, each lane at GREEDY_PER_S: far above THROTTLE_ANON, so
 * most of their requests are answered 429 even on a slow host.
 */
const GREEDY = 2;
const ANON_RATE_PER_MIN = 30;
const GREEDY_LANES = 2;
const GREEDY_PER_S = 10;
const MAX_OWN = 40;
const REPORT_EVERY_MS = 60_000;
const READ_CACHE_BYTES = 16 * 1024 * 1024;
/** Scopes one client can fill: user, reports, and anon/token-obtain for its address. */
const SCOPES = 4;
const KEYS_CONSTANT = 50;
const RSS_SLACK_BYTES = 128 * 1024 * 1024;
const CLIENT_DEADLINE_MS = 30_000;
const BASELINE_AT_S = 15;

interface Minute {
  latencies: number[];
  ok: number;
  throttled: number;
  client: number;
  server: number;
  unanswered: number;
}

/** The 4xx other than 429, by status and method: a steady soak should have none. */
const clientErrors = new Map<string, number>();

const mb = (bytes: number) => Math.round(bytes / 1024 / 102.4) / 10;

/** The primary's children that run the entry point, with their RSS in bytes. */
function childRss(cluster: RunningCluster): Map<number, number> {
  const rss = new Map<number, number>();
  for (const pid of childPids(cluster.child.pid!)) {
    try {
      const mib = readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('main') ? rssMiB(pid) : NaN;
      if (!Number.isNaN(mib)) rss.set(pid, mib * 1024 * 1024);
    } catch {
      // exited meanwhile
    }
  }
  return rss;
}

async function main(): Promise<number> {
  const flag = process.argv.indexOf('--seconds');
  const given = flag >= 0 ? process.argv[flag + 1] : undefined;
  if (given !== undefined) process.env.SOAK_SECONDS = given;
  const seconds = readBenchCount('SOAK_SECONDS', 600, 10);
  const began = Date.now();
  const stores = await startStores({ persistent: false, database: 'soak' });
  console.log(`stores ready in ${((Date.now() - began) / 1000).toFixed(1)} s`);
  const names = Array.from({ length: STEADY }, (_, i) => `soak${i}`);
  const tokens = (await createBenchUsers(stores.databaseUrl, ...names)).map((user) => user.token);
  // npm run soak runs from the sources, with no build.
  const settings = { DATABASE_URL: stores.databaseUrl, REDIS_URL: stores.redisUrl, REDIS_PREFIX: 'soak:' };
  const cluster = await startService(
    {
      ...settings,
      CURSOR_SECRET: 'soak-cursor-secret-0123456789',
      ROLE: 'all',
      JOB_CONCURRENCY: '1',
      LOG_LEVEL: 'warn',
      THROTTLE_USER: `${USER_RATE_PER_MIN}/min`,
      THROTTLE_ANON: `${ANON_RATE_PER_MIN}/min`,
      TRUST_PROXY_HOPS: '1',
      READ_CACHE_BYTES: String(READ_CACHE_BYTES),
      ACCESS_LOG: 'off',
    },
    'tsx',
  );
  console.log(`cluster ready in ${((Date.now() - began) / 1000).toFixed(1)} s; soaking for ${seconds} s`);
  const report = await soak(cluster, tokens, seconds, () => stores.admin.dbsize().catch(() => -1));
  console.log(`SOAK ${JSON.stringify(report)}`);
  return report.failures.length > 0 ? 1 : 0;
}

async function soak(cluster: RunningCluster, tokens: string[], seconds: number, dbsize: () => Promise<number>) {
  const started = Date.now();
  const endAt = started + seconds * 1000;
  const minutes: Minute[] = [];
  const minuteOf = (t: number) =>
    (minutes[Math.floor((t - started) / 60_000)] ??= {
      latencies: [],
      ok: 0,
      throttled: 0,
      client: 0,
      server: 0,
      unanswered: 0,
    });
  let reports = 0;

  async function send(
    auth: Record<string, string>,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) {
    const sentAt = Date.now();
    let status = 0;
    let json: { id?: number } | null = null;
    try {
      const response = await fetch(new URL(path, cluster.base), {
        method,
        headers: { ...auth, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(CLIENT_DEADLINE_MS),
      });
      const text = await response.text();
      status = response.status;
      if (text && (response.headers.get('content-type') ?? '').includes('json'))
        json = JSON.parse(text) as { id?: number };
    } catch {
      status = 0;
    }
    const minute = minuteOf(sentAt);
    minute.latencies.push(Date.now() - sentAt);
    if (status === 0) minute.unanswered += 1;
    else if (status === 429) minute.throttled += 1;
    else if (status >= 500) minute.server += 1;
    else if (status >= 400) {
      minute.client += 1;
      const what = `${status} ${method} ${path.replace(/\d+/g, 'N')}`;
      clientErrors.set(what, (clientErrors.get(what) ?? 0) + 1);
    } else minute.ok += 1;
    return { status, json };
  }

  /**
   * Waits for the next send at `perSecond`. A client that fell behind (a slow answer) sends at
   * once but does not catch up in a burst: the load stays steady rather than the schedule.
   */
  function pacer(perSecond: number, offsetMs: number) {
    let next = started + offsetMs;
    return async () => {
      if (next > Date.now()) await sleep(next - Date.now());
      next = Math.max(next, Date.now()) + 1000 / perSecond;
    };
  }

  async function client(index: number, perSecond: number, own: number[] = []) {
    const token = { Authorization: `Bearer ${tokens[index]!}` };
    let lastReport = started - Math.random() * REPORT_EVERY_MS;
    const pace = pacer(perSecond, index * 7);
    for (let step = 0; Date.now() < endAt; step++) {
      await pace();
      if (Date.now() >= endAt) break;
      const roll = step % 10;
      if (index === 0 && Date.now() - lastReport >= REPORT_EVERY_MS) {
        lastReport = Date.now();
        if ((await send(token, 'POST', '/api/reports/', { from: '2026-11-01', to: '2026-11-30' })).status === 202)
          reports += 1;
      } else if (roll < 3)
        await send(token, 'GET', ['/api/tasks/', '/api/tasks/?page=2', '/api/tasks/?limit=5&offset=5'][step % 3]!);
      else if (roll === 3) await send(token, 'GET', '/api/tasks/?cursor=&ordering=-id');
      else if (roll === 4 && own.length > 0) await send(token, 'GET', `/api/tasks/${own[step % own.length]}/`);
      else if (roll === 5 && own.length > 0) await send(token, 'GET', `/api/tasks/${own[step % own.length]}/events/`);
      else if (roll <= 7 || own.length === 0) {
        if (own.length >= MAX_OWN) {
          const { status } = await send(token, 'DELETE', `/api/tasks/${own[0]}/`);
          if (status === 204 || status === 404) own.shift();
        } else {
          const { status, json } = await send(
            token,
            'POST',
            '/api/tasks/',
            { title: `soak ${index}-${step}` },
            { 'Idempotency-Key': randomUUID() },
          );
          if (status === 201) own.push(json!.id!);
        }
      } else
        await send(token, 'PATCH', `/api/tasks/${own[step % own.length]}/`, {
          completed: step % 4 === 0,
          title: `soak ${index}-${step}`,
        });
    }
  }

  async function greedy(ip: string, lane: number) {
    const pace = pacer(GREEDY_PER_S, lane * 13);
    for (let step = 0; Date.now() < endAt; step++) {
      await pace();
      if (Date.now() < endAt)
        await send({ 'X-Forwarded-For': ip }, 'GET', step % 2 === 0 ? '/api/tasks/' : '/api/tasks/?limit=5');
    }
  }

  // The jobs child is forked after the web children answer: wait for it before the first sample.
  for (let waited = 0; childRss(cluster).size < 3 && waited < 60; waited++) await sleep(500);

  // Samples: RSS per child and DBSIZE at the start, after each minute and at the end.
  const samples: Array<{ atS: number; rss: Map<number, number>; keys: number }> = [];
  const sample = async () =>
    samples.push({ atS: Math.round((Date.now() - started) / 1000), rss: childRss(cluster), keys: await dbsize() });
  await sample();
  let sampling = true;
  // Its sleeps hold no reference: when the run is over the process ends rather than wait for the next minute's sample.
  const sampler = (async () => {
    await sleep(BASELINE_AT_S * 1000, undefined, { ref: false });
    if (sampling) await sample();
    for (let m = 1; sampling; m++) {
      await sleep(Math.max(0, started + m * 60_000 - Date.now()), undefined, { ref: false });
      if (sampling) await sample();
    }
  })();
  await Promise.all([
    ...tokens.map((_, i) => client(i, STEADY_PER_S)),
    ...Array.from({ length: GREEDY * GREEDY_LANES }, (_, lane) => greedy(`203.0.113.${1 + (lane % GREEDY)}`, lane)),
  ]);
  sampling = false;
  await sample();
  void sampler;

  const rows = minutes.map((m, i) => {
    const { count, p50, p99 } = latencies(m.latencies);
    return { minute: i + 1, requests: count, p50: p50 || 0, p99: p99 || 0, ...omit(m) };
  });
  console.log('minute  requests  p50 ms  p99 ms     2xx    429  4xx  5xx  none');
  for (const r of rows)
    console.log(
      `${String(r.minute).padStart(6)}  ${String(r.requests).padStart(8)}  ${String(r.p50).padStart(6)}  ${String(r.p99).padStart(6)}  ${String(r.ok).padStart(6)}  ${String(r.throttled).padStart(5)}  ${String(r.client).padStart(3)}  ${String(r.server).padStart(3)}  ${String(r.unanswered).padStart(4)}`,
    );
  const first = samples[0]!;
  // The RSS to compare with: once the children have loaded their code and served a while (the
  // jobs child starts small), after the first minute of a long run, after BASELINE_AT_S of a short one.
  const settled = samples.find((s) => s.atS >= (seconds >= 120 ? 55 : BASELINE_AT_S - 1)) ?? first;
  const last = samples.at(-1)!;
  const total = (key: keyof Minute) => rows.reduce((sum, r) => sum + (r[key as keyof typeof r] as number), 0);
  const counts = {
    ok: total('ok'),
    throttled: total('throttled'),
    client: total('client'),
    server: total('server'),
    unanswered: total('unanswered'),
  };
  const keyBound = (tokens.length + GREEDY) * SCOPES + reports + KEYS_CONSTANT;
  const rssBound = (pid: number) =>
    (settled.rss.get(pid) ?? first.rss.get(pid) ?? 0) + READ_CACHE_BYTES + RSS_SLACK_BYTES;
  const failures: string[] = [];
  if (counts.server > 0) failures.push(`${counts.server} answers were 5xx`);
  if (counts.unanswered > 0)
    failures.push(`${counts.unanswered} requests got no answer within ${CLIENT_DEADLINE_MS} ms`);
  if (counts.throttled === 0) failures.push('no request was throttled (429): the greedy clients were not limited');
  if (last.keys > keyBound) failures.push(`Redis holds ${last.keys} keys at the end, above the bound ${keyBound}`);
  for (const [pid, rss] of last.rss)
    if (rss > rssBound(pid))
      failures.push(`child ${pid} RSS ${mb(rss)} MB at the end, above the bound ${mb(rssBound(pid))} MB`);
  if ([...first.rss.keys()].some((pid) => !last.rss.has(pid))) failures.push('a child was restarted during the run');
  const rss = [...last.rss.keys()].map((pid) => ({
    pid,
    startMb: mb(first.rss.get(pid) ?? 0),
    settledMb: mb(settled.rss.get(pid) ?? 0),
    endMb: mb(last.rss.get(pid) ?? 0),
    boundMb: mb(rssBound(pid)),
  }));
  console.log(
    `RSS (MB) per child, start → at ${settled.atS} s → end (bound): ${rss.map((r) => `${r.startMb} → ${r.settledMb} → ${r.endMb} (${r.boundMb})`).join('; ')}`,
  );
  console.log(
    `Redis keys: start ${first.keys}, per minute ${samples.map((s) => s.keys).join(' ')}, end ${last.keys} (bound ${keyBound})`,
  );
  console.log(
    `totals: 2xx ${counts.ok}, 429 ${counts.throttled}, other 4xx ${counts.client}, 5xx ${counts.server}, no answer ${counts.unanswered}; reports ${reports}`,
  );
  if (clientErrors.size > 0)
    console.log(`other 4xx: ${[...clientErrors].map(([what, n]) => `${what} ×${n}`).join(', ')}`);
  console.log(failures.length === 0 ? 'soak passed' : `soak FAILED: ${failures.join('; ')}`);
  return {
    seconds,
    clients: tokens.length + GREEDY,
    counts,
    reports,
    rss,
    keys: { start: first.keys, end: last.keys, bound: keyBound, perMinute: samples.map((s) => s.keys) },
    minutes: rows,
    failures,
  };
}

function omit(m: Minute) {
  const { latencies: _latencies, ...rest } = m;
  return rest;
}

await runBench('soak', main);
