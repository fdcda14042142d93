import type { Decision } from './throttler.js';

// What a request costs in its scope's units (docs/throttling.md "Cost: requests that weigh more"); the answer to one
// that costs more than the limit is src/edge/throttle-answers.ts's.

/** The largest cost a request is charged: any larger one is over every limit (MAX_RATE_LIMIT) just the same. */
const MAX_COST = 2 ** 31;

/**
 * A cost as the throttle takes it, whatever a route's cost function returned: a positive whole number (a fraction
 * rounded up; anything below 1, or not a number, counts as 1), so a client's odd query never fails its request.
 */
export function wholeCost(units: number): number {
  return units >= 1 ? Math.min(Math.ceil(units), MAX_COST) : 1;
}

/** True when a decision refused a request that costs more than its limit, which no wait admits. */
export function isOverLimit(decisions: readonly Decision[]): boolean {
  for (const decision of decisions) if (decision.overLimit !== undefined) return true;
  return false;
}
