import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** One wrk run, as its `--latency` report gives it. */
export interface WrkResult {
  requests: number;
  seconds: number;
  reqPerS: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses with a status of 400 or more: wrk's "Non-2xx or 3xx responses". */
  non2xx: number;
  /** Connect, read, write errors and timeouts. */
  socketErrors: number;
}

export interface Load {
  url: string;
  headers?: Record<string, string>;
  /** A wrk Lua script (e.g. the method and body of a POST). */
  script?: string;
}

/** How wrk loads every row: two threads, 32 connections. */
export const THREADS = 2;
export const CONNECTIONS = 32;

/** Runs `wrk -t2 -c32 -d<seconds>s --latency` against `load` and parses its report. */
export async function runWrk(load: Load, seconds: number): Promise<WrkResult> {
  const args = [`-t${THREADS}`, `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '--timeout', '5s'];
  for (const [name, value] of Object.entries(load.headers ?? {})) args.push('-H', `${name}: ${value}`);
  if (load.script) args.push('-s', load.script);
  args.push(load.url);
  const { stdout } = await run('wrk', args, { maxBuffer: 1 << 20 });
  return parseWrk(stdout);
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1_000, m: 60_000 };

export function parseWrk(report: string): WrkResult {
  const number = (pattern: RegExp): number => {
    const match = pattern.exec(report);
    if (!match) throw new Error(`wrk report without ${pattern}:\n${report}`);
    return Number(match[1]);
  };
  const percentile = (p: number): number => {
    const match = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(report);
    if (!match) throw new Error(`wrk report without the ${p}% latency:\n${report}`);
    return Number(match[1]) * UNIT_MS[match[2]!]!;
  };
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(report);
  const during = /requests in ([\d.]+)(us|ms|s|m),/.exec(report);
  return {
    requests: number(/(\d+) requests in /),
    seconds: during ? (Number(during[1]) * UNIT_MS[during[2]!]!) / 1000 : NaN,
    reqPerS: number(/Requests\/sec:\s+([\d.]+)/),
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    non2xx: /Non-2xx or 3xx responses: (\d+)/.test(report) ? number(/Non-2xx or 3xx responses: (\d+)/) : 0,
    socketErrors: errors ? errors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
  };
}
