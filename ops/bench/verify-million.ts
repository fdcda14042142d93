/**
 * The goal of docs/verify.md "Bounded on any collection", measured: verify's default command ends within 2 minutes
 * against a deployment holding a million tasks, and still judges the cursor guarantee.
 *
 *   npm run bench:verify-million -- [tasks, default 1000000]
 *
 * Seeds the tasks into a fresh DATA_DIR before the service ever runs on it, starts Paceline on it with every setting
 * at its default but the ports, DATA_DIR and ACCESS_LOG=off (THROTTLE_USER's 100/min bounds the run), and runs
 * `npm run verify` once as a user would, with `--history` to say where the time went. Prints and writes
 * ops/bench/results/verify-million.md; exit status 1 unless the run completed and verify said holds.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../../src/embedded/ports.js';
import { startVerifyHost, VERIFY_USER_ARGS } from '../../test/helpers/verify-host.js';
import { changedFiles, describeCommit, loadAverage, uptime } from './harness/report.js';
import { defer, runBench, scratchDir, secondsSince } from './harness/run.js';
import { seedEmbedded, type EmbeddedSeeding } from './harness/seed.js';
import { readArgs } from './harness/settings.js';
import { sumOf } from './harness/stats.js';
import { historyPhases, readHistory, slowestOf, tookSeconds, type HistoryRequest } from './harness/verify-history.js';

const [TASKS] = readArgs([1_000_000]) as [number];
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

type Check = { name: string; verdict: string; summary: string; requests: number; seconds: number };
type VerifyReport = Omit<Check, 'name' | 'summary'> & { checks: Check[] };
const s = (x: number) => x.toFixed(1);

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
    ...Object.fromEntries(['THROTTLE_USER', 'WEB_CONCURRENCY', 'JOB_CONCURRENCY', 'LOG_LEVEL'].map((k) => [k, ''])),
  };
  const seed = await seedEmbedded(settings, TASKS);
  console.log(
    `seeded ${TASKS} tasks in ${s(seed.totalSeconds)} s (PostgreSQL start ${s(seed.startSeconds)} s, migrations ` +
      `${s(seed.migrateSeconds)} s, events ${s(seed.eventsSeconds)} s, rebuild ${s(seed.rebuildSeconds)} s, ` +
      `VACUUM ANALYZE ${s(seed.vacuumSeconds)} s: ${seed.vacuumed} of ${seed.userTables} tables vacuumed, ` +
      `${seed.analyzed} analysed, ${seed.notices.length} notices)`,
  );

  const starting = Date.now();
  const { host } = await startVerifyHost(scratch, settings);
  defer(() => host.stop());
  const startSeconds = secondsSince(starting);
  // The page-number list's `count`, with the seeded reader's token (its own budget, not verify's users').
  const began = performance.now();
  const response = await fetch(`${host.base}/api/tasks/?page_size=1`, {
    headers: { Authorization: `Bearer ${seed.reader.token}`, Accept: 'application/json' },
  });
  const body = (await response.json()) as { count?: unknown };
  const listed = { count: body.count as number, ms: performance.now() - began };
  if (response.status !== 200 || typeof body.count !== 'number')
    throw new Error(`GET /api/tasks/?page_size=1 answered ${response.status} ${JSON.stringify(body).slice(0, 200)}`);
  console.log(
    `Paceline ready and verify's users made in ${s(startSeconds)} s; GET /api/tasks/?page_size=1: count ` +
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

type VerifyRun = Awaited<ReturnType<typeof runVerify>>;

/** `npm run verify` with verify's users, as a user runs it; stopped (its process group) past the deadline. */
async function runVerify(base: string, scratch: string) {
  const reportDir = join(scratch, 'report');
  const args = ['run', 'verify', '--', base, ...VERIFY_USER_ARGS, '--report', reportDir];
  args.push('--history', join(scratch, 'history.jsonl'));
  const command = `npm ${args.join(' ')}`.replaceAll(scratch, '$TMP');
  console.log(`running: ${command}`);
  // The commit, and the tracked files that differed from it, when verify started (its code is read then).
  const [commit, changed] = [describeCommit().split(' ')[0]!, changedFiles()];
  const began = Date.now();
  const child = spawn('npm', args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const stopGroup = () => {
    try {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  };
  defer(stopGroup);
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const timer = setTimeout(stopGroup, VERIFY_DEADLINE_MS);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  const seconds = secondsSince(began);
  output = output.replaceAll(scratch, '$TMP');
  const report = await readFile(join(reportDir, 'report.json'), 'utf8').then(
    (text) => JSON.parse(text) as VerifyReport,
    () => undefined,
  );
  return { command, commit, changed, code, seconds, output, report };
}

function describe(r: {
  seed: EmbeddedSeeding;
  startSeconds: number;
  listed: { count: number; ms: number };
  run: VerifyRun;
  history: HistoryRequest[];
  uptimeAtStart: string;
  uptimeBefore: string;
  uptimeAfter: string;
}): string {
  const { seed, run } = r;
  const report = run.report;
  const n = (x: number) => x.toLocaleString('en-US');
  const ms = (x: number) => (x * 1000).toFixed(0);
  const cursor = report?.checks.find((c) => c.name === 'cursor');
  const met = report !== undefined && run.seconds <= GOAL_SECONDS && cursor?.verdict === 'holds';
  const checks = (report?.checks ?? []).map(
    (c) => `| ${c.name} | ${c.verdict} | ${n(c.requests)} | ${s(c.seconds)} | ${c.summary.replaceAll('|', '\\|')} |`,
  );
  const refusedIn = (list: HistoryRequest[]) => list.filter((q) => q.status === 429);
  const phaseRows = historyPhases(r.history, TASK_CHECKS).map((p) => {
    const refused = refusedIn(p.requests);
    const latencies = p.requests.map(tookSeconds).sort((a, b) => a - b);
    const [slowest] = slowestOf(p.requests);
    const longestWait = Math.max(0, ...refused.map((q) => q.retryAfter ?? 0));
    return (
      `| ${p.name} | ${s(p.from)} → ${s(p.to)} | ${s(p.to - p.from)} | ${n(p.requests.length)} | ${refused.length}` +
      `${refused.length > 0 ? ` (longest Retry-After ${longestWait} s)` : ''} | ${s(sumOf(latencies, (x) => x))} | ` +
      `${ms(latencies[Math.floor(latencies.length / 2)] ?? 0)} | ` +
      `${slowest ? `${ms(tookSeconds(slowest))} (${slowest.process} ${slowest.f} \`${slowest.url}\`)` : ''} |`
    );
  });
  const slowest = slowestOf(r.history, 8).map(
    (q) => `| ${ms(tookSeconds(q))} | ${s(q.invoke)} | ${q.process} | ${q.f} | \`${q.url}\` | ${q.status ?? 'none'} |`,
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
  const refusedTasks = refusedIn(taskToken).length;
  const feedEnd = r.history.filter((q) => q.f === 'feed end');
  const feedEndRefused = refusedIn(feedEnd).length;
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
