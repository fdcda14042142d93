/**
 * A report over a million events on the real entry point (one web worker, one jobs child): how long the aggregation
 * takes in the jobs child, and whether the web worker stays responsive meanwhile (docs/benchmarks.md "Reports").
 *
 *   npm run bench:report-million -- [events, default 1000000]
 *
 * Seeds the history into its own throwaway stores by generate_series (test/helpers/seed-events.ts: 2/3 creations,
 * 1/3 completions over 30 days), runs `POST /api/reports/` for the whole range, checks every number of the result
 * against the seed, and prints the timings and the latency of /healthz and GET /api/tasks/ before and during it.
 */
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { connectDatabase } from '../../db/connect.js';
import { expectedDays, seedCompletedHistory, type SeedOptions } from '../../test/helpers/seed-events.js';
import { runBench, secondsSince } from './harness/run.js';
import { createBenchUsers } from './harness/seed.js';
import { startService, startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { latencies } from './harness/stats.js';

const [EVENTS] = readArgs([1_000_000]) as [number];
const RANGE = { from: '2026-10-01', to: '2026-10-30' };

/** Times sequential GETs of `paths` in turn until `done()` says stop. */
async function probe(base: string, paths: string[], token: string, done: () => boolean) {
  const samples = new Map(paths.map((p) => [p, [] as number[]]));
  for (let i = 0; !done(); i += 1) {
    const path = paths[i % paths.length]!;
    const began = performance.now();
    const response = await fetch(`${base}${path}`, { headers: { Authorization: `Bearer ${token}` } });
    await response.arrayBuffer();
    samples.get(path)!.push(performance.now() - began);
    await sleep(5);
  }
  return Object.fromEntries([...samples].map(([path, list]) => [path, latencies(list)]));
}

const show = (label: string, stats: Awaited<ReturnType<typeof probe>>) => {
  for (const [path, s] of Object.entries(stats))
    console.log(
      `  ${label.padEnd(7)} ${path.padEnd(12)} n=${String(s.count).padStart(5)}  p50 ${s.p50.toFixed(2)} ms  p99 ${s.p99.toFixed(2)} ms  max ${s.max.toFixed(2)} ms`,
    );
};

interface Report {
  status: string;
  result: { days: unknown; open_at_start: number };
  created_at: string;
  started_at: string;
  finished_at: string;
}

/** Seeds the history into a fresh, migrated database; returns the seed, the event count and the owner's token. */
async function seedHistory(url: string): Promise<{ seed: SeedOptions; total: number; token: string }> {
  const [owner] = await createBenchUsers(url, 'alice');
  const db = connectDatabase(url, 2, 'report-bench');
  try {
    const seed: SeedOptions = {
      tasks: Math.round((EVENTS * 2) / 3),
      owner,
      start: new Date(`${RANGE.from}T00:00:00Z`),
      spanMs: 30 * 86_400_000,
    };
    const began = Date.now();
    const total = await seedCompletedHistory(db, seed);
    await sql`analyze`.execute(db);
    console.log(`seeded ${total} events (${seed.tasks} tasks) in ${secondsSince(began).toFixed(1)} s`);
    return { seed, total, token: owner.token };
  } finally {
    await db.destroy();
  }
}

/** Posts the report and probes the web worker until the report is finished. */
async function runReport(base: string, token: string, paths: string[]) {
  const auth = { Authorization: `Bearer ${token}` };
  const accepted = await fetch(`${base}/api/reports/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...auth },
    body: JSON.stringify(RANGE),
  });
  const location = accepted.headers.get('location')!;
  let report: Report | undefined;
  const finished = () => report !== undefined && ['done', 'failed'].includes(report.status);
  const watcher = (async () => {
    while (!finished()) {
      await sleep(250);
      report = (await (await fetch(location, { headers: auth })).json()) as Report;
    }
  })();
  const during = await probe(base, paths, token, finished);
  await watcher;
  return { report: report!, during };
}

async function main(): Promise<number> {
  const stores = await startStores({ persistent: false, database: 'bench_report' });
  const { seed, total, token } = await seedHistory(stores.databaseUrl);
  const cluster = await startService(
    {
      DATABASE_URL: stores.databaseUrl,
      REDIS_URL: stores.redisUrl,
      REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`,
      CURSOR_SECRET: 'report-bench-secret-0123456789',
      WEB_CONCURRENCY: '1',
      JOB_CONCURRENCY: '1',
      ROLE: 'all',
      THROTTLE_USER: '100000/min',
      LOG_LEVEL: 'warn',
    },
    'tsx',
  );
  await sleep(8_000); // let the jobs child finish booting, so the baseline is not measured against it
  const paths = ['/healthz', '/api/tasks/'];
  const baselineEnd = Date.now() + 3_000;
  const baseline = await probe(cluster.base, paths, token, () => Date.now() > baselineEnd);
  const { report, during } = await runReport(cluster.base, token, paths);
  const expected = expectedDays(seed, RANGE.from, RANGE.to);
  const correct =
    report.status === 'done' &&
    isDeepStrictEqual(report.result.days, expected.days) &&
    report.result.open_at_start === expected.openAtStart;
  const seconds = (from: string, to: string) => ((Date.parse(to) - Date.parse(from)) / 1000).toFixed(1);
  console.log(
    `report over ${total} events: ${report.status}; queued ${seconds(report.created_at, report.started_at)} s, ` +
      `aggregation ${seconds(report.started_at, report.finished_at)} s; the result ${correct ? 'matches' : 'DOES NOT match'} the seed`,
  );
  console.log('web worker latency (sequential GETs, 5 ms apart):');
  show('before', baseline);
  show('during', during);
  return correct ? 0 : 1;
}

await runBench('report-million', main);
