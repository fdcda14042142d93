/** What became of the requests of one class in one run, and the figures the report shows of them. */
import type { Outcome } from '../harness/http-pool.js';
import { PACED_TIMEOUT_MS } from '../harness/paced.js';
import { latencies } from '../harness/stats.js';
export type { Outcome };

/** The prober's pace (each kind), and how long a probe may wait for its answer before it counts as unanswered. */
export const PROBE_INTERVAL_MS = 250;
export const PROBE_TIMEOUT_MS = PACED_TIMEOUT_MS;

/**
 * What a newcomer asks, each on a new connection: `/healthz` (an orchestrator's probe), and page 1 of the list
 * (anonymous `GET /api/tasks/`, which each worker answers from its read cache once it has served it).
 */
export const PROBE_PATHS = { healthz: '/healthz', page: '/api/tasks/' } as const;

export interface Tally {
  /** Requests planned (issued, sooner or later). */
  planned: number;
  /** Latencies of the 2xx answers, ms. */
  served: number[];
  /** Answers by status, 2xx included. */
  statuses: Record<number, number>;
  /** Requests with no answer in time, and of them those never sent. */
  timeouts: number;
  unsent: number;
  /** Connection failures: refused, reset, closed before an answer. */
  errors: number;
}

export const newTally = (): Tally => ({ planned: 0, served: [], statuses: {}, timeouts: 0, unsent: 0, errors: 0 });

export function record(tally: Tally, outcome: Outcome): void {
  if (outcome === 'timeout' || outcome === 'unsent') {
    tally.timeouts += 1;
    if (outcome === 'unsent') tally.unsent += 1;
  } else if (outcome === 'error') tally.errors += 1;
  else {
    tally.statuses[outcome.status] = (tally.statuses[outcome.status] ?? 0) + 1;
    if (outcome.status >= 200 && outcome.status < 300) tally.served.push(outcome.ms);
  }
}

/** One class's figures over a run of `seconds`. */
export interface Summary {
  offeredPerS: number;
  /** 2xx answers per second. */
  goodputPerS: number;
  /** Of the 2xx answers, ms from the planned start (NaN: none). */
  p50Ms: number;
  p99Ms: number;
  /** 503 answers: the service shedding load. */
  shed: number;
  timeouts: number;
  unsent: number;
  errors: number;
  /** Answers other than 2xx and 503, by status. */
  other: Record<number, number>;
  /** Answers of any status. */
  answered: number;
}

export function summarise(tally: Tally, seconds: number): Summary {
  const served = latencies(tally.served);
  const other: Record<number, number> = {};
  let answered = 0;
  for (const [status, count] of Object.entries(tally.statuses)) {
    answered += count;
    const code = Number(status);
    if ((code < 200 || code > 299) && code !== 503) other[code] = count;
  }
  return {
    offeredPerS: tally.planned / seconds,
    goodputPerS: served.count / seconds,
    p50Ms: served.p50,
    p99Ms: served.p99,
    shed: tally.statuses[503] ?? 0,
    timeouts: tally.timeouts,
    unsent: tally.unsent,
    errors: tally.errors,
    other,
    answered,
  };
}
