/**
 * `npm run soak [-- --seconds N]` (or SOAK_SECONDS=N; default 600): a bounded run at a steady mixed load against
 * the real entry point (node:cluster primary, 2 web children, a jobs child) with its own throwaway PostgreSQL and
 * Redis on 127.0.0.1, to show that nothing grows without bound and nothing fails over time (docs/security.md
 * "Soak" says what it sends, prints and fails on). Its last line is `SOAK {json}`, which
 * test/cluster/cluster/soak.test.ts reads.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { MinuteLoad, pacer } from '../bench/harness/minute-load.js';
import { runBench, secondsSince } from '../bench/harness/run.js';
import { createBenchUsers } from '../bench/harness/seed.js';
import { childPids, rssMiB, startService, startStores, type RunningCluster } from '../bench/harness/service.js';
import { readBenchCount } from '../bench/harness/settings.js';

/** Signed-in clients, each its own user, well below THROTTLE_USER. */
const STEADY = 6;
const USER_RATE_PER_MIN = 300;
const STEADY_PER_S = 2;
/**
 * Anonymous clients, each its own address (X-Forwarded-For, TRUST_PROXY_HOPS=1), reading lists on GREEDY_LANES
 * connections at once, each lane at GREEDY_PER_S: far above THROTTLE_ANON, so most of their requests are answered
 * 429 even on a slow host.
 */
const GREEDY = 2;
const ANON_RATE_PER_MIN = 30;
const GREEDY_LANES = 2;
const GREEDY_PER_S = 10;
/** A client keeps at most this many tasks of its own: past it, it deletes its oldest instead of creating. */
const MAX_OWN = 40;
const REPORT_EVERY_MS = 60_000;
const READ_CACHE_BYTES = 16 * 1024 * 1024;
/** Scopes one client can fill: user, reports, and anon/token-obtain for its address. */
const SCOPES = 4;
const KEYS_CONSTANT = 50;
const RSS_SLACK_BYTES = 128 * 1024 * 1024;
const CLIENT_DEADLINE_MS = 30_000;
const BASELINE_AT_S = 15;

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
  const seconds = readBenchCount('SOAK_SECONDS', 600, 10, '--seconds');
  const began = Date.now();
  const stores = await startStores({ persistent: false, database: 'soak' });
  console.log(`stores ready in ${secondsSince(began).toFixed(1)} s`);
  const names = Array.from({ length: STEADY }, (_, i) => `soak${i}`);
  const tokens = (await createBenchUsers(stores.databaseUrl, ...names)).map((user) => user.token);
  // npm run soak runs from the sources, with no build.
  const cluster = await startService(
    {
      DATABASE_URL: stores.databaseUrl,
      REDIS_URL: stores.redisUrl,
      REDIS_PREFIX: 'soak:',
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
  console.log(`cluster ready in ${secondsSince(began).toFixed(1)} s; soaking for ${seconds} s`);
  const report = await soak(cluster, tokens, seconds, () => stores.admin.dbsize().catch(() => -1));
  console.log(`SOAK ${JSON.stringify(report)}`);
  return report.failures.length > 0 ? 1 : 0;
}

async function soak(cluster: RunningCluster, tokens: string[], seconds: number, dbsize: () => Promise<number>) {
  const started = Date.now();
  const endAt = started + seconds * 1000;
  const load = new MinuteLoad(cluster.base, started, CLIENT_DEADLINE_MS);
  const send = load.send.bind(load);
  let reports = 0;

  async function client(index: number, perSecond: number, own: number[] = []) {
    const token = { Authorization: `Bearer ${tokens[index]!}` };
    let lastReport = started - Math.random() * REPORT_EVERY_MS;
    const pace = pacer(started + index * 7, perSecond);
    for (let step = 0; Date.now() < endAt; step++) {
      await pace();
      if (Date.now() >= endAt) break;
      const roll = step % 10;
      const mine = `/api/tasks/${own[step % own.length]}/`;
      if (index === 0 && Date.now() - lastReport >= REPORT_EVERY_MS) {
        lastReport = Date.now();
        if ((await send(token, 'POST', '/api/reports/', { from: '2026-11-01', to: '2026-11-30' })).status === 202)
          reports += 1;
      } else if (roll < 3)
        await send(token, 'GET', ['/api/tasks/', '/api/tasks/?page=2', '/api/tasks/?limit=5&offset=5'][step % 3]!);
      else if (roll === 3) await send(token, 'GET', '/api/tasks/?cursor=&ordering=-id');
      else if (roll === 4 && own.length > 0) await send(token, 'GET', mine);
      else if (roll === 5 && own.length > 0) await send(token, 'GET', `${mine}events/`);
      else if (roll <= 7 || own.length === 0) {
        if (own.length >= MAX_OWN) {
          const { status } = await send(token, 'DELETE', `/api/tasks/${own[0]}/`);
          if (status === 204 || status === 404) own.shift();
        } else {
          const once = { 'Idempotency-Key': randomUUID() };
          const { status, json } = await send(token, 'POST', '/api/tasks/', { title: `soak ${index}-${step}` }, once);
          if (status === 201) own.push(json!.id!);
        }
      } else await send(token, 'PATCH', mine, { completed: step % 4 === 0, title: `soak ${index}-${step}` });
    }
  }

  async function greedy(ip: string, lane: number) {
    const pace = pacer(started + lane * 13, GREEDY_PER_S);
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
    samples.push({ atS: Math.round(secondsSince(started)), rss: childRss(cluster), keys: await dbsize() });
  await sample();
  let sampling = true;
  // Its sleeps hold no reference: when the run is over the process ends rather than wait for the next minute's sample.
  void (async () => {
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

  const rows = load.rows();
  const counts = load.print(rows);
  const first = samples[0]!;
  // The RSS to compare with: once the children have loaded their code and served a while (the jobs child starts
  // small), after the first minute of a long run, after BASELINE_AT_S of a short one.
  const settled = samples.find((s) => s.atS >= (seconds >= 120 ? 55 : BASELINE_AT_S - 1)) ?? first;
  const last = samples.at(-1)!;
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
  const perMinute = samples.map((s) => s.keys);
  console.log(
    `Redis keys: start ${first.keys}, per minute ${perMinute.join(' ')}, end ${last.keys} (bound ${keyBound})`,
  );
  console.log(
    `totals: 2xx ${counts.ok}, 429 ${counts.throttled}, other 4xx ${counts.client}, 5xx ${counts.server}, no answer ${counts.unanswered}; reports ${reports}`,
  );
  if (load.clientErrors.size > 0)
    console.log(`other 4xx: ${[...load.clientErrors].map(([what, n]) => `${what} ×${n}`).join(', ')}`);
  console.log(failures.length === 0 ? 'soak passed' : `soak FAILED: ${failures.join('; ')}`);
  return {
    seconds,
    clients: tokens.length + GREEDY,
    counts,
    reports,
    rss,
    keys: { start: first.keys, end: last.keys, bound: keyBound, perMinute },
    minutes: rows,
    failures,
  };
}

await runBench('soak', main);
