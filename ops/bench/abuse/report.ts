import type { GoodMode, Latencies } from './good-client.js';
import { int, markdownTable, ms } from '../harness/report.js';

/** One row of the results table and the facts printed under it. */
export interface RowResult {
  name: string;
  /** What the abuser sent, as the table shows it. */
  request: string;
  requests: number;
  reqPerS: number;
  statuses: string;
  /** The row's req/s over the bare node:http server's (the flood rows only). */
  vsBare?: number;
  /** The good client's answers in the quiet window before the row and during it. */
  good?: { mode: GoodMode; quiet: Latencies; during: Latencies };
  /** Per abusive request (per refusal for the 429 flood), less the quiet window's background. */
  pg?: number;
  redis?: number;
  cpuUs?: number;
  /** The guarded service's primary: file descriptors before the row and the most seen during it. */
  fds: { before: number; max: number };
  goal: string;
  met?: boolean;
  facts: string[];
}

const per = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? '—' : value < 10 ? value.toFixed(2) : value.toFixed(0);

/** `{ 429: 2999, 200: 1 }` → `429 × 2,999, 200 × 1` (0: no answer). */
export function statusList(statuses: Record<number, number>): string {
  return Object.entries(statuses)
    .sort(([, a], [, b]) => b - a)
    .map(([status, n]) => `${status === '0' ? 'no answer' : status} × ${n.toLocaleString('en-US')}`)
    .join(', ');
}

function goodCell(row: RowResult): string {
  if (!row.good) return '—';
  const { quiet, during } = row.good;
  const failures = Object.values(during.failures).reduce((n, v) => n + v, 0);
  const ratio = during.p99Ms / quiet.p99Ms;
  return (
    `${row.good.mode === 'login' ? 'login ' : ''}${ms(quiet.p50Ms)} / ${ms(quiet.p99Ms)} → ${ms(during.p50Ms)} / ${ms(during.p99Ms)} ` +
    `(p99 ${Number.isFinite(ratio) ? ratio.toFixed(1) : '—'}×, n ${during.n}${failures > 0 ? `, ${failures} failed` : ''})`
  );
}

/** The results table: one line a row. */
export function resultsTable(rows: RowResult[]): string {
  const columns = [
    'row',
    'abuser sends',
    'abuser req/s>',
    '÷ bare>',
    'answers',
    'good client p50 / p99 ms, quiet → during',
  ];
  columns.push('PG statements / req>', 'Redis cmds / req>', 'service CPU µs / req>', 'primary FDs (before → most)>');
  const met = (row: RowResult) => (row.met === undefined ? '' : row.met ? '**met**' : '**not met**');
  return markdownTable(
    [...columns, 'goal', 'met'],
    rows.map((row) => [
      row.name,
      `\`${row.request}\``,
      int(row.reqPerS),
      row.vsBare === undefined ? '' : row.vsBare.toFixed(2),
      row.statuses,
      goodCell(row),
      per(row.pg),
      per(row.redis),
      int(row.cpuUs ?? NaN),
      `${row.fds.before} → ${row.fds.max}`,
      row.goal,
      met(row),
    ]),
  );
}

/** The facts under the table, one bullet a row that has any. */
export function factList(rows: RowResult[]): string {
  return rows
    .filter((row) => row.facts.length > 0)
    .map((row) => `- **${row.name}**: ${row.facts.join(' ')}`)
    .join('\n');
}
