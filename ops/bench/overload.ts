/**
 * `npm run bench:overload`: what the compiled service does with more load than it can serve. Starts a throwaway
 * PostgreSQL and Redis, seeds a few thousand tasks, starts `node dist/src/main.js` (2 web workers, limits never
 * reached) twice, once with ADMISSION_CONTROL=off and once with =on, finds the mix's capacity with an open-loop
 * ramp, runs the mix open-loop at 0.5×, 1×, 2× and 4× that rate on each instance, then a flood of 2,000
 * keep-alive connections on each, while a prober checks `/healthz` on a new connection every 250 ms. Prints a
 * Markdown report, also written to ops/bench/results/overload.md; docs/benchmarks.md
 * "Overload (`npm run bench:overload`)" explains it.
 *
 *   npm run bench:overload                                          # about 5 minutes
 *   BENCH_SECONDS=6 BENCH_FLOOD_SECONDS=5 npm run bench:overload    # a quicker, rougher run
 */
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { connectDatabase } from '../../db/connect.js';
import type { Stores } from './read-path/processes.js';
import { FIRST_RATE, isBounded, measureCapacity, P99_BOUND_MS } from './overload/capacity.js';
import { machineFacts, settingsLine } from './overload/preamble.js';
import { PROBE_TIMEOUT_MS } from './overload/outcomes.js';
import { startLoadProcess, startProber, type LoadProcess, type Prober } from './overload/processes.js';
import { admissionTable, classTable, floodTable, rampTable, scenarioTable } from './overload/report.js';
import {
  healthOf,
  REST_MS,
  runFloodScenario,
  runMixScenario,
  type Bench,
  type FloodScenario,
  type MixScenario,
} from './overload/scenarios.js';
import { MODES, counterReader, settle, startInstance, startSeededStores, type Instance } from './overload/service.js';
import { uptime } from './machine.js';
import { readBenchCount } from './settings.js';

const RESULTS = process.env.BENCH_RESULTS || 'ops/bench/results/overload.md';
const TASKS = 5_000;
const MULTIPLES = [0.5, 1, 2, 4];
const TIMEOUT_MS = 2_000;
/** The load process's keep-alive connections: enough that an overload reaches the service, not only its queue. */
const SOCKETS = 1_000;
const RAMP_SECONDS = 3;
const WARM_UP_SECONDS = 5;

const seconds = readBenchCount('BENCH_SECONDS', 10);
const floodSeconds = readBenchCount('BENCH_FLOOD_SECONDS', 10);
const wantedConnections = readBenchCount('BENCH_FLOOD_CONNECTIONS', 2_000);
const logLevel = process.env.BENCH_LOG_LEVEL || 'info';
const log = (line: string) => process.stderr.write(`${line}\n`);

const running: { stores?: Stores; instances: Instance[]; load?: LoadProcess; prober?: Prober; root?: string } = {
  instances: [],
};

async function cleanUp(): Promise<void> {
  running.load?.stop();
  running.prober?.stop();
  await Promise.allSettled(running.instances.map((instance) => instance.cluster.stop('SIGTERM')));
  await running.stores?.stop().catch(() => {});
  if (running.root) await rm(running.root, { recursive: true, force: true });
}

/** The soft open-file limit this process (and all it starts) runs under. */
async function fileLimit(): Promise<number> {
  const limits = await readFile('/proc/self/limits', 'utf8').catch(() => '');
  const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
  return soft === undefined ? NaN : soft === 'unlimited' ? Infinity : Number(soft);
}

async function main(): Promise<void> {
  const startedAt = Date.now();
  const uptimeBefore = uptime();
  const loadBefore = loadavg();
  const limit = await fileLimit();
  // The load process holds every flood connection, and a few hundred more for its keep-alive pool and the rest.
  const connections = Math.min(wantedConnections, Number.isFinite(limit) ? limit - 512 : wantedConnections);
  log(
    `overload benchmark: capacity search, ${MULTIPLES.length * 2} runs of ${seconds} s, 2 floods of ${floodSeconds} s`,
  );
  running.root = await mkdtemp(join(tmpdir(), 'paceline-overload-'));
  await chmod(running.root, 0o755); // as root, PostgreSQL runs as the postgres user
  const { stores, seeded } = await startSeededStores(running.root, TASKS);
  running.stores = stores;
  const started = await Promise.allSettled(MODES.map((mode) => startInstance(stores, mode, logLevel)));
  for (const result of started) if (result.status === 'fulfilled') running.instances.push(result.value);
  for (const result of started) if (result.status === 'rejected') throw result.reason;
  const [off, on] = running.instances as [Instance, Instance];
  const monitor = connectDatabase(stores.databaseUrl, 1, 'overload-bench-monitor');
  const bench: Bench = {
    load: (running.load = await startLoadProcess()),
    prober: (running.prober = await startProber()),
    read: counterReader(monitor),
  };
  const mixRun = (ratePerS: number, runSeconds: number, seed: number) => ({
    token: seeded.writer.token,
    tasks: TASKS,
    ratePerS,
    seconds: runSeconds,
    seed,
    timeoutMs: TIMEOUT_MS,
    sockets: SOCKETS,
  });

  // A cold instance (code not yet optimised, pool connections not yet open) is slow for its first seconds.
  const warmUp = (instance: Instance) =>
    bench.load.mix({ ...mixRun(2 * FIRST_RATE, WARM_UP_SECONDS, 999), base: instance.cluster.base });
  await warmUp(off);
  let rampSeed = 1_000;
  let lastBounded = true;
  const ramp = await measureCapacity(async (rate) => {
    // Steps are short and follow lighter ones; only a step after an unbounded one waits for the host to recover.
    await settle(() => bench.read(off), lastBounded ? 0 : REST_MS);
    const result = await bench.load.mix({ ...mixRun(rate, RAMP_SECONDS, (rampSeed += 1)), base: off.cluster.base });
    lastBounded = isBounded(result);
    await settle(() => bench.read(off));
    return result;
  }, log);
  log(`capacity: ${Math.round(ramp.capacity)} requests/s of the mix`);
  await warmUp(on); // now rather than before the search, after which it would have sat idle for a minute
  // The search ran `off` at capacity and past it, which opened every database connection such a load needs; `on`
  // gets as much before its first measured run (its first run at a new rate would otherwise open them: in trials
  // its 0.5x line was 120-650 ms slower at p99 than off's in four runs, 106 against 83 ms in the first with this).
  await settle(() => bench.read(on));
  await bench.load.mix({ ...mixRun(ramp.capacity, RAMP_SECONDS, 998), base: on.cluster.base });

  const scenarios: MixScenario[] = [];
  for (const [index, multiple] of MULTIPLES.entries()) {
    // Both settings see the same arrivals; which goes first alternates, so neither always follows the heavier run.
    const pair = index % 2 === 0 ? [off, on] : [on, off];
    for (const instance of pair) {
      const label = `${multiple}× (${Math.round(multiple * ramp.capacity)}/s)`;
      const s = await runMixScenario(bench, instance, label, mixRun(multiple * ramp.capacity, seconds, index + 1));
      scenarios.push(s);
      const { all } = s.mix;
      log(
        `${label} ${instance.mode}: ${Math.round(all.goodputPerS)} 2xx/s, p99 ${all.p99Ms.toFixed(1)} ms, ` +
          `${all.shed} × 503, ${all.timeouts} timeouts, ${all.errors} errors`,
      );
    }
  }
  const floods: FloodScenario[] = [];
  for (const instance of [off, on]) {
    const f = await runFloodScenario(bench, instance, connections, floodSeconds);
    floods.push(f);
    log(`flood ${instance.mode}: ${f.flood.clientsAnswered} of ${connections} clients answered`);
  }
  log(`waiting for the last health probes (up to ${PROBE_TIMEOUT_MS / 1000} s)`);
  await bench.prober.drain();
  await monitor.destroy();
  const health = (s: { target: string; from: number; to: number }) =>
    healthOf(bench.prober.probes(s.target, s.from, s.to));

  const redis = new Redis(stores.redisUrl);
  const redisVersion = /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1] ?? 'unknown';
  redis.disconnect();
  const facts = machineFacts({
    uptimeBefore,
    loadBefore,
    minutes: (Date.now() - startedAt) / 60_000,
    versions: `PostgreSQL ${stores.postgresVersion} (fsync on), Redis ${redisVersion}`,
    fileLimit: limit,
  });
  const report = [
    '# Overload benchmark (`npm run bench:overload`)',
    '',
    ...facts,
    '',
    settingsLine({
      seconds,
      floodSeconds,
      connections,
      wantedConnections,
      logLevel,
      tasks: TASKS,
      timeoutMs: TIMEOUT_MS,
      sockets: SOCKETS,
    }),
    '',
    `## Capacity: ${Math.round(ramp.capacity).toLocaleString('en-US')} requests/s of the mix`,
    '',
    ramp.basis === 'p99'
      ? `The highest goodput of a step whose p99 stayed within ${P99_BOUND_MS} ms, all served in time.`
      : `No step kept its p99 within ${P99_BOUND_MS} ms on this host: the highest goodput of a step that served ` +
        'everything in time (the latency bound did not hold even at the lowest rate).',
    '',
    rampTable(ramp.steps),
    '',
    '## The mix at multiples of capacity, by class',
    '',
    classTable(scenarios),
    '',
    '## Health checks, abandoned work and CPU, by run',
    '',
    scenarioTable(scenarios, scenarios.map(health)),
    '',
    '## The learnt limit, second by second (`on`)',
    '',
    'Summed over both web workers, read from `/metrics` once a second through each run: `paceline_admission_limit`, ' +
      '`_in_progress` and `_queued`.',
    '',
    admissionTable(scenarios),
    '',
    `## ${connections.toLocaleString('en-US')} keep-alive connections`,
    '',
    floodTable(floods, floods.map(health)),
    '',
  ].join('\n');
  process.stdout.write(`\n${report}`);
  await mkdir('ops/bench/results', { recursive: true });
  await writeFile(RESULTS, report);
  log(`written to ${RESULTS}`);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`\n${signal}: stopping what the benchmark started`);
    void cleanUp().finally(() => process.exit(130));
  });
}
try {
  await main();
} catch (error) {
  log(`overload benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
} finally {
  await cleanUp();
}
