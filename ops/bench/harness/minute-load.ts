import { setTimeout as sleep } from 'node:timers/promises';
import { latencies, sumOf } from './stats.js';

/** How a request ended, in the order a minute's counts and the totals list them. */
export const OUTCOMES = ['ok', 'throttled', 'client', 'server', 'unanswered'] as const;
export type Counts = Record<(typeof OUTCOMES)[number], number>;

function outcomeOf(status: number): (typeof OUTCOMES)[number] {
  if (status === 0) return 'unanswered';
  if (status === 429) return 'throttled';
  return status >= 500 ? 'server' : status >= 400 ? 'client' : 'ok';
}

/** The per-minute table's headings and widths; two spaces between columns. */
const HEADINGS = ['minute', 'requests', 'p50 ms', 'p99 ms', '2xx', '429', '4xx', '5xx', 'none'];
const WIDTHS = [6, 8, 6, 6, 6, 5, 3, 3, 4];
const tableLine = (cells: (string | number)[]) => cells.map((c, i) => String(c).padStart(WIDTHS[i]!)).join('  ');

/**
 * Requests by fetch to `base`, each counted in the minute (since `started`) it was sent in, with its latency and
 * how it ended (no answer within `deadlineMs` or a failure: status 0); the 4xx other than 429 also by status,
 * method and path (numbers as N), as a steady load should have none.
 */
export class MinuteLoad {
  readonly #minutes: ({ latencies: number[] } & Counts)[] = [];
  readonly clientErrors = new Map<string, number>();

  constructor(
    readonly base: string,
    readonly started: number,
    readonly deadlineMs: number,
  ) {}

  /** Sends one request (`body` as JSON); resolves with its status and its JSON answer, if any. */
  async send(auth: Record<string, string>, method: string, path: string, body?: unknown, headers = {}) {
    const sentAt = Date.now();
    let status = 0;
    let json: { id?: number } | null = null;
    try {
      const response = await fetch(new URL(path, this.base), {
        method,
        headers: { ...auth, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.deadlineMs),
      });
      const text = await response.text();
      status = response.status;
      if (text && (response.headers.get('content-type') ?? '').includes('json'))
        json = JSON.parse(text) as { id?: number };
    } catch {
      status = 0;
    }
    const minute = (this.#minutes[Math.floor((sentAt - this.started) / 60_000)] ??= {
      latencies: [],
      ...(Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Counts),
    });
    minute.latencies.push(Date.now() - sentAt);
    const outcome = outcomeOf(status);
    minute[outcome] += 1;
    if (outcome === 'client') {
      const what = `${status} ${method} ${path.replace(/\d+/g, 'N')}`;
      this.clientErrors.set(what, (this.clientErrors.get(what) ?? 0) + 1);
    }
    return { status, json };
  }

  /** Each minute: its number from 1, its requests, their p50 and p99 ms (0 when none), and its outcomes. */
  rows() {
    return this.#minutes.map(({ latencies: list, ...counts }, i) => {
      const { count, p50, p99 } = latencies(list);
      return { minute: i + 1, requests: count, p50: p50 || 0, p99: p99 || 0, ...counts };
    });
  }

  /** Prints the minutes as a table, and returns their outcomes summed. */
  print(rows = this.rows()): Counts {
    console.log(tableLine(HEADINGS));
    for (const r of rows) console.log(tableLine([r.minute, r.requests, r.p50, r.p99, ...OUTCOMES.map((o) => r[o])]));
    return Object.fromEntries(OUTCOMES.map((o) => [o, sumOf(rows, (r) => r[o])])) as Counts;
  }
}

/**
 * Waits for the next send at `perSecond`, the first at `startAt`. A client that fell behind (a slow answer) sends
 * at once but does not catch up in a burst: the load stays steady rather than the schedule.
 */
export function pacer(startAt: number, perSecond: number): () => Promise<void> {
  let next = startAt;
  return async () => {
    if (next > Date.now()) await sleep(next - Date.now());
    next = Math.max(next, Date.now()) + 1000 / perSecond;
  };
}
