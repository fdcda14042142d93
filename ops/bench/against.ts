/**
 * `npm run bench:against -- <dir>`: this build against the one in `<dir>` (a clone of another commit, its `dist/`
 * built), one path under wrk, in interleaved rounds on the same stores (docs/benchmarks.md "One build against
 * another"). BENCH_PATH (/api/tasks/), BENCH_ROUNDS (10), BENCH_SECONDS (5); writes ops/bench/results/against.md.
 *
 *   git clone -q . /tmp/base && (cd /tmp/base && git checkout -q <commit> && npm ci && npm run build)
 *   BENCH_PATH=/healthz BENCH_ROUNDS=10 npm run bench:against -- /tmp/base
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { markdownTable, describeCommit, hostLine, writeResults } from './harness/report.js';
import { log, runBench } from './harness/run.js';
import { seedDatabase } from './harness/seed.js';
import { runWrk } from './harness/send.js';
import { redisCpuUs, startService, startStores, treeCpuSeconds, type RunningCluster } from './harness/service.js';
import { readBenchCount, readBenchText } from './harness/settings.js';
import { median, spread } from './harness/stats.js';

const run = promisify(execFile);
const other = process.argv[2] ? resolve(process.argv[2]) : '';
const path = readBenchText('BENCH_PATH', '/api/tasks/');
const rounds = readBenchCount('BENCH_ROUNDS', 10);
const seconds = readBenchCount('BENCH_SECONDS', 5);
const RESULTS = 'ops/bench/results/against.md';

/** The other build's commit, as git names it in its clone (never the clone's path). */
const commitOf = (dir: string): Promise<string> =>
  run('git', ['-C', dir, 'rev-parse', '--short', 'HEAD']).then(
    ({ stdout }) => stdout.trim(),
    () => 'a build outside git',
  );

interface Tally {
  serviceCpu: number;
  redisCpu: number;
  requests: number;
}

await runBench('bench:against', async () => {
  if (!existsSync(`${other}/dist/src/main.js`)) {
    log(`usage: npm run bench:against -- <a clone of the other commit, with dist/ built> (none at "${other}")`);
    return 2;
  }
  const stores = await startStores();
  await seedDatabase(stores.databaseUrl, 20_000);
  const settings = (prefix: string) => ({
    DATABASE_URL: stores.databaseUrl,
    REDIS_URL: stores.redisUrl,
    REDIS_PREFIX: prefix,
    CURSOR_SECRET: 'against-bench-cursor-secret-0123456789',
    THROTTLE_ANON: '100000/s',
    THROTTLE_USER: '100000/s',
  });
  // The service's entry point is dist/src/main.js from the working directory: the other build starts from its own.
  const home = process.cwd();
  process.chdir(other);
  const theirs = await startService(settings('against:other:'));
  process.chdir(home);
  const ours = await startService(settings('against:this:'));
  const tallies = new Map<RunningCluster, Tally>(
    [ours, theirs].map((s) => [s, { serviceCpu: 0, redisCpu: 0, requests: 0 }]),
  );
  const measure = async (service: RunningCluster, duration: number, tally?: Tally): Promise<number> => {
    const [service0, redis0] = [treeCpuSeconds(service.child.pid!), await redisCpuUs(stores.admin)];
    const wrk = await runWrk({ url: `${service.base}${path}` }, duration);
    if (tally) {
      tally.serviceCpu += treeCpuSeconds(service.child.pid!) - service0;
      tally.redisCpu += ((await redisCpuUs(stores.admin)) - redis0) / 1e6;
      tally.requests += wrk.requests;
    }
    return wrk.reqPerS;
  };
  await measure(theirs, 3);
  await measure(ours, 3);
  const rows: (string | number)[][] = [];
  for (let round = 1; round <= rounds; round += 1) {
    const order = round % 2 === 1 ? [theirs, ours] : [ours, theirs];
    const rate = new Map<RunningCluster, number>();
    for (const service of order) rate.set(service, await measure(service, seconds, tallies.get(service)));
    const ratio = rate.get(ours)! / rate.get(theirs)!;
    rows.push([round, Math.round(rate.get(theirs)!), Math.round(rate.get(ours)!), ratio.toFixed(3)]);
    log(
      `round ${round}: other ${Math.round(rate.get(theirs)!)}/s, this ${Math.round(rate.get(ours)!)}/s (${ratio.toFixed(3)})`,
    );
  }
  const ratios = rows.map((row) => Number(row[3]));
  const perRequest = (tally: Tally) =>
    `${((1e6 * tally.serviceCpu) / tally.requests).toFixed(1)} µs service, ` +
    `${((1e6 * tally.redisCpu) / tally.requests).toFixed(1)} µs Redis`;
  const text = [
    `# This build against another: \`GET ${path}\``,
    '',
    `${hostLine()}; this build: ${describeCommit()}; the other: ${await commitOf(other)}.`,
    '',
    `Median ratio (this build's requests/s over the other's) **${median(ratios).toFixed(3)}**, ` +
      `spread ${spread(ratios, 3)} over ${rounds} rounds of ${seconds} s.`,
    `CPU per request: this build ${perRequest(tallies.get(ours)!)}; the other ${perRequest(tallies.get(theirs)!)}.`,
    '',
    markdownTable(['round', 'other /s', 'this /s', 'ratio'], rows),
    '',
  ].join('\n');
  await writeResults(RESULTS, text);
});
