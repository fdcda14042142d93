/**
 * `npm run bench:verify [-- runs [minutes]]`: docs/verify.md "Repeated". Verify's default command runs `runs` times
 * (default 20) against each target below, each started once for all runs: the three Paceline deployments and the
 * exact sliding log of test/helpers/verify-faulty-service.ts (every check must hold: no false alarm), each of its faults
 * (the check its fault breaks must be violated) and each third-party limiter of the zoo (ops/verify-zoo/zoo.ts: the
 * limits check must be violated). Within a run the groups go one after another (the targets of a group at once), so
 * that the timing-bound limits checks of Paceline do not share the 2 cores with a dozen other verify runs. With
 * `minutes`, no run starts once another would end past that budget. Writes ops/bench/results/verify.md after every
 * run. Needs nginx, haproxy, redis-server and redis-cli (npm run bench:verify installs them).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MEMBERS } from '../verify-zoo/zoo.js';
import { startVerifyHost, VERIFY_USER_ARGS } from '../../test/helpers/verify-host.js';
import type * as VerifyPaceline from '../../test/helpers/verify-paceline.js';
import { runVerify, startFaulty } from '../../test/helpers/verify.js';
import { startStores, type TestStores } from '../../test/runner/stores.js';
import { stamp } from './harness/report.js';
import { defer, runBench, scratchDir, secondsSince } from './harness/run.js';
import { readArgs } from './harness/settings.js';
import { median } from './harness/stats.js';
import { Tally, type Expectation } from './harness/verify-tally.js';

const [RUNS, budgetMinutes] = readArgs([20, Infinity]) as [number, number];
const BUDGET_MS = budgetMinutes * 60_000;
const RESULTS = 'ops/bench/results/verify.md';
/** Between two runs against one target, longer than its longest window (the zoo's 5 s): no run sees another's. */
const QUIET_MS = 6_000;
const FAULT_USERS = ['--user', 'alpha:alpha-pass', '--user', 'beta:beta-pass'];
/**
 * Each run logs verify's two users in once; at a run every 70 s the default THROTTLE_LOGIN (10 per 15 min per
 * username) refuses the eleventh with a Retry-After of minutes, which verify honours past its deadline.
 */
const LOGIN = { THROTTLE_LOGIN: '1000/15min' };

type Group = 'Paceline' | 'test services' | 'zoo';
type Started = { base: string; args: string[]; stop: () => Promise<void> };
interface Target {
  name: string;
  group: Group;
  expect: Expectation;
  start(scratch: string): Promise<Started>;
}

/** Each fault of test/helpers/verify-faulty-service.ts and the check its fault must break under the default command. */
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

const paceline = (name: string, start: Target['start']): Target => ({
  name: `Paceline, ${name}`,
  group: 'Paceline',
  expect: 'holds',
  start,
});
const onTestStores =
  (how: 'startBalanced' | 'startOnRedisCluster') =>
  async (scratch: string): Promise<Started> => ({
    ...(await (await testStores(scratch)).helpers[how](LOGIN, 'tsx')),
    args: VERIFY_USER_ARGS,
  });
const faulty = (fault: string, expect: Target['expect'], name: string): Target => ({
  name,
  group: 'test services',
  expect,
  start: async () => ({ ...(await startFaulty(fault)), args: FAULT_USERS }),
});

const TARGETS: Target[] = [
  paceline('one host (2 workers, embedded PostgreSQL and Redis)', async (scratch) => {
    const { host, args } = await startVerifyHost(scratch, LOGIN);
    return { base: host.base, args, stop: async () => void (await host.stop()) };
  }),
  paceline('two hosts (1 worker each) behind HAProxy, one PostgreSQL and Redis', onTestStores('startBalanced')),
  paceline('one host (2 workers) on a Redis Cluster of three masters', onTestStores('startOnRedisCluster')),
  faulty('honest', 'holds', 'an exact sliding log, 40 per 2 s (the test services’ `honest`)'),
  ...Object.entries(FAULTS).map(([fault, [check, what]]) => faulty(fault, check, `${what} (\`${fault}\`)`)),
  // The zoo's Paceline member is the first target above.
  ...MEMBERS.filter((member) => !member.service.startsWith('Paceline')).map((member): Target => ({
    name: `${member.service}: ${member.algorithm}`,
    group: 'zoo',
    expect: 'limits',
    ...member,
  })),
];

type Surprise = { run: number; target: string; excerpt: string };

async function main(): Promise<number> {
  const began = Date.now();
  const loadBefore = loadavg();
  const scratch = await scratchDir('verify-repeat');
  const started: { target: Target; running: Started; lastEnd: number }[] = [];
  const tallies = TARGETS.map((target) => new Tally(target.expect));
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
  console.log(`${started.length} targets started in ${secondsSince(startBegan).toFixed(0)} s`);
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
            const surprise = tallies[TARGETS.indexOf(s.target)]!.record(run, secondsSince(runStart));
            if (surprise === undefined) return;
            surprises.push({ run: i, target: s.target.name, excerpt: surprise });
            console.log(`run ${i}: ${s.target.name}: unexpected verdict\n${run.output}`);
          }),
      );
    }
    done = i;
    console.log(`run ${i}/${RUNS} in ${secondsSince(runBegan).toFixed(0)} s`);
    await writeResults(tallies, surprises, { began, done, loadBefore });
  }
  console.log(await writeResults(tallies, surprises, { began, done, loadBefore, ended: true }));
  return surprises.length > 0 || done < RUNS ? 1 : 0;
}

async function writeResults(
  tallies: Tally[],
  surprises: Surprise[],
  at: { began: number; done: number; loadBefore: number[]; ended?: boolean },
): Promise<string> {
  const load = (l: number[]) => l.map((n) => n.toFixed(2)).join(', ');
  const runs = (n: number) => `${n} run${n === 1 ? '' : 's'}`;
  const table = tallies.map(
    (t, i) =>
      `| ${TARGETS[i]!.name} | ${t.expect === 'holds' ? 'every check holds' : `${t.expect} violated`} | ${t.runs} | ${t.expected} | ${t.findings()} | ${t.runs === 0 ? 0 : Math.round(median(t.requests))} | ${t.runs === 0 ? '0.0' : median(t.seconds).toFixed(1)} |`,
  );
  const unexpected = (holds: boolean) =>
    tallies.filter((t) => (t.expect === 'holds') === holds).reduce((n, t) => n + t.runs - t.expected, 0);
  const status = at.ended
    ? at.done < RUNS
      ? `${at.done} of the ${RUNS} runs asked for (it stopped at the ${BUDGET_MS / 60_000}-minute budget)`
      : runs(at.done)
    : `${at.done} of ${RUNS} runs so far (still running)`;
  const text = `# verify, repeated (\`npm run bench:verify\`)

${stamp()}, node ${process.version}; ${status}
in ${((Date.now() - at.began) / 60_000).toFixed(1)} min, starting the targets included. Load average (1, 5, 15 min) before: ${load(at.loadBefore)};
after: ${load(loadavg())}. One 2-core machine runs the targets, their stores and every verify process.

Each run is verify's default command (\`npm run verify -- <base> <users>\`, no tuning; the zoo's limiters
\`--anonymous\`, with \`--limit 10/5s\` where they send no \`RateLimit-Policy\`) against every target below,
each started once for all runs. A run takes the groups one after another (the Paceline deployments, then the
test services of \`test/helpers/verify-faulty-service.ts\`, then the zoo), the targets of a group at once; a target rests ${QUIET_MS / 1000} s between
its runs. Paceline runs with \`THROTTLE_USER=60/3s\` and \`THROTTLE_LOGIN=${LOGIN.THROTTLE_LOGIN}\` (each run logs
both users in, more often than the default 10 per 15 minutes allows); the two multi-host deployments also
with the suite's \`VERIFY_SETTINGS\` (\`THROTTLE_TIMEOUT_MS=5000\`, \`DATABASE_POOL_SIZE=4\`).

**${unexpected(false)} missed faults and ${unexpected(true)} false alarms** in ${runs(at.done)}.

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
