import { cpus } from 'node:os';
import { loadConfig } from '../../../src/settings/config.js';
import { stamp, uptime } from '../harness/report.js';
import { readBenchCount, readBenchText, refuse } from '../harness/settings.js';
import { P99_BOUND_MS } from './capacity.js';
import { CLASSES } from './mix.js';
import { FIRST_ANSWER_MS } from './flood.js';
import { PROBE_INTERVAL_MS, PROBE_TIMEOUT_MS } from './outcomes.js';
import { WARM_PAGE_ASKS } from './scenarios.js';

/** The door the build takes when CONNECTION_DOOR is not set (its config's default). */
export function shippedDoor(): string {
  return String((loadConfig({}) as { CONNECTION_DOOR?: string }).CONNECTION_DOOR ?? 'unknown');
}

/** Whether the build accepts CONNECTION_DOOR=`door`: its config refuses a value it does not know. */
export function knowsDoor(door: string): boolean {
  try {
    return (loadConfig({ CONNECTION_DOOR: door }) as { CONNECTION_DOOR?: string }).CONNECTION_DOOR === door;
  } catch {
    return false;
  }
}

/** The run's date, commit, versions, machine and load averages, one fact a line. */
export function machineFacts(run: {
  uptimeBefore: string;
  /** os.loadavg() when the run began. */
  loadBefore: number[];
  minutes: number;
  versions: string;
  fileLimit: number;
}) {
  const models = [...new Set(cpus().map((cpu) => cpu.model.trim()))].join(', ');
  // Before the run, the load average is the neighbours' alone; after it, it includes this run's own processes.
  const before = run.loadBefore[0] ?? 0;
  const noisy =
    before > cpus().length
      ? ` Other work kept the host busy (a 1-minute load average of ${before.toFixed(1)} on ${cpus().length} ` +
        'CPUs before the run began): the figures are noisy, and lines of one run move against each other.'
      : '';
  return [
    `${stamp()}; ` + `node ${process.version}, ${run.versions}; the run took ${run.minutes.toFixed(1)} min.`,
    '',
    `Machine: ${cpus().length} CPUs (${models}), shared by everything the benchmark starts (the load process, the ` +
      'prober, both service instances, PostgreSQL, Redis) and by whatever else ran on the host meanwhile; ' +
      `open-file limit ${run.fileLimit}.`,
    `\`uptime\` before: \`${run.uptimeBefore}\`; after: \`${uptime()}\`.${noisy}`,
  ];
}

export const DEFAULT_MULTIPLES = [0.5, 1, 2, 4];

/** The run's settings from the environment; one the benchmark cannot use stops it (exit 2). */
export function readSettings() {
  /** The `on` instance's CONNECTION_DOOR: the build's default unless BENCH_DOOR names another it accepts. */
  const door = readBenchText('BENCH_DOOR', shippedDoor());
  if (!knowsDoor(door)) refuse('BENCH_DOOR', door, 'a CONNECTION_DOOR this build accepts (docs/configuration.md)');
  const multiplesText = readBenchText('BENCH_MULTIPLES');
  const multiples = multiplesText === '' ? DEFAULT_MULTIPLES : multiplesText.split(',').map(Number);
  if (multiples.some((m) => !(m > 0 && m <= 16)))
    refuse('BENCH_MULTIPLES', multiplesText, 'multiples of capacity above 0 and at most 16, by commas (0.5,4)');
  const onlyText = readBenchText('BENCH_ONLY');
  if (onlyText !== '' && onlyText !== 'on') refuse('BENCH_ONLY', onlyText, 'on or unset');
  return {
    door,
    doorAsked: readBenchText('BENCH_DOOR') !== '',
    multiples,
    multiplesAsked: multiplesText !== '',
    /** Runs on the `on` instance alone (BENCH_ONLY=on): `off` only finds the capacity. */
    onlyOn: onlyText === 'on',
    seconds: readBenchCount('BENCH_SECONDS', 10),
    /** 0: no flood. */
    floodSeconds: readBenchCount('BENCH_FLOOD_SECONDS', 10, 0),
    wantedConnections: readBenchCount('BENCH_FLOOD_CONNECTIONS', 2_000),
    logLevel: readBenchText('BENCH_LOG_LEVEL', 'info'),
  };
}

type RunSettings = ReturnType<typeof readSettings> & {
  /** Flood connections opened: BENCH_FLOOD_CONNECTIONS, or fewer when the open-file limit is lower. */
  connections: number;
  tasks: number;
  timeoutMs: number;
  sockets: number;
};

/** The command that reproduces the run, what ran, and the run's parameters (the method is in docs/benchmarks.md). */
export function settingsLine(s: RunSettings): string {
  const env = [
    s.doorAsked && `BENCH_DOOR=${s.door}`,
    s.multiplesAsked && `BENCH_MULTIPLES=${s.multiples.join(',')}`,
    s.onlyOn && 'BENCH_ONLY=on',
    s.seconds !== 10 && `BENCH_SECONDS=${s.seconds}`,
    s.floodSeconds !== 10 && `BENCH_FLOOD_SECONDS=${s.floodSeconds}`,
    s.wantedConnections !== 2_000 && `BENCH_FLOOD_CONNECTIONS=${s.wantedConnections}`,
    s.logLevel !== 'info' && `BENCH_LOG_LEVEL=${s.logLevel}`,
  ].filter(Boolean);
  const mix = CLASSES.map((c) => `${c.name} ${Math.round(c.weight * 100)} %`).join(', ');
  const fewer =
    s.connections < s.wantedConnections
      ? ` (${s.wantedConnections.toLocaleString('en-US')} asked; the open-file limit allowed ${s.connections})`
      : '';
  return [
    `Command: \`${[...env, 'npm run bench:overload'].join(' ')}\`. The service: \`node dist/src/main.js\`, 2 web ` +
      `workers, on 127.0.0.1, twice (\`off\`: \`ADMISSION_CONTROL=off CONNECTION_DOOR=cluster\`, the service without ` +
      `either; \`on\`: \`ADMISSION_CONTROL=on CONNECTION_DOOR=${s.door}\`` +
      `${s.door === shippedDoor() ? ', both as shipped' : `, admission as shipped, the door set by BENCH_DOOR (the build’s own: \`${shippedDoor()}\`)`}; ` +
      `each with its own database of ` +
      `${s.tasks.toLocaleString('en-US')} seeded tasks), THROTTLE_ANON and THROTTLE_USER at 100000/s (no client is ` +
      `refused), LOG_LEVEL=${s.logLevel}, every other setting at its default.`,
    '',
    'How to read the tables, and how each figure is measured: docs/benchmarks.md "Overload (`npm run bench:overload`)". ' +
      `This run's parameters: the mix ${mix}; open-loop, Poisson arrivals from a seed, over at most ${s.sockets} ` +
      `keep-alive connections, abandoned ${s.timeoutMs / 1000} s after the planned start; a capacity step bounded ` +
      `at p99 ≤ ${P99_BOUND_MS} ms; a newcomer every ${PROBE_INTERVAL_MS} ms, unanswered after ` +
      `${PROBE_TIMEOUT_MS / 1000} s, page 1 asked ${WARM_PAGE_ASKS} times before each run; ` +
      (s.floodSeconds > 0
        ? `a flood of ${s.connections.toLocaleString('en-US')} clients${fewer} for ${s.floodSeconds} s, a first ` +
          `answer counted within ${FIRST_ANSWER_MS / 1000} s.`
        : 'no flood (`BENCH_FLOOD_SECONDS=0`).') +
      (s.onlyOn ? ' `BENCH_ONLY=on`: the runs are the `on` instance’s alone; `off` only finds the capacity.' : ''),
  ].join('\n');
}
