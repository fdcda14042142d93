/**
 * `npm run bench:verify [-- runs [minutes]]`: the goals of docs/verify.md "It catches real faults" measured by
 * repetition. Verify's default command (users only, or the zoo's arguments) runs `runs` times (default 20)
 * against each target below, started once for all runs:
 *   - Paceline on one host (2 web workers, its own embedded PostgreSQL and Redis, as `npm start` runs it), two
 *     Paceline hosts behind HAProxy on one PostgreSQL and Redis, one Paceline host on a Redis Cluster of three
 *     masters, and the exact sliding log of test/verify/ (`honest`): every check must hold (no false alarm);
 *   - each faulty service of test/verify/: the check its fault breaks must be violated;
 *   - each third-party limiter of the zoo (ops/verify-zoo/zoo.ts): the limits check must be violated.
 * Within a run the groups go one after another (the targets of a group at once), so that the timing-bound
 * limits checks of Paceline do not share the 2 cores with a dozen other verify runs. With `minutes`, no run
 * starts once another would end past that budget. Writes ops/bench/results/verify.md after every run.
 * Needs nginx, haproxy, redis-server and redis-cli (npm run bench:verify installs them).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SCHEDULES } from '../../clients/verify/checks/limits-schedule.js';
import { MEMBERS } from '../verify-zoo/zoo.js';
import { startVerifyHost, VERIFY_USER_ARGS } from '../../test/helpers/verify-host.js';
import type * as VerifyPaceline from '../../test/helpers/verify-paceline.js';
import { runVerify, startFaulty, type VerifyRun } from '../../test/helpers/verify.js';
import { startStores, type TestStores } from '../../test/runner/stores.js';
import { stamp } from './harness/report.js';
import { defer, runBench, scratchDir } from './harness/run.js';
import { median } from './harness/stats.js';

const RUNS = Number(process.argv[2] ?? 20);
const BUDGET_MS = process.argv[3] === undefined ? Infinity : Number(process.argv[3]) * 60_000;
const RESULTS = 'ops/bench/results/verify.md';
/** Between two runs against one target, longer than its longest window (the zoo's 5 s): no run sees another's. */
const QUIET_MS = 6_000;
const FAULT_USERS = ['--user', 'alpha:alpha-pass', '--user', 'beta:beta-pass'];
/**
 * Each run logs verify's two users in once; at a run every 70 s the default THROTTLE_LOGIN (10 per 15 min per
 * username) refuses the eleventh with a Retry-After of minutes, which verify honours past its deadline.
 */
const LOGIN = { THROTTLE_LOGIN: '1000/15min' };

type Group = 'Paceline' | 'test/verify/' | 'zoo';
type Started = { base: string; args: string[]; stop: () => Promise<void> };
interface Target {
  name: string;
  group: Group;
  /** `holds`: every check holds; otherwise the check that must be violated. */
  expect: 'holds' | 'limits' | 'cursor' | 'ryw';
  start(scratch: string): Promise<Started>;
}

/** Each faulty service of test/verify/ and the check its fault must break under the default command. */
const FAULTS = {
  'fixed-window': ['limits', 'a fixed window on the clock, 10 per 2 s'],
  'first-hit-window': ['limits', 'a fixed window opened by the first hit, 10 per 2 s'],
  'read-then-write': ['limits', 'DRF’s cache throttle (read, check, write back), 10 per 2 s'],
  'per-process': ['limits', 'a sliding log per process behind 2 workers, 10 per 2 s'],
  'offset-cursor': ['cursor', 'an `OFFSET`-based "cursor"'],
  'ttl-cache': ['ryw', 'a 5-second read cache on each of two hosts behind a balancer'],
} as const;

/** The PostgreSQL and Redis the two multi-host deployments share, started as `npm test` starts its own. */
let stores: Promise<{ stores: TestStores; helpers: typeof VerifyPaceline }> | undefined;
function testStores(scratch: string) {
  stores ??= (async () => {
    const root = join(scratch, 'stores');
    await mkdir(join(root, 'scratch'), { recursive: true, mode: 0o755 });
    const started = await startStores(root, join(root, 'scratch'));
    for (const key of ['TEST_DATABASE_URL', 'TEST_SERVICE_DATABASE_URL', 'TEST_REDIS_URL', 'TEST_TMP_DIR'])
      process.env[key] = started.env[key];
    // Read once the variables above are set: it takes its scratch directory from TEST_TMP_DIR.
    return { stores: started, helpers: await import('../../test/helpers/verify-paceline.js') };
  })();
  return stores;
}

const TARGETS: Target[] = [
  {
    name: 'Paceline, one host (2 workers, embedded PostgreSQL and Redis)',
    group: 'Paceline',
    expect: 'holds',
    async start(scratch) {
      const { host, args } = await startVerifyHost(scratch, LOGIN);
      return { base: host.base, args, stop: async () => void (await host.stop()) };
    },
  },
  {
    name: 'Paceline, two hosts (1 worker each) behind HAProxy, one PostgreSQL and Redis',
    group: 'Paceline',
    expect: 'holds',
    async start(scratch) {
      const { helpers } = await testStores(scratch);
      return { ...(await helpers.startBalanced(LOGIN, 'tsx')), args: VERIFY_USER_ARGS };
    },
  },
  {
    name: 'Paceline, one host (2 workers) on a Redis Cluster of three masters',
    group: 'Paceline',
    expect: 'holds',
    async start(scratch) {
      const { helpers } = await testStores(scratch);
      return { ...(await helpers.startOnRedisCluster(LOGIN, 'tsx')), args: VERIFY_USER_ARGS };
    },
  },
  {
    name: 'an exact sliding log, 40 per 2 s (test/verify/ `honest`)',
    group: 'test/verify/',
    expect: 'holds',
    start: async () => ({ ...(await startFaulty('honest')), args: FAULT_USERS }),
  },
  ...Object.entries(FAULTS).map(([fault, [check, what]]): Target => ({
    name: `${what} (\`${fault}\`)`,
    group: 'test/verify/',
    expect: check,
    start: async () => ({ ...(await startFaulty(fault)), args: FAULT_USERS }),
  })),
  // The zoo's Paceline member is the first target above.
  ...MEMBERS.filter((member) => !member.service.startsWith('Paceline')).map((member): Target => ({
    name: `${member.service}: ${member.algorithm}`,
    group: 'zoo',
    expect: 'limits',
    ...member,
  })),
];

interface Row {
  target: Target;
  runs: number;
  expected: number;
  requests: number[];
  seconds: number[];
  /** The expected check's summary, in each run where it was violated. */
  summaries: string[];
  /** What the runs that did not give the expected verdict said instead (`limits violated`, `exit 4`), counted. */
  instead: Map<string, number>;
}

interface Surprise {
  run: number;
  target: string;
  excerpt: string;
}

async function main(): Promise<number> {
  const began = Date.now();
  const loadBefore = loadavg();
  const scratch = await scratchDir('verify-repeat');
  const started: { target: Target; running: Started; lastEnd: number }[] = [];
  const rows = new Map<Target, Row>(
    TARGETS.map((t) => [
      t,
      { target: t, runs: 0, expected: 0, requests: [], seconds: [], summaries: [], instead: new Map() },
    ]),
  );
  const surprises: Surprise[] = [];
  defer(async () => {
    await Promise.allSettled(started.map(({ running }) => running.stop()));
    if (stores !== undefined) await (await stores).stores.stop();
  });
  let done = 0;
  const startBegan = Date.now();
  // One at a time: each start is CPU-heavy (tsx, PostgreSQL's initdb), and a failure names its target.
  for (const [i, target] of TARGETS.entries()) {
    const dir = join(scratch, `target-${i}`);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    const running = await target.start(dir).catch((error: unknown) => {
      throw new Error(`starting ${target.name}: ${String(error)}`);
    });
    started.push({ target, running, lastEnd: 0 });
  }
  console.log(`${started.length} targets started in ${((Date.now() - startBegan) / 1000).toFixed(0)} s`);
  const groups = [...new Set(TARGETS.map((t) => t.group))];
  for (let i = 1; i <= RUNS; i++) {
    const runBegan = Date.now();
    const perRun = done === 0 ? 0 : (runBegan - startBegan) / done;
    if (done > 0 && runBegan - began + perRun > BUDGET_MS) {
      console.log(`stopping after ${done} runs: another would end past the ${BUDGET_MS / 60_000}-minute budget`);
      break;
    }
    for (const group of groups) {
      await Promise.all(
        started
          .filter((s) => s.target.group === group)
          .map(async (s) => {
            await sleep(Math.max(0, s.lastEnd + QUIET_MS - Date.now()));
            const runStart = Date.now();
            const report = join(scratch, `report-${i}-${TARGETS.indexOf(s.target)}`);
            const run = await runVerify(s.running.base, s.running.args, report);
            s.lastEnd = Date.now();
            const surprise = record(rows.get(s.target)!, run, (s.lastEnd - runStart) / 1000);
            if (surprise !== undefined) {
              surprises.push({ run: i, target: s.target.name, excerpt: surprise });
              console.log(`run ${i}: ${s.target.name}: unexpected verdict\n${run.output}`);
            }
          }),
      );
    }
    done = i;
    console.log(`run ${i}/${RUNS} in ${((Date.now() - runBegan) / 1000).toFixed(0)} s`);
    await writeResults([...rows.values()], surprises, { began, done, loadBefore });
  }
  console.log(await writeResults([...rows.values()], surprises, { began, done, loadBefore, ended: true }));
  return surprises.length > 0 || done < RUNS ? 1 : 0;
}

/** Counts one run; returns an excerpt of verify's output when the verdict was not the expected one. */
function record(row: Row, run: VerifyRun, wallSeconds: number): string | undefined {
  row.runs++;
  row.requests.push(run.report.requests ?? 0);
  row.seconds.push((run.report as { seconds?: number }).seconds ?? wallSeconds);
  const { expect } = row.target;
  const check = run.report.checks.find((c) => c.name === expect);
  const ok =
    expect === 'holds'
      ? run.code === 0 && run.report.checks.length > 0 && run.report.checks.every((c) => c.verdict === 'holds')
      : check?.verdict === 'violated';
  if (check?.verdict === 'violated') row.summaries.push(check.summary);
  if (ok) {
    row.expected++;
    return undefined;
  }
  const said = run.report.checks.filter((c) => (expect === 'holds' ? c.verdict !== 'holds' : c.name === expect));
  const ended = run.code === null ? 'killed at the 180-s deadline' : `exit ${run.code}`;
  for (const what of said.length > 0 ? said.map((c) => `${c.name} ${c.verdict}`) : [ended])
    row.instead.set(what, (row.instead.get(what) ?? 0) + 1);
  const lines = run.output.trim().split('\n');
  const verdicts = lines.filter((line) => /^(holds|violated|skipped)\s/.test(line) || line.startsWith('verify'));
  return [...(verdicts.length > 0 ? verdicts : lines.slice(-10)), `(${ended})`].join('\n');
}

/**
 * What the runs found: each kind of problem of the expected check with its range and the runs that showed it,
 * then (limits) in how many runs each schedule exposed it.
 */
function findings(row: Row): string {
  const instead = [...row.instead].map(([what, runs]) => `${what} (${runs})`).join(', ');
  if (row.target.expect === 'holds')
    return row.expected === row.runs ? 'every check held in every run' : `instead: ${instead}; see below`;
  const missed = instead === '' ? '' : `; not found in ${row.runs - row.expected} runs: ${instead}`;
  if (row.summaries.length === 0) return `never violated${missed}`;
  const kinds = new Map<string, { runs: number; min: number; max: number }>();
  const schedules = new Map<string, number>();
  for (const summary of row.summaries) {
    const problems = row.target.expect === 'limits' ? summary.replace(/^[^:]*: /, '').split('; ') : [summary];
    for (const problem of problems) {
      const [, count = '0', rest = problem] = /^(\d+) (.*?)(?:, exposed by .*| \(first, .*)?$/.exec(problem) ?? [];
      const kind = kinds.get(rest) ?? { runs: 0, min: Infinity, max: -Infinity };
      kinds.set(rest, { runs: kind.runs + 1, min: Math.min(kind.min, +count), max: Math.max(kind.max, +count) });
    }
    for (const phrase of Object.values(SCHEDULES))
      if (summary.includes(phrase)) schedules.set(phrase, (schedules.get(phrase) ?? 0) + 1);
  }
  const n = row.summaries.length;
  const range = (k: { min: number; max: number }) => (k.min === k.max ? `${k.min}` : `${k.min}–${k.max}`);
  const found = [...kinds].map(([rest, k]) => `${range(k)} ${rest}${k.runs < n ? ` (${k.runs} runs)` : ''}`);
  const exposed = [...schedules].map(([phrase, runs]) => `${phrase} (${runs})`);
  return found.join('; ') + (exposed.length > 0 ? `; exposed by ${exposed.join(', ')}` : '') + missed;
}

async function writeResults(
  rows: Row[],
  surprises: Surprise[],
  at: { began: number; done: number; loadBefore: number[]; ended?: boolean },
): Promise<string> {
  const load = (l: number[]) => l.map((n) => n.toFixed(2)).join(', ');
  const minutes = ((Date.now() - at.began) / 60_000).toFixed(1);
  const runs = (n: number) => `${n} run${n === 1 ? '' : 's'}`;
  const expectation = (row: Row) =>
    row.target.expect === 'holds' ? 'every check holds' : `${row.target.expect} violated`;
  const table = rows.map(
    (row) =>
      `| ${row.target.name} | ${expectation(row)} | ${row.runs} | ${row.expected} | ${findings(row)} | ${row.runs === 0 ? 0 : Math.round(median(row.requests))} | ${row.runs === 0 ? '0.0' : median(row.seconds).toFixed(1)} |`,
  );
  const missed = rows.filter((r) => r.target.expect !== 'holds').reduce((n, r) => n + r.runs - r.expected, 0);
  const alarms = rows.filter((r) => r.target.expect === 'holds').reduce((n, r) => n + r.runs - r.expected, 0);
  const status = at.ended
    ? at.done < RUNS
      ? `${at.done} of the ${RUNS} runs asked for (it stopped at the ${BUDGET_MS / 60_000}-minute budget)`
      : runs(at.done)
    : `${at.done} of ${RUNS} runs so far (still running)`;
  const text = `# verify, repeated (\`npm run bench:verify\`)

${stamp()}, node ${process.version}; ${status}
in ${minutes} min, starting the targets included. Load average (1, 5, 15 min) before: ${load(at.loadBefore)};
after: ${load(loadavg())}. One 2-core machine runs the targets, their stores and every verify process.

Each run is verify's default command (\`npm run verify -- <base> <users>\`, no tuning; the zoo's limiters
\`--anonymous\`, with \`--limit 10/5s\` where they send no \`RateLimit-Policy\`) against every target below,
each started once for all runs. A run takes the groups one after another (the Paceline deployments, then the
services of \`test/verify/\`, then the zoo), the targets of a group at once; a target rests ${QUIET_MS / 1000} s between
its runs. Paceline runs with \`THROTTLE_USER=60/3s\` and \`THROTTLE_LOGIN=${LOGIN.THROTTLE_LOGIN}\` (each run logs
both users in, more often than the default 10 per 15 minutes allows); the two multi-host deployments also
with the suite's \`VERIFY_SETTINGS\` (\`THROTTLE_TIMEOUT_MS=5000\`, \`DATABASE_POOL_SIZE=4\`).

**${missed} missed faults and ${alarms} false alarms** in ${runs(at.done)}.

| target | expected | runs | as expected | what the runs found (range over runs; runs per schedule) | median requests | median seconds |
|---|---|---:|---:|---|---:|---:|
${table.join('\n')}
${
  surprises.length === 0
    ? ''
    : `\n## Unexpected verdicts\n\n${surprises
        .map((s) => `Run ${s.run}, ${s.target}:\n\n\`\`\`\n${s.excerpt}\n\`\`\``)
        .join('\n\n')}\n`
}`;
  await writeFile(RESULTS, text);
  return text;
}

await runBench('verify-repeat', main);
