import type { WrkResult } from '../read-path/wrk.js';
import type { Pair, Run } from './measure.js';
import type { Row } from './rows.js';

/** What the table says of one runtime in one row: medians over the rounds. */
export interface Side {
  reqPerS: number;
  p99Ms: number;
  cpuUsPerRequest: number;
}

export interface RowSummary {
  row: Row;
  old: Side;
  new: Side;
  /** The median of the rounds' new ÷ old req/s, and their lowest and highest. */
  ratio: number;
  lowest: number;
  highest: number;
  /** Error statuses and socket errors over every run of the row on both runtimes. */
  non2xx: number;
  socketErrors: number;
  requests: number;
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

function side(runs: Run[]): Side {
  return {
    reqPerS: median(runs.map((run) => run.wrk.reqPerS)),
    p99Ms: median(runs.map((run) => run.wrk.p99Ms)),
    cpuUsPerRequest: median(runs.map((run) => run.cpuUsPerRequest)),
  };
}

/** Medians over the rounds; each round's ratio is taken between two runs measured back to back. */
export function summarise(row: Row, pairs: Pair[]): RowSummary {
  const ratios = pairs.map((pair) => pair.new.wrk.reqPerS / pair.old.wrk.reqPerS);
  const runs = pairs.flatMap((pair) => [pair.old.wrk, pair.new.wrk]);
  const sum = (pick: (run: WrkResult) => number) => runs.reduce((total, run) => total + pick(run), 0);
  return {
    row,
    old: side(pairs.map((pair) => pair.old)),
    new: side(pairs.map((pair) => pair.new)),
    ratio: median(ratios),
    lowest: Math.min(...ratios),
    highest: Math.max(...ratios),
    non2xx: sum((run) => run.non2xx),
    socketErrors: sum((run) => run.socketErrors),
    requests: sum((run) => run.requests),
  };
}

const ms = (value: number) => (value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0));
const int = (value: number) => Math.round(value).toLocaleString('en-US');

/** The table: each runtime's req/s, new ÷ old with the rounds' spread, then p99 and CPU per request. */
export function markdownTable(summaries: RowSummary[], oldLine: string, newLine: string): string {
  const pair = (what: string) => `${what}, ${oldLine} | ${what}, ${newLine}`;
  const lines = [
    `| row | request | ${pair('req/s')} | ${newLine} ÷ ${oldLine} | rounds' spread | ${pair('p99 ms')} | ` +
      `${pair('CPU µs/req')} |`,
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const s of summaries) {
    lines.push(
      `| ${s.row.name} | \`${s.row.request}\` | ${int(s.old.reqPerS)} | ${int(s.new.reqPerS)} | ${s.ratio.toFixed(2)} | ` +
        `${s.lowest.toFixed(2)}–${s.highest.toFixed(2)} | ${ms(s.old.p99Ms)} | ${ms(s.new.p99Ms)} | ` +
        `${int(s.old.cpuUsPerRequest)} | ${int(s.new.cpuUsPerRequest)} |`,
    );
  }
  return lines.join('\n');
}

/** One line on the error statuses (400 or more, as wrk counts them) and socket errors, or on their absence. */
export function describeFailures(summaries: RowSummary[]): string {
  const failed = summaries.filter((s) => s.non2xx + s.socketErrors > 0);
  const requests = int(summaries.reduce((total, s) => total + s.requests, 0));
  if (failed.length === 0) return `None of the ${requests} measured requests had an error status or a socket error.`;
  return (
    `Error statuses and socket errors, of ${requests} measured requests: ` +
    failed.map((s) => `${s.row.name}: ${int(s.non2xx)} non-2xx, ${int(s.socketErrors)} socket errors`).join('; ') +
    '.'
  );
}
