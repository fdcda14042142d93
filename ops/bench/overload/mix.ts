import { createConnectionQueue, planArrivals, realClock, runOpenLoop } from '../../../test/helpers/open-loop.js';
import { random as seededRandom } from '../../../test/helpers/random.js';
import { HttpPool, type RequestSpec } from '../harness/http-pool.js';
import { latencies } from '../harness/stats.js';
import { newTally, record, summarise, type Outcome, type Summary } from './outcomes.js';

/** The request classes of the mix and their shares of its arrivals. */
export const CLASSES = [
  { name: 'page 1', weight: 0.5 },
  { name: 'random page', weight: 0.35 },
  { name: 'create', weight: 0.15 },
] as const;

/** The rows of a random page: `?limit=20&offset=<random>`. */
const PAGE_LIMIT = 20;

/** One open-loop run of the mix, as the benchmark asks the load process for it. */
export interface MixRun {
  base: string;
  /** The writer's token: creates are a logged-in user's. */
  token: string;
  /** Tasks in the collection: random offsets fall within it. */
  tasks: number;
  ratePerS: number;
  seconds: number;
  seed: number;
  /** The client gives up on a request this long after its planned start. */
  timeoutMs: number;
  /** Keep-alive connections the client may hold at once; requests beyond them wait in its queue, in order. */
  sockets: number;
}

export interface MixResult {
  /** By class, in the order of CLASSES, then the whole mix. */
  classes: Summary[];
  all: Summary;
  /** How late the load process issued requests: p99 of the ms after their planned start. */
  lateP99Ms: number;
}

function specFor(run: MixRun, kind: number, random: () => number, sequence: number): RequestSpec {
  if (kind === 0) return { method: 'GET', path: '/api/tasks/' };
  if (kind === 1) {
    const offset = Math.floor(random() * Math.max(1, run.tasks - PAGE_LIMIT));
    return { method: 'GET', path: `/api/tasks/?limit=${PAGE_LIMIT}&offset=${offset}` };
  }
  return {
    method: 'POST',
    path: '/api/tasks/',
    headers: { Authorization: `Bearer ${run.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ title: `Overload ${run.seed}-${sequence}` }),
  };
}

/**
 * Runs the mix open-loop at `run.ratePerS` for `run.seconds` (Poisson arrivals) and resolves once every request
 * has an outcome, at most `timeoutMs` after the last arrival. Latencies count from each planned start, so a late
 * load process shows in them too; how late it was is reported beside them.
 */
export async function runMix(run: MixRun): Promise<MixResult> {
  const weights = CLASSES.map((c) => c.weight);
  const plan = planArrivals({ ratePerS: run.ratePerS, seconds: run.seconds, weights, seed: run.seed });
  const random = seededRandom(run.seed ^ 0x5eed);
  const pool = new HttpPool(run.base);
  const queue = createConnectionQueue(run.sockets, run.timeoutMs);
  const sweep = setInterval(queue.expireDue, 20);
  const tallies = CLASSES.map(() => newTally());
  const all = newTally();
  const late = new Float64Array(plan.times.length);
  let pending = plan.times.length;
  let allDone: () => void = () => {};
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  if (pending === 0) allDone();
  await runOpenLoop(plan, realClock, (index, plannedAt) => {
    late[index] = performance.now() - plannedAt;
    const kind = plan.classes[index]!;
    const tally = tallies[kind]!;
    tally.planned += 1;
    all.planned += 1;
    const settle = (outcome: Outcome) => {
      record(tally, outcome);
      record(all, outcome);
      if ((pending -= 1) === 0) allDone();
    };
    // Drawn on arrival, not on sending: both instances get the same offsets whatever their queues drop.
    const spec = specFor(run, kind, random, index);
    queue.submit({
      plannedAt,
      expire: () => settle('unsent'),
      send: (release) =>
        pool.send(spec, plannedAt, run.timeoutMs, (outcome) => {
          release();
          settle(outcome);
        }),
    });
  });
  await finished;
  clearInterval(sweep);
  pool.destroy();
  return {
    classes: tallies.map((tally) => summarise(tally, run.seconds)),
    all: summarise(all, run.seconds),
    lateP99Ms: latencies(late).p99,
  };
}
