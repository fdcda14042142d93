import { cpus } from 'node:os';
import { loadConfig } from '../../../src/settings/config.js';
import { stamp, uptime } from '../harness/report.js';
import { readBenchCount, readBenchText, refuse } from '../harness/settings.js';
import { P99_BOUND_MS } from './capacity.js';
import { CLASSES } from './mix.js';
import { FIRST_ANSWER_MS } from './flood.js';
import { PROBE_INTERVAL_MS, PROBE_TIMEOUT_MS } from './outcomes.js';
import { WARM_PAGE_ASKS } from './scenarios.js';

/** Whether this build reads ADMISSION_CONTROL: a setting it does not know is dropped by loadConfig. */
function readsAdmissionControl(): boolean {
  try {
    return Object.hasOwn(loadConfig({ ADMISSION_CONTROL: 'on' }), 'ADMISSION_CONTROL');
  } catch {
    return true; // it knows the setting (and refused the value)
  }
}

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
    '',
    readsAdmissionControl()
      ? 'This build reads `ADMISSION_CONTROL`: the `off` and `on` lines run different code.'
      : 'This build does not read `ADMISSION_CONTROL` (loadConfig drops it): the `off` and `on` lines run the same ' +
        'code, and what differs between them is the host’s noise.',
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

/** The command that reproduces the run, how to read the tables, and how they were measured. */
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
    '**How to read.** Compare each line’s goodput with the capacity: a service that copes with overload keeps ' +
      'serving about its capacity at 2× and 4× and answers what it cannot serve at once with 503 (shed) ' +
      'rather than letting it wait into a timeout; one that does not shows goodput falling, p99 near the client’s ' +
      'timeout and timeouts growing. A newcomer’s `/healthz` and cached page 1 should stay fast and answered on ' +
      'every line and through the flood, and every flood client should get a first answer. ' +
      '"No client waiting" is work the service finished for clients that had already given up, and its PG ' +
      'statements what that cost the database. Absolute figures depend on the host (its neighbours, and the load ' +
      'process on the same cores: see its CPU and "late p99"); compare lines of one run, `off` against `on` first.',
    '',
    '**Method.**',
    '',
    `- The mix, by share of arrivals: ${mix}. Page 1 is \`GET /api/tasks/\` (anonymous; the read cache answers ` +
      'it until a create publishes a new head), a random page `GET /api/tasks/?limit=20&offset=<random>` ' +
      '(anonymous), a create `POST /api/tasks/` with a user’s token.',
    '- Open-loop: arrivals planned in advance (Poisson, seeded: both settings get the same arrivals at each load), ' +
      `each sent at its time whether or not earlier ones were answered, over at most ${s.sockets} keep-alive ` +
      'connections from one load process (more wait for one, in order; one still waiting at its deadline is never ' +
      `sent). No answer ${s.timeoutMs / 1000} s after its planned start: abandoned (its connection closed if it ` +
      'was sent), a timeout. Latencies (p50 / p99 of the 2xx answers) count from the planned start, ' +
      'so a wait for a free connection counts too; "late p99" is how far behind its schedule the load process sent.',
    `- Capacity: the highest goodput of a ramp step whose whole-mix p99 stayed ≤ ${P99_BOUND_MS} ms with ` +
      '≥ 97 % served and no timeout or 503. Goodput: 2xx answers per second received in time; shed: 503 ' +
      'answers per second.',
    '- "Finished by the service": requests on `/api/tasks/` the service completed (`paceline_http_requests_total`); ' +
      '"no client waiting": those less the answers received in time. PG statements: pg_stat_statements calls of ' +
      'the instance’s database (BEGIN and COMMIT included); those for abandoned requests are pro rata, an estimate.',
    `- A newcomer, from a process of its own, every ${PROBE_INTERVAL_MS} ms: \`GET /healthz\` on a new TCP ` +
      `connection, and half a beat later page 1 (\`GET /api/tasks/\`, anonymous) on another; each timed from its ` +
      `send to its answer's last byte, unanswered after ${PROBE_TIMEOUT_MS / 1000} s. Before each run page 1 is ` +
      `asked ${WARM_PAGE_ASKS} times on new connections, so that both workers keep it in their read caches (in the ` +
      'mix, creates publish new heads and it is rebuilt). About ' +
      `${Math.round((s.seconds * 1000) / PROBE_INTERVAL_MS)} probes of each a run, so a run’s p99 is its worst probe.`,
    s.floodSeconds > 0
      ? `- The flood: ${s.connections.toLocaleString('en-US')} clients${fewer}, all started at once, each asking ` +
        `page 1 on its own keep-alive connection for ${s.floodSeconds} s, closed-loop per connection (it is about ` +
        'how many connections, not how fast); "first answer": how many clients had an answer (any status) within ' +
        `${FIRST_ANSWER_MS / 1000} s of their start${s.floodSeconds * 1000 < FIRST_ANSWER_MS ? ` (this flood lasted ${s.floodSeconds} s)` : ''}.`
      : '- No flood in this run (`BENCH_FLOOD_SECONDS=0`).',
    ...(s.onlyOn ? ['- `BENCH_ONLY=on`: the runs are the `on` instance’s alone; `off` only finds the capacity.'] : []),
  ].join('\n');
}
