import type { MixResult } from './mix.js';
import { ms } from '../harness/report.js';

/**
 * Latency bound of the capacity search: a step is "bounded" when the mix's p99 stays under it. A quarter of the
 * client's 2 s timeout: on a shared 2-core host a tighter bound stops the search on a neighbour's burst.
 */
export const P99_BOUND_MS = 500;
/** A served step serves at least this share of what it was offered, with no timeout, failure or 503. */
const SERVED_SHARE = 0.97;
/** The search's first rate, also the warm-up's. */
export const FIRST_RATE = 150;
const STEP_FACTOR = 1.4;
const MAX_STEPS = 14;
/** Unbounded steps tried once more, in a whole search. */
const RETRIES = 2;

export interface RampStep {
  ratePerS: number;
  result: MixResult;
  /** Everything offered was served in time (goodput still keeps up)... */
  served: boolean;
  /** ...and the mix's p99 stayed within P99_BOUND_MS. */
  bounded: boolean;
}

/** How the capacity was found: the latency bound held at it, or (no step met it) goodput still kept up. */
export type CapacityBasis = 'p99' | 'goodput';

const isServed = ({ all }: MixResult): boolean =>
  all.goodputPerS >= SERVED_SHARE * all.offeredPerS && all.timeouts + all.errors + all.shed === 0;

export const isBounded = (result: MixResult): boolean =>
  isServed(result) && Number.isFinite(result.all.p99Ms) && result.all.p99Ms <= P99_BOUND_MS;

/**
 * The mix's capacity: the open-loop rate is raised by STEP_FACTOR from FIRST_RATE until a step is not bounded
 * (a shared host has hiccups: the first RETRIES unbounded steps are tried once more), then the rate halfway (by
 * ratio) between the last bounded and the first unbounded is tried once. Capacity is the highest goodput of a
 * bounded step. Until some step is bounded, a step that is only served does not stop the search (the p99 of a
 * neighbour's burst, not the mix's); if none ever is, capacity is the highest goodput of a served step and
 * `basis` says so. `step(rate)` runs the mix at `rate` and leaves the service settled.
 */
export async function measureCapacity(
  step: (ratePerS: number) => Promise<MixResult>,
  log: (line: string) => void,
): Promise<{ capacity: number; basis: CapacityBasis; steps: RampStep[] }> {
  const steps: RampStep[] = [];
  const run = async (ratePerS: number) => {
    const result = await step(ratePerS);
    const entry = { ratePerS, result, served: isServed(result), bounded: isBounded(result) };
    steps.push(entry);
    log(
      `capacity: offered ${Math.round(ratePerS)}/s → ${Math.round(result.all.goodputPerS)} 2xx/s, p99 ` +
        `${ms(result.all.p99Ms)} ms, ${result.all.timeouts} timeouts: ` +
        (entry.bounded ? 'bounded' : entry.served ? 'served, p99 over the bound' : 'not served'),
    );
    return entry;
  };
  let rate = FIRST_RATE;
  let retries = RETRIES;
  while (steps.length < MAX_STEPS) {
    let last = await run(rate);
    if (!last.bounded && retries > 0 && steps.length < MAX_STEPS) {
      retries -= 1;
      last = await run(rate);
    }
    const anyBounded = steps.some((s) => s.bounded);
    if (!last.bounded && (anyBounded || !last.served)) break;
    rate *= STEP_FACTOR;
  }
  const lastGood = steps.filter((s) => s.bounded).at(-1)?.ratePerS;
  if (lastGood !== undefined && lastGood < rate) await run(Math.sqrt(lastGood * rate));
  const best = (picked: RampStep[]) => Math.max(0, ...picked.map((s) => s.result.all.goodputPerS));
  const bounded = best(steps.filter((s) => s.bounded));
  if (bounded > 0) return { capacity: bounded, basis: 'p99', steps };
  const served = best(steps.filter((s) => s.served));
  if (served > 0) return { capacity: served, basis: 'goodput', steps };
  throw new Error(`no step of the capacity search served what it was offered, even at ${FIRST_RATE}/s`);
}
