/**
 * The goal of docs/verify.md "Bounded on any collection", measured: verify's default command ends within 2 minutes
 * against a deployment holding a million tasks, and still judges the cursor guarantee.
 *
 *   npm run bench:verify-million -- [tasks, default 1000000]
 *
 * In a temporary directory it deletes (also on failure or Ctrl-C): seeds `tasks` tasks into a fresh embedded
 * database the way `npm run cli` reaches it (the service's role, migrated; ops/bench/harness/seed.ts: events by
 * generate_series, every projection by the rebuild, VACUUM ANALYZE), before the service ever runs on it, so that
 * nothing races the rebuild; then starts Paceline on it (test/helpers/verify-host.ts, every setting at its
 * default but the ports, DATA_DIR and ACCESS_LOG=off: THROTTLE_USER stays 100/min, the budget that bounds the
 * run), creates verify's two users with the CLI, confirms the list counts the seeded tasks, and runs
 * `npm run verify` once as a user would (with `--history`, to say where the time went). Prints and writes
 * ops/bench/results/verify-million.md. Exit status 1 when the run did not complete or verify did not say holds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import '../../db/connect.js'; // int8 columns as numbers, as every process of the service reads them
import type { Database } from '../../db/database.js';
import { migrateToLatest } from '../../db/migrate.js';
import { openEmbeddedDatabase } from '../../src/embedded/embedded-database.js';
import { findFreePort } from '../../src/embedded/ports.js';
import { loadConfig } from '../../src/settings/config.js';
import type { RunningCluster } from '../../test/helpers/cluster.js';
import { startVerifyHost, VERIFY_USER_ARGS } from '../../test/helpers/verify-host.js';
import { changedFiles, describeCommit, loadAverage, uptime } from './harness/report.js';
import { defer, runBench, scratchDir } from './harness/run.js';
import { seedTasks, type Seeded } from './harness/seed.js';

const TASKS = Number(process.argv[2] ?? 1_000_000);
const GOAL_SECONDS = 120;
/** The longest the verify command may run before it is stopped (its own requests each have 10 s). */
const VERIFY_DEADLINE_MS = 15 * 60_000;
const RESULTS = 'ops/bench/results/verify-million.md';
/** Each task check and the verify clients that only it uses (clients/verify/checks/), in the order they run. */
const TASK_CHECKS: [string, string[]][] = [
  ['cursor', ['walker']],
  ['ryw', ['ryw-reader', 'ryw-writer']],
  ['idempotency', ['idempotency']],
  ['feed', ['feed']],
];

interface SeedReport extends Seeded {
  startSeconds: number;
  migrateSeconds: number;
  totalSeconds: number;
  /** What PostgreSQL said while seeding (VACUUM's warnings about tables the service's role may not vacuum). */
  notices: string[];
  userTables: number;
  vacuumed: number;
  analyzed: number;
}

interface CheckReport {
  name: string;
  verdict: string;
  summary: string;
  requests: number;
  seconds: number;
}

interface VerifyReport {
  verdict: string;
  requests: number;
  seconds: number;
  checks: CheckReport[];
}

/** One request of the history (docs/verify.md "History format"), invoke and completion paired. */
interface Request {
  process: string;
  f: string;
  url: string;
  invoke: number;
  complete: number;
  status: number | null;
  retryAfter?: number;
}

async function main(): Promise<number> {
  if (!Number.isInteger(TASKS) || TASKS < 1)
    throw new Error(`tasks must be a positive integer, not ${process.argv[2]}`);
  // Paceline, its CLI and `npm run verify` run from the repository's root.
  process.chdir(fileURLToPath(new URL('../..', import.meta.url)));
  const scratch = await scratchDir('verify-million');
  const uptimeAtStart = uptime();

  // Every setting at its default (an empty one counts as unset, over the fixture's and startCluster's test
  // values) but where the stores live, their ports, and no access log.
  const settings: Record<string, string> = {
    DATA_DIR: join(scratch, 'paceline'),
    EMBEDDED_PG_PORT: String(await findFreePort()),
    EMBEDDED_REDIS_PORT: String(await findFreePort()),
    ACCESS_LOG: 'off',
    THROTTLE_USER: '',
    WEB_CONCURRENCY: '',
    JOB_CONCURRENCY: '',
    LOG_LEVEL: '',
  };
  const seed = await seedDatabase(settings);
  console.log(
    `seeded ${TASKS} tasks in ${seed.totalSeconds.toFixed(1)} s (PostgreSQL start ${seed.startSeconds.toFixed(1)} s, ` +
      `migrations ${seed.migrateSeconds.toFixed(1)} s, events ${seed.eventsSeconds.toFixed(1)} s, rebuild ` +
      `${seed.rebuildSeconds.toFixed(1)} s, VACUUM ANALYZE ${seed.vacuumSeconds.toFixed(1)} s: ${seed.vacuumed} of ` +
      `${seed.userTables} tables vacuumed, ${seed.analyzed} analysed, ${seed.notices.length} notices)`,
  );

  const starting = Date.now();
  const { host } = await startVerifyHost(scratch, settings);
  defer(() => host.stop());
  const startSeconds = (Date.now() - starting) / 1000;
  const listed = await countTasks(host, seed.reader.token);
  console.log(
    `Paceline ready and verify's users made in ${startSeconds.toFixed(1)} s; GET /api/tasks/?page_size=1: count ` +
      `${listed.count} in ${listed.ms.toFixed(0)} ms`,
  );
  if (listed.count !== TASKS) throw new Error(`the list counts ${listed.count} tasks, not the ${TASKS} seeded`);

  const uptimeBefore = uptime();
  const run = await runVerify(host.base, scratch);
  const uptimeAfter = uptime();
  process.stdout.write(run.output);
  const history = await readHistory(join(scratch, 'history.jsonl'));
  const text = describe({ seed, startSeconds, listed, run, history, uptimeAtStart, uptimeBefore, uptimeAfter });
  await writeFile(RESULTS, text);
  console.log(`\n${text}`);
  return run.report?.verdict === 'holds' ? 0 : 1;
}

/**
 * Seeds the tasks on a fresh DATA_DIR as a command of the CLI would reach it (openEmbeddedDatabase: PostgreSQL
 * started and initialised, the service's role made): migrated, then ops/bench/harness/seed.ts. The service is
 * not running yet, so its projection follower cannot race the rebuild.
 */
async function seedDatabase(settings: Record<string, string>): Promise<SeedReport> {
  const began = Date.now();
  const database = await openEmbeddedDatabase(loadConfig(settings));
  const startSeconds = (Date.now() - began) / 1000;
  const notices: string[] = [];
  const pool = new pg.Pool({ connectionString: database.url, max: 2, application_name: 'verify-million-seed' });
  pool.on('error', () => {});
  pool.on('connect', (client) =>
    client.on('notice', (notice) => notices.push(`${notice.severity}: ${notice.message}`)),
  );
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    const migrating = Date.now();
    await migrateToLatest(db);
    const migrateSeconds = (Date.now() - migrating) / 1000;
    const seeded = await seedTasks(db, TASKS);
    const stats = await sql<{ tables: number; vacuumed: number; analyzed: number }>`
      select count(*)::int as tables, count(last_vacuum)::int as vacuumed, count(last_analyze)::int as analyzed
      from pg_stat_user_tables`.execute(db);
    const { tables, vacuumed, analyzed } = stats.rows[0]!;
    const totalSeconds = (Date.now() - began) / 1000;
    return {
      ...seeded,
      startSeconds,
      migrateSeconds,
      totalSeconds,
      notices,
      userTables: tables,
      vacuumed,
      analyzed,
    };
  } finally {
    await db.destroy();
    await database.stop();
  }
}

/** The page-number list's `count`, read with the seeded reader's token (its own budget, not verify's users'). */
async function countTasks(host: RunningCluster, token: string): Promise<{ count: number; ms: number }> {
  const began = performance.now();
  const response = await fetch(`${host.base}/api/tasks/?page_size=1`, {
    headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' },
  });
  const body = (await response.json()) as { count?: unknown };
  const ms = performance.now() - began;
  if (response.status !== 200 || typeof body.count !== 'number')
    throw new Error(`GET /api/tasks/?page_size=1 answered ${response.status} ${JSON.stringify(body).slice(0, 200)}`);
  return { count: body.count, ms };
}

interface VerifyRun {
  command: string;
  /** The commit, and the tracked files that differed from it, when verify started (its code is read then). */
  commit: string;
  changed: string[];
  code: number | null;
  seconds: number;
  output: string;
  report: VerifyReport | undefined;
}

/** `npm run verify` with verify's users, as a user runs it; stopped (its process group) past the deadline. */
async function runVerify(base: string, scratch: string): Promise<VerifyRun> {
  const reportDir = join(scratch, 'report');
  const args = ['run', 'verify', '--', base, ...VERIFY_USER_ARGS, '--report', reportDir];
  args.push('--history', join(scratch, 'history.jsonl'));
  const command = `npm ${args.join(' ')}`.replaceAll(scratch, '$TMP');
  console.log(`running: ${command}`);
  const [measured, changed] = [describeCommit().split(' ')[0]!, changedFiles()];
  const began = Date.now();
  const child: ChildProcess = spawn('npm', args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const stopGroup = (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // gone meanwhile
    }
  };
  defer(() => stopGroup('SIGKILL'));
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = once(child, 'exit');
  const timer = setTimeout(() => stopGroup('SIGKILL'), VERIFY_DEADLINE_MS);
  const [code] = (await exited) as [number | null];
  clearTimeout(timer);
  const seconds = (Date.now() - began) / 1000;
  output = output.replaceAll(scratch, '$TMP');
  const report = await readFile(join(reportDir, 'report.json'), 'utf8').then(
    (text) => JSON.parse(text) as VerifyReport,
    () => undefined,
  );
  return { command, commit: measured, changed, code, seconds, output, report };
}

async function readHistory(file: string): Promise<Request[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const invokes = new Map<number, { process: string; f: string; time: number; url: string }>();
  const requests: Request[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const entry = JSON.parse(line) as {
      type: string;
      op: number;
      process: string;
      f: string;
      time: number;
      value?: { url?: string; status?: number; body?: { detail?: unknown } };
    };
    if (entry.type === 'invoke') {
      invokes.set(entry.op, { process: entry.process, f: entry.f, time: entry.time, url: entry.value?.url ?? '' });
      continue;
    }
    const sent = invokes.get(entry.op);
    if (sent === undefined) continue;
    const status = entry.type === 'ok' ? (entry.value?.status ?? null) : null;
    const detail = entry.value?.body?.detail;
    const stated = typeof detail === 'string' ? /available in (\d+) second/.exec(detail)?.[1] : undefined;
    requests.push({
      process: sent.process,
      f: sent.f,
      url: sent.url,
      invoke: sent.time / 1e9,
      complete: entry.time / 1e9,
      status,
      ...(status === 429 && stated !== undefined ? { retryAfter: Number(stated) } : {}),
    });
  }
  return requests.sort((a, b) => a.invoke - b.invoke);
}

interface Phase {
  name: string;
  from: number;
  to: number;
  requests: Request[];
}

/**
 * The run's requests by phase: the logins and identity checks, each task check from its first request to the
 * next one's (the shared `writer` client's requests fall in the phase they were sent in), the clean-up after the
 * last, and the limits check (its own clients, beside the others).
 */
function phases(requests: Request[]): Phase[] {
  const limits = requests.filter((r) => /^limits-\d+-\d+$/.test(r.process));
  const setup = requests.filter((r) => /-(login|identity|anonymous)$/.test(r.process));
  const tasks = requests.filter((r) => !limits.includes(r) && !setup.includes(r));
  const firstOf = (names: string[]) => tasks.find((r) => names.includes(r.process))?.invoke;
  const starts = TASK_CHECKS.map(([name, clients], i) => ({
    name,
    // The cursor check's writer seeds its tasks before the walker's first page.
    from: i === 0 ? tasks[0]?.invoke : firstOf(clients),
  }));
  const feedEnd = Math.max(...tasks.filter((r) => r.process === 'feed').map((r) => r.complete));
  const bounds = [...starts, { name: 'clean-up', from: Number.isFinite(feedEnd) ? feedEnd : undefined }];
  const end = Math.max(...requests.map((r) => r.complete));
  const result: Phase[] = [];
  const span = (list: Request[]) => ({
    from: Math.min(...list.map((r) => r.invoke)),
    to: Math.max(...list.map((r) => r.complete)),
  });
  if (setup.length > 0) result.push({ name: 'logins', ...span(setup), requests: setup });
  bounds.forEach((bound, i) => {
    if (bound.from === undefined) return;
    const next = bounds.slice(i + 1).find((b) => b.from !== undefined)?.from ?? Infinity;
    const inside = tasks.filter((r) => r.invoke >= bound.from! && r.invoke < next);
    const to = Math.min(next, end);
    result.push({
      name: bound.name,
      from: bound.from,
      to: Math.max(to, ...inside.map((r) => r.complete)),
      requests: inside,
    });
  });
  if (limits.length > 0) result.push({ name: 'limits', ...span(limits), requests: limits });
  return result;
}

function describe(r: {
  seed: SeedReport;
  startSeconds: number;
  listed: { count: number; ms: number };
  run: VerifyRun;
  history: Request[];
  uptimeAtStart: string;
  uptimeBefore: string;
  uptimeAfter: string;
}): string {
  const { seed, run } = r;
  const report = run.report;
  const n = (x: number) => x.toLocaleString('en-US');
  const s = (x: number) => x.toFixed(1);
  const ms = (x: number) => (x * 1000).toFixed(0);
  const cursor = report?.checks.find((c) => c.name === 'cursor');
  const met = report !== undefined && run.seconds <= GOAL_SECONDS && cursor?.verdict === 'holds';
  const checks = (report?.checks ?? []).map(
    (c) => `| ${c.name} | ${c.verdict} | ${n(c.requests)} | ${s(c.seconds)} | ${c.summary.replaceAll('|', '\\|')} |`,
  );
  const phaseRows = phases(r.history).map((p) => {
    const refused = p.requests.filter((q) => q.status === 429);
    const latencies = p.requests.map((q) => q.complete - q.invoke).sort((a, b) => a - b);
    const slowest = [...p.requests].sort((a, b) => b.complete - b.invoke - (a.complete - a.invoke))[0];
    const longestWait = Math.max(0, ...refused.map((q) => q.retryAfter ?? 0));
    const busy = latencies.reduce((sum, x) => sum + x, 0);
    return (
      `| ${p.name} | ${s(p.from)} → ${s(p.to)} | ${s(p.to - p.from)} | ${n(p.requests.length)} | ${refused.length}` +
      `${refused.length > 0 ? ` (longest Retry-After ${longestWait} s)` : ''} | ${s(busy)} | ` +
      `${ms(latencies[Math.floor(latencies.length / 2)] ?? 0)} | ` +
      `${slowest ? `${ms(slowest.complete - slowest.invoke)} (${slowest.process} ${slowest.f} \`${slowest.url}\`)` : ''} |`
    );
  });
  const slowest = [...r.history]
    .sort((a, b) => b.complete - b.invoke - (a.complete - a.invoke))
    .slice(0, 8)
    .map(
      (q) =>
        `| ${ms(q.complete - q.invoke)} | ${s(q.invoke)} | ${q.process} | ${q.f} | \`${q.url}\` | ${q.status ?? 'none'} |`,
    );
  // VACUUM's warnings name each relation it skipped; any other notice is shown whole.
  const skipped = seed.notices.flatMap((x) => /permission denied to vacuum "([^"]+)"/.exec(x)?.[1] ?? []);
  const others = seed.notices.filter((x) => !/permission denied to vacuum/.test(x)).map((x) => `\`${x}\``);
  const said = [
    ...(skipped.length > 0
      ? [`${skipped.length} × \`WARNING: permission denied to vacuum "…", skipping it\` (${skipped.join(', ')})`]
      : []),
    ...others,
  ];
  const vacuumNote = `${seed.vacuumed} of ${seed.userTables} tables vacuumed and ${seed.analyzed} analysed; PostgreSQL said ${said.length > 0 ? said.join('; ') : 'nothing'}`;
  // The task checks' budget: every request with the first user's token (its identity check's included).
  const taskToken = r.history.filter((q) => !/^limits-|-(login|anonymous)$/.test(q.process));
  const refusedTasks = taskToken.filter((q) => q.status === 429).length;
  const feedEnd = r.history.filter((q) => q.f === 'feed end');
  const feedEndRefused = feedEnd.filter((q) => q.status === 429).length;
  return `# verify against a million tasks

\`npm run bench:verify-million -- ${TASKS}\` on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${run.commit}${
    run.changed.length > 0 ? ` with uncommitted changes to ${run.changed.map((f) => `\`${f}\``).join(', ')}` : ''
  }; node ${process.version}, ${availableParallelism()} CPUs shared with whatever else ran (load average ${loadAverage(2)} at the end).
\`uptime\` at the script's start: \`${r.uptimeAtStart}\`; before verify: \`${r.uptimeBefore}\`; after: \`${r.uptimeAfter}\`.

Paceline: \`src/main.ts\` under tsx (test/helpers/verify-host.ts), on its embedded PostgreSQL and Redis under a
temporary DATA_DIR, every setting at its default (${availableParallelism()} web workers, 1 jobs child, \`THROTTLE_USER\`
100/min, \`LOG_LEVEL\` info) except the ports, \`DATA_DIR\` and \`ACCESS_LOG=off\`; verify's users made with
\`src/cli.ts user:create\` after the start (${s(r.startSeconds)} s for the start and both users).

N = ${n(TASKS)} tasks, seeded before the service's first start in ${s(seed.totalSeconds)} s: PostgreSQL initialised and
started ${s(seed.startSeconds)} s, migrations ${s(seed.migrateSeconds)} s, events by generate_series ${s(seed.eventsSeconds)} s,
projections by the rebuild ${s(seed.rebuildSeconds)} s, VACUUM ANALYZE ${s(seed.vacuumSeconds)} s (as the service's role, which owns
the database but is no superuser: ${vacuumNote}).
After the start \`GET /api/tasks/?page_size=1\` (the seeded owner's token) counted ${n(r.listed.count)} tasks, in ${r.listed.ms.toFixed(0)} ms.

Command (\`$TMP\` the temporary directory; \`--history\` only records, to say below where the time went):

    ${run.command}

| check | verdict | requests | seconds | summary |
|---|---|---:|---:|---|
${checks.join('\n')}
| **total** | **${report?.verdict ?? `no report (exit ${run.code})`}** | **${n(report?.requests ?? 0)}** | **${s(report?.seconds ?? 0)}** (verify's own clock); **${s(run.seconds)}** from \`npm run verify\`'s start to its exit (status ${run.code}) | the task checks take turns; limits runs beside them |

goal: ≤ ${GOAL_SECONDS} s — ${met ? 'met' : 'not met'} (${s(run.seconds)} s; the cursor check ${cursor?.verdict ?? 'did not run'})

## Where the time went (the history)

Times are seconds since verify's first request. The task phases follow each other (the cursor check's writer
included); limits runs beside them with the second user. "busy" sums the requests' latencies (overlapping ones
counted each); the rest of a phase is pauses of the checks themselves and waits for \`Retry-After\` after a 429.

The first user's token (the task checks, one after another, and the clean-up; budget \`THROTTLE_USER\` 100 a
minute) sent ${n(taskToken.length)} requests: ${n(taskToken.length - refusedTasks)} admitted, ${refusedTasks} refused with 429.
The feed check's search for the end of the log took ${feedEnd.length} of them (\`feed end\`: ${
    feedEnd.length - feedEndRefused
  } reads answered, ${feedEndRefused} refused and sent again).

| phase | from → to s | wall s | requests | 429s | busy s | median ms | slowest ms (client, operation, URL) |
|---|---|---:|---:|---|---:|---:|---|
${phaseRows.join('\n')}

The slowest requests of the run:

| ms | at s | client | operation | URL | status |
|---:|---:|---|---|---|---|
${slowest.join('\n')}

What verify printed:

\`\`\`
${run.output.replaceAll('\r', '').trim()}
\`\`\`
`;
}

await runBench('verify-million', main);
