/**
 * `npm run bench:overload`: what the compiled service does with more load than it can serve, with admission control
 * off and on (docs/benchmarks.md "Overload (`npm run bench:overload`)"). BENCH_DOOR (the build's CONNECTION_DOOR),
 * BENCH_MULTIPLES (0.5,1,2,4), BENCH_ONLY (on), BENCH_SECONDS (10), BENCH_FLOOD_SECONDS (10; 0: no flood),
 * BENCH_FLOOD_CONNECTIONS (2,000), BENCH_LOG_LEVEL (info), BENCH_RESULTS (ops/bench/results/overload.md).
 *
 *   npm run bench:overload                                          # `on` as shipped; 4-5 min quiet, 11 loaded
 *   BENCH_DOOR=cluster npm run bench:overload                       # `on` with another CONNECTION_DOOR
 *   BENCH_SECONDS=6 BENCH_FLOOD_SECONDS=5 npm run bench:overload    # a quicker, rougher run
 *   BENCH_MULTIPLES=0.5,4 BENCH_ONLY=on BENCH_FLOOD_SECONDS=0 npm run bench:overload   # 0.5× and 4× on `on` alone
 */
import { loadavg } from 'node:os';
import { connectDatabase } from '../../db/connect.js';
import { FIRST_RATE, isBounded, measureCapacity, P99_BOUND_MS } from './overload/capacity.js';
import { DEFAULT_MULTIPLES, machineFacts, readSettings, settingsLine } from './overload/preamble.js';
import { PROBE_TIMEOUT_MS } from './overload/outcomes.js';
import { startLoadProcess } from './overload/processes.js';
import {
  admissionTable,
  classTable,
  floodTable,
  newcomerTable,
  overloadGoalTable,
  rampTable,
  scenarioTable,
} from './overload/report.js';
import {
  newcomerOf,
  REST_MS,
  runFloodScenario,
  runMixScenario,
  type Bench,
  type FloodScenario,
  type MixScenario,
  type Newcomer,
} from './overload/scenarios.js';
import { counterReader, settle, startInstance, startSeededStores, type Instance } from './overload/service.js';
import { ms, uptime, writeResults } from './harness/report.js';
import { defer, log, runBench } from './harness/run.js';
import { startPacedClient } from './harness/paced.js';
import { fileLimit, redisVersion } from './harness/service.js';
import { readBenchText } from './harness/settings.js';

const RESULTS = readBenchText('BENCH_RESULTS', 'ops/bench/results/overload.md');
const TASKS = 5_000;
/** The quiet run and the overloaded one whose served latencies and goodput the report sets side by side. */
const QUIET = 0.5;
const LOADED = 4;
const TIMEOUT_MS = 2_000;
/** The load process's keep-alive connections: enough that an overload reaches the service, not only its queue. */
const SOCKETS = 1_000;
const RAMP_SECONDS = 3;
const WARM_UP_SECONDS = 5;

const settings = readSettings();
const { door, multiples, onlyOn, seconds, floodSeconds, wantedConnections, logLevel } = settings;

async function main(): Promise<void> {
  const startedAt = Date.now();
  const uptimeBefore = uptime();
  const loadBefore = loadavg();
  const limit = fileLimit();
  // The load process holds every flood connection, and a few hundred more for its keep-alive pool and the rest.
  const connections = Math.min(wantedConnections, Number.isFinite(limit) ? limit - 512 : wantedConnections);
  const perLoad = onlyOn ? 1 : 2;
  log(
    `overload benchmark (on: CONNECTION_DOOR=${door}): capacity search, ${multiples.length * perLoad} runs of ` +
      `${seconds} s, ${floodSeconds > 0 ? `${perLoad} flood(s) of ${floodSeconds} s` : 'no flood'}`,
  );
  const { stores, seeded } = await startSeededStores(TASKS);
  const start = (mode: Instance['mode']) => startInstance(stores, mode, logLevel, door);
  const [off, on] = await Promise.all([start('off'), start('on')]);
  const monitor = connectDatabase(stores.databaseUrl, 1, 'overload-bench-monitor');
  defer(() => monitor.destroy());
  const bench: Bench = {
    load: await startLoadProcess(),
    prober: await startPacedClient(),
    read: counterReader(monitor),
  };
  const mixRun = (instance: Instance, ratePerS: number, runSeconds: number, seed: number) => ({
    base: instance.cluster.base,
    token: seeded.writer.token,
    tasks: TASKS,
    ratePerS,
    seconds: runSeconds,
    seed,
    timeoutMs: TIMEOUT_MS,
    sockets: SOCKETS,
  });

  // A cold instance (code not yet optimised, pool connections not yet open) is slow for its first seconds.
  const warmUp = (instance: Instance) => bench.load.mix(mixRun(instance, 2 * FIRST_RATE, WARM_UP_SECONDS, 999));
  await warmUp(off);
  let rampSeed = 1_000;
  let lastBounded = true;
  const ramp = await measureCapacity(async (rate) => {
    // Steps are short and follow lighter ones; only a step after an unbounded one waits for the host to recover.
    await settle(() => bench.read(off), lastBounded ? 0 : REST_MS);
    const result = await bench.load.mix(mixRun(off, rate, RAMP_SECONDS, (rampSeed += 1)));
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
  await bench.load.mix(mixRun(on, ramp.capacity, RAMP_SECONDS, 998));

  const scenarios: MixScenario[] = [];
  for (const [index, multiple] of multiples.entries()) {
    // Both settings see the same arrivals; which goes first alternates, so neither always follows the heavier run.
    const pair = onlyOn ? [on] : index % 2 === 0 ? [off, on] : [on, off];
    for (const instance of pair) {
      const label = `${multiple}× (${Math.round(multiple * ramp.capacity)}/s)`;
      // The seed is the multiple's place in the default list, so a partial run gets a full run's arrivals.
      const seed = DEFAULT_MULTIPLES.includes(multiple) ? DEFAULT_MULTIPLES.indexOf(multiple) + 1 : 100 + index;
      const run = mixRun(instance, multiple * ramp.capacity, seconds, seed);
      const s = await runMixScenario(bench, instance, label, multiple, run);
      scenarios.push(s);
      const { all } = s.mix;
      log(
        `${label} ${instance.mode}: ${Math.round(all.goodputPerS)} 2xx/s, p99 ${ms(all.p99Ms)} ms, ` +
          `${all.shed} × 503, ${all.timeouts} timeouts, ${all.errors} errors`,
      );
    }
  }
  const floods: FloodScenario[] = [];
  for (const instance of floodSeconds === 0 ? [] : onlyOn ? [on] : [off, on]) {
    const f = await runFloodScenario(bench, instance, connections, floodSeconds);
    floods.push(f);
    log(
      `flood ${instance.mode}: ${f.flood.firstAnswered} of ${connections} clients with a first answer within 10 s ` +
        `(${f.flood.clientsAnswered} answered at all)`,
    );
  }
  log(`waiting for the last probes (up to ${PROBE_TIMEOUT_MS / 1000} s)`);
  await bench.prober.drain();
  const newcomers: Array<{ label: string; mode: string; newcomer: Newcomer; flood?: FloodScenario }> = [
    ...scenarios.map((s) => ({ label: s.label, mode: s.mode, newcomer: newcomerOf(bench.prober, s) })),
    ...floods.map((f) => ({
      label: `flood (${connections.toLocaleString('en-US')})`,
      mode: f.mode,
      newcomer: newcomerOf(bench.prober, f),
      flood: f,
    })),
  ];
  for (const { label, mode, newcomer, flood } of newcomers)
    log(
      `newcomer, ${label} ${mode}: /healthz p99 ${ms(newcomer.healthz.p99Ms)} ms, ` +
        `${newcomer.healthz.unanswered} unanswered; page 1 p99 ${ms(newcomer.page.p99Ms)} ms, ` +
        `${newcomer.page.unanswered} unanswered` +
        (flood ? `; ${flood.flood.firstAnswered} first answers within 10 s` : ''),
    );
  const goals = overloadGoalTable(scenarios, QUIET, LOADED, ramp.capacity);

  const facts = machineFacts({
    uptimeBefore,
    loadBefore,
    minutes: (Date.now() - startedAt) / 60_000,
    versions: `PostgreSQL ${stores.postgresVersion} (fsync on), Redis ${await redisVersion(stores.admin)}`,
    fileLimit: limit,
  });
  const report = [
    `# Overload benchmark (\`npm run bench:overload\`): \`on\` with \`CONNECTION_DOOR=${door}\``,
    '',
    ...facts,
    '',
    settingsLine({ ...settings, connections, tasks: TASKS, timeoutMs: TIMEOUT_MS, sockets: SOCKETS }),
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
    ...(goals === ''
      ? []
      : [`## At ${LOADED}×: each class's served p99 against ${QUIET}×, goodput against capacity`, '', goals, '']),
    '## A newcomer: `/healthz` and the cached page 1, each on a new connection',
    '',
    newcomerTable(newcomers),
    '',
    '## Abandoned work and CPU, by run',
    '',
    scenarioTable(scenarios),
    '',
    '## The learnt limit, second by second (`on`)',
    '',
    'Summed over both web workers, read from `/metrics` once a second through each run: `paceline_admission_limit`, ' +
      '`_in_progress` and `_queued`.',
    '',
    admissionTable(scenarios),
    '',
    ...(floods.length === 0
      ? []
      : [`## ${connections.toLocaleString('en-US')} keep-alive connections`, '', floodTable(floods), '']),
  ].join('\n');
  await writeResults(RESULTS, report);
}

await runBench('overload', main);
