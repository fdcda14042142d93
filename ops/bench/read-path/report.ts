import type { Row } from './rows.js';
import type { WrkResult } from './wrk.js';

/** One row's run in one round, with the Redis commands processed meanwhile. */
export interface Slice {
  wrk: WrkResult;
  redisCommands: number;
}

export interface RowSummary {
  row: Row;
  reqPerS: number;
  ratio: number;
  /** req/s over the bare Koa app's. */
  koaRatio: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  socketErrors: number;
  /** Redis commands per request, or per refused request for the flood. */
  redisPerRequest: number;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** Medians over the rounds; the ratio is the row's median req/s over the bare server's (the first row). */
export function summarise(rows: Row[], slices: Map<Row, Slice[]>): RowSummary[] {
  const bare = median(slices.get(rows[0]!)!.map((s) => s.wrk.reqPerS));
  const koaRow = rows.find((row) => row.name.startsWith('bare Koa'));
  const bareKoa = koaRow ? median(slices.get(koaRow)!.map((s) => s.wrk.reqPerS)) : NaN;
  return rows.map((row) => {
    const runs = slices.get(row)!;
    const sum = (pick: (s: Slice) => number) => runs.reduce((total, s) => total + pick(s), 0);
    const reqPerS = median(runs.map((s) => s.wrk.reqPerS));
    const requests = sum((s) => s.wrk.requests);
    const non2xx = sum((s) => s.wrk.non2xx);
    const per = row.flood ? non2xx : requests;
    return {
      row,
      reqPerS,
      ratio: reqPerS / bare,
      koaRatio: reqPerS / bareKoa,
      p50Ms: median(runs.map((s) => s.wrk.p50Ms)),
      p99Ms: median(runs.map((s) => s.wrk.p99Ms)),
      requests,
      non2xx,
      socketErrors: sum((s) => s.wrk.socketErrors),
      redisPerRequest: per === 0 ? 0 : sum((s) => s.redisCommands) / per,
    };
  });
}

const ms = (value: number) => (value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0));
const int = (value: number) => Math.round(value).toLocaleString('en-US');

export function markdownTable(summaries: RowSummary[]): string {
  const lines = [
    '| row | request | req/s | ÷ bare | ÷ bare Koa | p50 ms | p99 ms | non-2xx (of requests) | Redis cmds / req |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const s of summaries) {
    const refused = `${int(s.non2xx)} (of ${int(s.requests)})${s.socketErrors > 0 ? `, ${int(s.socketErrors)} socket errors` : ''}`;
    const redis = `${s.redisPerRequest.toFixed(2)}${s.row.flood ? ' per refusal' : ''}`;
    lines.push(
      `| ${s.row.name} | \`${s.row.request}\` | ${int(s.reqPerS)} | ${s.ratio.toFixed(2)} | ${s.koaRatio.toFixed(2)} | ${ms(s.p50Ms)} | ${ms(s.p99Ms)} | ${refused} | ${redis} |`,
    );
  }
  return lines.join('\n');
}
