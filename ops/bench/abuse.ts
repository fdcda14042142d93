/**
 * `npm run bench:abuse` (docs/benchmarks.md "The cost of abuse (`npm run bench:abuse`)"): what an abusive client
 * costs the compiled service and a well-behaved client beside it. Two instances of `node dist/src/main.js` on
 * throwaway stores: the guarded one (the default limits, behind a trusted proxy) that every abuse hits, and an open one
 * (limits never reached) serving the yardsticks beside a bare node:http server. Prints a Markdown table, also written
 * to ops/bench/results/abuse.md (BENCH_RESULTS).
 *
 *   npm run bench:abuse                                  # about 4 minutes of load
 *   BENCH_ROUNDS=1 BENCH_SECONDS=2 npm run bench:abuse   # a quicker, rougher run
 *   BENCH_LOG_LEVEL=warn npm run bench:abuse             # without the access log (as `npm run bench`)
 */
import { createServer } from 'node:http';
import { writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { connectDatabase } from '../../db/connect.js';
import { loadConfig } from '../../src/settings/config.js';
import { runDocsRow } from './abuse/docs-row.js';
import { runFloodRows } from './abuse/flood-rows.js';
import { startGoodClient } from './abuse/good-client.js';
import { createCostReader } from './abuse/window.js';
import { runLoginRow, runMetricsRow, runReadyzRow, runTokenRow } from './abuse/rows.js';
import { factList, resultsTable } from './abuse/report.js';
import { stamp, uptime, writeResults, wrkVersion } from './harness/report.js';
import { defer, log, runBench, scratchDir } from './harness/run.js';
import { seedDatabase } from './harness/seed.js';
import { copyDatabase, redisVersion, startBare, startService, startStores } from './harness/service.js';
import { readBenchCount, readBenchText } from './harness/settings.js';

const RESULTS = readBenchText('BENCH_RESULTS', 'ops/bench/results/abuse.md');
const SECRET = 'abuse-bench-cursor-secret-0123456789';
const TASKS = 1_000;
const OPEN_DATABASE = 'bench_abuse_open';
const GOOD_RATES = { get: 20, login: 3 };

const rounds = readBenchCount('BENCH_ROUNDS', 3);
const logLevel = readBenchText('BENCH_LOG_LEVEL', 'info');
const seconds = readBenchCount('BENCH_SECONDS', 4);

/** The metrics server's header timeout: its setting when the service has one, else Node's default. */
function metricsHeadersTimeout(env: Record<string, string>): { ms: number; source: string } {
  const config = loadConfig({ ...process.env, ...env }) as unknown as Record<string, unknown>;
  const key = Object.keys(config).find((name) => /^METRICS_.*HEADERS?_TIMEOUT/.test(name));
  if (key && typeof config[key] === 'number') return { ms: config[key], source: `${key}, its default` };
  return { ms: createServer().headersTimeout, source: "no setting: Node's default headersTimeout" };
}

/** The login hash bound, when the service has one. */
function hashBound(env: Record<string, string>): string {
  const config = loadConfig({ ...process.env, ...env }) as unknown as Record<string, unknown>;
  const keys = Object.keys(config).filter((name) => /^LOGIN_HASH/.test(name));
  return keys.length ? keys.map((key) => `${key}=${String(config[key])}`).join(', ') : 'none (no setting)';
}

async function main(): Promise<void> {
  const startedAt = Date.now();
  const uptimeBefore = uptime();
  log(
    `abuse benchmark: ${rounds} rounds × 4 floods × ${seconds} s, then five abuses; about ${Math.ceil((rounds * (4 * (seconds + 2) + 5) + 130) / 60)} min of load`,
  );
  const root = await scratchDir('abuse');
  const stores = await startStores({ statements: true, database: 'bench_abuse' });
  const seeded = await seedDatabase(stores.databaseUrl, TASKS);
  const openUrl = await copyDatabase(stores, OPEN_DATABASE);

  // By default both instances log as deployed (LOG_LEVEL info, every request logged): logging is part of the cost.
  const common = {
    REDIS_URL: stores.redisUrl,
    CURSOR_SECRET: SECRET,
    LOG_LEVEL: logLevel,
    TRUST_PROXY_HOPS: '1',
    TRUSTED_PROXIES: '127.0.0.1',
  };
  const guardedEnv = {
    ...common,
    DATABASE_URL: stores.databaseUrl,
    REDIS_PREFIX: 'bench:guarded:',
    // The good client's own budgets (its user, its name) never run out; every other limit is the default.
    THROTTLE_USER: '100000/s',
    THROTTLE_LOGIN: '100000/s',
  };
  const openEnv = { ...common, DATABASE_URL: openUrl, REDIS_PREFIX: 'bench:open:' };
  const [guarded, open] = await Promise.all([
    startService(guardedEnv),
    startService({ ...openEnv, THROTTLE_ANON: '100000/s', THROTTLE_USER: '100000/s' }),
  ]);
  const page1 = await fetch(`${open.base}/api/tasks/`, { headers: { 'X-Forwarded-For': '10.0.0.1' } });
  const bodyFile = join(root, 'page-1.json');
  await writeFile(bodyFile, Buffer.from(await page1.arrayBuffer()));
  const bare = await startBare(bodyFile, page1.headers.get('content-type') ?? 'application/json');

  const monitor = connectDatabase(stores.databaseUrl, 1, 'abuse-bench-monitor');
  defer(() => monitor.destroy());
  const trees = {
    guarded: { base: guarded.base, metricsPort: guarded.metricsPort, primary: guarded.child.pid! },
    open: { base: open.base, primary: open.child.pid! },
    bare: { base: bare.base, primary: bare.primary },
  };
  const good = await startGoodClient(guarded.base, seeded.reader, GOOD_RATES);
  const read = createCostReader(monitor, OPEN_DATABASE, stores.admin, trees);
  const bench = { ...trees, good, read, rounds, seconds };
  const timeout = metricsHeadersTimeout(guardedEnv);
  const rows = await runFloodRows(bench);
  const abuses = [
    () => runTokenRow(bench),
    () => runLoginRow(bench, hashBound(guardedEnv)),
    () => runMetricsRow(bench, timeout.ms, timeout.source),
    () => runReadyzRow(bench),
    () => runDocsRow(bench),
  ];
  for (const run of abuses) {
    const row = await run();
    rows.push(row);
    log(
      `${row.name.padEnd(45)} ${Math.round(row.reqPerS).toString().padStart(6)} req/s, good client p99 ` +
        `${row.good?.quiet.p99Ms.toFixed(1)} → ${row.good?.during.p99Ms.toFixed(1)} ms, ${row.statuses}`,
    );
  }
  await writeReport(rows, {
    versions: `node ${process.version}, PostgreSQL ${stores.postgresVersion} (fsync on), Redis ${await redisVersion(stores.admin)}, wrk ${wrkVersion()}`,
    uptimeBefore,
    minutes: (Date.now() - startedAt) / 60_000,
  });
}

async function writeReport(
  rows: Awaited<ReturnType<typeof runFloodRows>>,
  run: { versions: string; uptimeBefore: string; minutes: number },
): Promise<void> {
  const report = [
    '# Abuse benchmark (`npm run bench:abuse`)',
    '',
    `${stamp()}; ${run.versions}; ` +
      `${cpus().length} CPUs shared by everything (other work included); the run took ${run.minutes.toFixed(1)} min.`,
    `\`uptime\` before: \`${run.uptimeBefore}\`; after: \`${uptime()}\`.`,
    '',
    `Command: \`BENCH_ROUNDS=${rounds} BENCH_SECONDS=${seconds} BENCH_LOG_LEVEL=${logLevel} npm run bench:abuse\`. ` +
      `The guarded service: \`node dist/src/main.js\`, 2 web workers, every setting at its default except LOG_LEVEL=${logLevel} ` +
      '(info is the default: every request logged, to a pipe the benchmark reads), ' +
      'TRUST_PROXY_HOPS=1 with TRUSTED_PROXIES=127.0.0.1 (each abuser is one or many addresses by ' +
      "`X-Forwarded-For`) and the good client's own user and login budgets (never reached). The open instance " +
      '(anonymous limit never reached, its own database) serves the yardsticks; the bare server is a node:http ' +
      "cluster of 2 workers answering page 1's bytes from memory.",
    '',
    `The good client (its own process) reads page 1 with its token at ${GOOD_RATES.get}/s, or logs in at ` +
      `${GOOD_RATES.login}/s (row 3), on the guarded instance, each request on a new connection, at a fixed rate ` +
      'whatever the answers take. Each row follows a quiet window of 4 s (the good client alone): "quiet" is its ' +
      "latencies there, and the service's background work there (per second) is subtracted from the row's counters " +
      'before dividing by the abusive requests (negative noise floored at 0). PG statements: pg_stat_statements ' +
      "calls in the serving database, BEGIN and COMMIT included (a round trip each; pg_stat_database's xact_commit " +
      "is published up to 10 s late, so a row's transactions landed in the next row); Redis: INFO commandstats calls (INFO itself left out); " +
      'CPU: utime + stime of the primary and its workers from /proc; FDs: /proc/<primary>/fd of the guarded primary.',
    '',
    `Row 1: \`wrk -t2 -c32 -d${seconds}s\`, ${rounds} interleaved round${rounds > 1 ? 's' : ''} (rotated order, 1 s ` +
      'warm-up each), medians over the rounds; costs of the 429 flood per refused request. Rows 2–6: a Node client ' +
      'of up to 32 keep-alive connections (50 for the logins, 16 for the docs files) sending a fixed number of requests.',
    '',
    resultsTable(rows),
    '',
    factList(rows),
    '',
  ].join('\n');
  await writeResults(RESULTS, report);
}

await runBench('abuse', main);
