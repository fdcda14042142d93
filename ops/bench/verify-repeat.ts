/**
 * `npm run bench:verify [-- runs]`: the goals of docs/verify.md "It catches real faults" measured by
 * repetition — verify's default command run `runs` times (default 20) against Paceline (one host, 2 web
 * workers, its own embedded PostgreSQL and Redis, started as `npm start` does) and against each faulty
 * service of test/verify/, counting false alarms and faults found. Writes ops/bench/results/verify.md.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startVerifyHost } from '../../test/fixtures/verify-host.js';
import { runVerify, startFaulty } from '../../test/helpers/verify.js';

const RUNS = Number(process.argv[2] ?? 20);
/** Each faulty service of test/verify/ and the check its fault must break under the default command. */
const FAULTS = {
  'fixed-window': 'limits',
  'first-hit-window': 'limits',
  'read-then-write': 'limits',
  'per-process': 'limits',
  'offset-cursor': 'cursor',
  'ttl-cache': 'ryw',
} as const;
const FAULT_USERS = ['--user', 'alpha:alpha-pass', '--user', 'beta:beta-pass'];

async function main(): Promise<void> {
  const scratch = await mkdtemp(join(tmpdir(), 'paceline-verify-repeat-'));
  const { host, args: users } = await startVerifyHost(scratch);
  const tally: Record<string, { runs: number; expected: number; requests: number[] }> = {};
  const count = (name: string, ok: boolean, run: Awaited<ReturnType<typeof runVerify>>) => {
    const row = (tally[name] ??= { runs: 0, expected: 0, requests: [] });
    row.runs++;
    if (ok) row.expected++;
    row.requests.push(run.report.requests ?? 0);
  };
  try {
    const faults = await Promise.all(
      (Object.keys(FAULTS) as (keyof typeof FAULTS)[]).map(async (fault) => [fault, await startFaulty(fault)] as const),
    );
    try {
      for (let i = 1; i <= RUNS; i++) {
        const began = Date.now();
        const dir = (name: string) => join(scratch, `${name}-${i}`);
        const paceline = runVerify(host.base, users, dir('paceline'));
        const found = faults.map(([fault, service]) =>
          runVerify(service.base, FAULT_USERS, dir(fault)).then((run) => {
            const check = FAULTS[fault];
            const verdict = run.report.checks.find((c) => c.name === check)?.verdict;
            count(`${fault} (${check})`, verdict === 'violated', run);
          }),
        );
        const run = await paceline;
        count('Paceline (all five checks)', run.code === 0, run);
        if (run.code !== 0) console.log(`run ${i}: Paceline was reported:\n${run.output}`);
        await Promise.all(found);
        console.log(`run ${i}/${RUNS} in ${((Date.now() - began) / 1000).toFixed(0)} s`);
      }
    } finally {
      await Promise.all(faults.map(([, service]) => service.stop()));
    }
  } finally {
    await host.stop();
    await rm(scratch, { recursive: true, force: true });
  }
  await writeResults(tally);
}

async function writeResults(tally: Record<string, { runs: number; expected: number; requests: number[] }>) {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const rows = Object.entries(tally).map(([name, row]) => {
    const what = name.startsWith('Paceline') ? 'every check held (no false alarm)' : 'the fault was reported';
    return `| ${name} | ${row.runs} | ${row.expected} of ${row.runs}: ${what} | ${median(row.requests)} |`;
  });
  const text = `# verify, repeated

\`npm run bench:verify -- ${RUNS}\` on ${new Date().toISOString().slice(0, 10)}, load average ${loadavg()
    .map((n) => n.toFixed(1))
    .join(', ')} at the end. Each run: verify against one Paceline host (2 web workers, \`THROTTLE_USER=60/3s\`)
with all five checks, and at the same time against each faulty service of \`test/verify/\`.

| service (checks) | runs | result | median requests per run |
|---|---:|---|---:|
${rows.join('\n')}
`;
  await writeFile('ops/bench/results/verify.md', text);
  console.log(text);
}

await main();
