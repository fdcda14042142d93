import { int, markdownTable, ms } from '../harness/report.js';
import type { RampStep } from './capacity.js';
import { CLASSES } from './mix.js';
import type { Summary } from './outcomes.js';
import { FIRST_ANSWER_MS } from './flood.js';
import type { FloodScenario, Health, MixScenario, Newcomer } from './scenarios.js';

const pct = (value: number) => `${Math.round(value)} %`;

/** A Markdown table whose first `left` columns are aligned left, the rest right. */
const table = (header: string[], left: number, rows: string[][]) =>
  markdownTable(
    header.map((name, i) => (i < left ? name : `${name}>`)),
    rows,
  );

function others(summary: Summary): string {
  const list = Object.entries(summary.other).map(([status, n]) => `${status} × ${n}`);
  return list.length ? list.join(', ') : '0';
}

/** The probes' latencies, and how many went unanswered (and answered other than 200, if any). */
function healthCells(health: Health): string[] {
  const failed = health.not200 ? ` (${health.not200} not 200)` : '';
  return [
    `${ms(health.p50Ms)} / ${ms(health.p99Ms)} / ${ms(health.maxMs)}`,
    `${health.unanswered} of ${health.sent}${failed}`,
  ];
}

/** The capacity search, one line a step. */
export function rampTable(steps: readonly RampStep[]): string {
  return table(
    ['offered /s', '2xx /s', 'p50 ms', 'p99 ms', 'timeouts (never sent)', 'served', 'bounded'],
    0,
    steps.map(({ ratePerS, result: { all }, served, bounded }) => [
      int(ratePerS),
      int(all.goodputPerS),
      ms(all.p50Ms),
      ms(all.p99Ms),
      `${int(all.timeouts)} (${int(all.unsent)})`,
      served ? 'yes' : 'no',
      bounded ? 'yes' : 'no',
    ]),
  );
}

/** Each run's classes: offered, goodput, latency of the served, shed, timeouts, failures. */
export function classTable(scenarios: readonly MixScenario[]): string {
  const header = ['load', 'admission', 'class', 'offered /s', 'goodput 2xx /s', 'p50 ms', 'p99 ms'];
  header.push('shed 503 /s', 'timeouts (2 s; of them never sent)', 'errors', 'other answers');
  return table(
    header,
    3,
    scenarios.flatMap((s) => {
      const seconds = (s.to - s.from) / 1000;
      const classes = s.mix.classes.map((summary, i) => [CLASSES[i]!.name, summary] as const);
      return [...classes, ['**all**', s.mix.all] as const].map(([name, c]) => [
        s.label,
        s.mode,
        name,
        int(c.offeredPerS),
        int(c.goodputPerS),
        ms(c.p50Ms),
        ms(c.p99Ms),
        int(c.shed / seconds),
        `${int(c.timeouts)} (${int(c.unsent)})`,
        int(c.errors),
        others(c),
      ]);
    }),
  );
}

/** Each run's work the service did for clients that had left, and the CPU split. */
export function scenarioTable(scenarios: readonly MixScenario[]): string {
  const header = ['load', 'admission', 'finished by the service', 'of them, no client waiting', 'PG statements'];
  header.push('of them for those (≈)', 'load process late p99 ms', 'load process CPU', 'service CPU');
  return table(
    header,
    2,
    scenarios.map((s) => {
      const abandoned = Math.max(0, s.delta.completions - s.mix.all.answered);
      const share = s.delta.completions > 0 ? abandoned / s.delta.completions : 0;
      return [
        s.label,
        s.mode,
        int(s.delta.completions),
        int(abandoned),
        int(s.delta.pgStatements),
        int(share * s.delta.pgStatements),
        ms(s.mix.lateP99Ms),
        pct(s.loadCpuPct),
        pct(s.serviceCpuPct),
      ];
    }),
  );
}

/** Flood clients with a first answer in time, of all. */
const firstAnswers = (f: FloodScenario) => `${int(f.flood.firstAnswered)} of ${int(f.flood.connections)}`;

/**
 * A newcomer's requests, each on a new connection, in every run: `/healthz` and the cached page 1 (latency of the
 * answers, and how many had no whole answer within 10 s); for a flood, also how many of its clients had a first
 * answer within 10 s.
 */
export function newcomerTable(
  rows: ReadonlyArray<{ label: string; mode: string; newcomer: Newcomer; flood?: FloodScenario }>,
): string {
  const header = ['load', 'admission', '`/healthz` p50 / p99 / max ms', '`/healthz` unanswered (of sent)'];
  header.push('page 1 p50 / p99 / max ms', 'page 1 unanswered (of sent)');
  header.push(`flood clients with a first answer within ${FIRST_ANSWER_MS / 1000} s`);
  return table(
    header,
    2,
    rows.map(({ label, mode, newcomer, flood }) => [
      label,
      mode,
      ...healthCells(newcomer.healthz),
      ...healthCells(newcomer.page),
      flood ? firstAnswers(flood) : '—',
    ]),
  );
}

/** The flood runs, one line an admission setting. */
export function floodTable(floods: readonly FloodScenario[]): string {
  const header = ['admission', 'connections (most open at once)', `first answer within ${FIRST_ANSWER_MS / 1000} s`];
  header.push('first answer p50 / p99 / max ms', 'page 1 2xx /s', 'p50 / p99 ms', 'timeouts (10 s)', 'errors');
  header.push('load process CPU', 'service CPU');
  return table(
    header,
    1,
    floods.map((f) => [
      f.mode,
      `${int(f.flood.connections)} (${int(f.flood.mostOpen)})`,
      firstAnswers(f),
      `${ms(f.flood.firstP50Ms)} / ${ms(f.flood.firstP99Ms)} / ${ms(f.flood.firstMaxMs)}`,
      int(f.flood.page1.goodputPerS),
      `${ms(f.flood.page1.p50Ms)} / ${ms(f.flood.page1.p99Ms)}`,
      int(f.flood.page1.timeouts),
      int(f.flood.page1.errors),
      pct(f.loadCpuPct),
      pct(f.serviceCpuPct),
    ]),
  );
}

/**
 * Served latency under overload against a quiet run, per class, and goodput against capacity: for each instance
 * that ran at both `quiet` and `loaded` times capacity, each class's 2xx p99 in both and their ratio, and the
 * loaded run's goodput as a share of `capacity`. Empty when no instance ran both.
 */
export function overloadGoalTable(
  scenarios: readonly MixScenario[],
  quiet: number,
  loaded: number,
  capacity: number,
): string {
  const rows: string[][] = [];
  for (const mode of new Set(scenarios.map((s) => s.mode))) {
    const find = (multiple: number) => scenarios.find((s) => s.mode === mode && s.multiple === multiple);
    const [q, l] = [find(quiet), find(loaded)];
    if (q === undefined || l === undefined) continue;
    const line = (name: string, atQuiet: Summary, atLoad: Summary, share: string) => {
      const ratio = atLoad.p99Ms / atQuiet.p99Ms;
      const verdict = Number.isFinite(ratio) ? `${ratio.toFixed(2)}× (${ratio <= 2 ? 'within' : 'over'} 2×)` : '—';
      rows.push([mode, name, ms(atQuiet.p99Ms), ms(atLoad.p99Ms), verdict, int(atLoad.goodputPerS), share]);
    };
    l.mix.classes.forEach((c, i) => line(CLASSES[i]!.name, q.mix.classes[i]!, c, ''));
    line('**all**', q.mix.all, l.mix.all, pct((100 * l.mix.all.goodputPerS) / capacity));
  }
  if (rows.length === 0) return '';
  const header = ['admission', 'class', `2xx p99 ms at ${quiet}×`, `at ${loaded}×`, `${loaded}× / ${quiet}×`];
  header.push(`goodput 2xx /s at ${loaded}×`, 'of capacity');
  return table(header, 2, rows);
}

/**
 * The limit each `on` run's workers learnt (their sum), with the requests in progress and queued, once a second:
 * the limit settling under each load.
 */
export function admissionTable(scenarios: readonly MixScenario[]): string {
  const series = (values: readonly number[]) => values.map((value) => int(value)).join(', ');
  return table(
    ['load', 'limit, each second', 'in progress', 'queued'],
    1,
    scenarios
      .filter((scenario) => scenario.mode === 'on')
      .map(({ label, admission }) => [
        label,
        series(admission.map((sample) => sample.limit)),
        series(admission.map((sample) => sample.inProgress)),
        series(admission.map((sample) => sample.queued)),
      ]),
  );
}
