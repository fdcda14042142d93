import { setTimeout as sleep } from 'node:timers/promises';
import { latencies } from '../harness/stats.js';
import { newTally, record, summarise, type Outcome, type Summary } from './outcomes.js';
import { HttpPool } from '../harness/http-pool.js';

export interface FloodRun {
  base: string;
  /** Clients, each with one keep-alive connection of its own, all started at once. */
  connections: number;
  seconds: number;
  /** A request with no answer this long after it was sent counts as a timeout. */
  timeoutMs: number;
}

export interface FloodResult {
  connections: number;
  /** Clients that got at least one answer, and the most connections open at once. */
  clientsAnswered: number;
  mostOpen: number;
  /** Clients whose first answer (any status) came within FIRST_ANSWER_MS of their start. */
  firstAnswered: number;
  /** Of the clients answered, ms from their start to their first answer: median, p99, slowest. */
  firstP50Ms: number;
  firstP99Ms: number;
  firstMaxMs: number;
  page1: Summary;
}

/** A flood client's first answer counts when it came within this long of the client's start. */
export const FIRST_ANSWER_MS = 10_000;

const PAGE_1 = { method: 'GET', path: '/api/tasks/' } as const;

/** A client whose connection failed waits this long before it tries again, so a refusal cannot spin. */
const RETRY_PAUSE_MS = 100;

/**
 * `connections` clients, started at once, each asking page 1 on its own keep-alive connection in a loop (a
 * closed loop per connection: this run is about how many connections, not how fast) for `seconds`; then every
 * connection is closed, and requests still in flight then are not counted.
 */
export async function runFlood(run: FloodRun): Promise<FloodResult> {
  const tally = newTally();
  const pools: HttpPool[] = [];
  const started = performance.now();
  const deadline = started + run.seconds * 1000;
  let stopped = false;
  let mostOpen = 0;
  let clientsAnswered = 0;
  const firsts: number[] = [];
  const client = async () => {
    const pool = new HttpPool(run.base);
    pools.push(pool);
    const start = performance.now();
    let answered = false;
    while (!stopped) {
      const outcome = await new Promise<Outcome>((resolve) => {
        tally.planned += 1;
        pool.send(PAGE_1, performance.now(), run.timeoutMs, resolve);
      });
      if (stopped) {
        tally.planned -= 1;
        break;
      }
      record(tally, outcome);
      if (!answered && typeof outcome === 'object') {
        answered = true;
        clientsAnswered += 1;
        firsts.push(performance.now() - start);
      }
      if (outcome === 'error') await sleep(RETRY_PAUSE_MS);
    }
  };
  const openConnections = () => pools.reduce((open, pool) => open + pool.open, 0);
  const counting = setInterval(() => (mostOpen = Math.max(mostOpen, openConnections())), 250);
  const clients = Array.from({ length: run.connections }, client);
  await sleep(Math.max(0, deadline - performance.now()));
  stopped = true;
  clearInterval(counting);
  for (const pool of pools) pool.destroy();
  await Promise.all(clients);
  const first = latencies(firsts);
  return {
    connections: run.connections,
    clientsAnswered,
    mostOpen,
    firstAnswered: firsts.filter((ms) => ms <= FIRST_ANSWER_MS).length,
    firstP50Ms: first.p50,
    firstP99Ms: first.p99,
    firstMaxMs: first.max,
    page1: summarise(tally, run.seconds),
  };
}
