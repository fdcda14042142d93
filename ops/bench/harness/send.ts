import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import autocannon from 'autocannon';

const run = promisify(execFile);

/** One closed-loop run (wrk or autocannon), as the tables use it. */
export interface Slice {
  requests: number;
  /** 2xx answers. */
  ok: number;
  seconds: number;
  reqPerS: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers with a status of 400 or more (wrk's "Non-2xx or 3xx responses", autocannon's non2xx). */
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

/** A closed loop by wrk: `wrk -t2 -c32 -d<seconds>s --latency` against `load`, its report parsed. */
export async function runWrk(load: Load, seconds: number): Promise<Slice> {
  const args = [`-t${THREADS}`, `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '--timeout', '5s'];
  for (const [name, value] of Object.entries(load.headers ?? {})) args.push('-H', `${name}: ${value}`);
  if (load.script) args.push('-s', load.script);
  args.push(load.url);
  const { stdout } = await run('wrk', args, { maxBuffer: 1 << 20 });
  return parseWrk(stdout);
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1_000, m: 60_000 };

function parseWrk(report: string): Slice {
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
  const requests = number(/(\d+) requests in /);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(report)?.[1] ?? 0);
  return {
    requests,
    ok: requests - non2xx,
    seconds: during ? (Number(during[1]) * UNIT_MS[during[2]!]!) / 1000 : NaN,
    reqPerS: number(/Requests\/sec:\s+([\d.]+)/),
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    non2xx,
    socketErrors: errors ? errors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
  };
}

/** A closed loop by autocannon for `seconds`; its result too, for what only it counts (statuses). */
export async function runAutocannon(
  options: autocannon.Options,
  seconds: number,
): Promise<Slice & { result: autocannon.Result }> {
  const result = await autocannon({ ...options, duration: seconds });
  const requests = result['2xx'] + result.non2xx;
  return {
    requests,
    ok: result['2xx'],
    seconds: result.duration,
    reqPerS: requests / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    socketErrors: result.errors + result.timeouts,
    result,
  };
}

/**
 * Runs `measure` on every item in each of `rounds` rounds, the order rotated each round (`rotate`) or reversed
 * every other (`alternate`), so that a change in the host's load falls on every item alike; resolves with each
 * item's results in round order.
 */
export async function interleave<T, R>(
  items: T[],
  rounds: number,
  measure: (item: T, round: number) => Promise<R>,
  order: 'rotate' | 'alternate' = 'rotate',
): Promise<Map<T, R[]>> {
  const results = new Map<T, R[]>(items.map((item) => [item, []]));
  for (let round = 0; round < rounds; round += 1) {
    const turn = round % items.length;
    const ordered =
      order === 'rotate'
        ? [...items.slice(turn), ...items.slice(0, turn)]
        : round % 2 === 0
          ? items
          : [...items].reverse();
    for (const item of ordered) results.get(item)!.push(await measure(item, round));
  }
  return results;
}
