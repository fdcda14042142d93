import type { RefusalAnswer, RefusalBytes } from './headers.js';
import { quotaExceededProblem, type ViolatedPolicy } from './quota-problem.js';
import type { Rate } from './rate.js';
import type { Decision } from './throttler.js';

// What a request costs in its scope's units, and the answer to one that costs more than the limit
// (docs/throttling.md "Cost: requests that weigh more").

/** The largest cost a request is charged: any larger one is over every limit (MAX_RATE_LIMIT) just the same. */
const MAX_COST = 2 ** 31;

/**
 * A cost as the throttle takes it, whatever a route's cost function returned: a positive whole number (a fraction
 * rounded up; anything below 1, or not a number, counts as 1), so a client's odd query never fails its request.
 */
export function wholeCost(units: number): number {
  return units >= 1 ? Math.min(Math.ceil(units), MAX_COST) : 1;
}

/** `10 per hour`, `300 per 5 minutes`: a rate as the over-limit message says it. */
function rateInWords({ limit, windowMs }: Rate): string {
  for (const [ms, unit] of UNITS) {
    if (windowMs % ms !== 0) continue;
    const count = windowMs / ms;
    return count === 1 ? `${limit} per ${unit}` : `${limit} per ${count} ${unit}s`;
  }
  return `${limit} per ${windowMs} ms`;
}

const UNITS: ReadonlyArray<readonly [number, string]> = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1_000, 'second'],
];

/** True when a decision refused a request that costs more than its limit, which no wait admits. */
export function isOverLimit(decisions: readonly Decision[]): boolean {
  for (const decision of decisions) if (decision.overLimit !== undefined) return true;
  return false;
}

/** The over-limit 429's detail: `Request costs 50 units; the limit is 10 per hour.` */
export function overLimitDetail(cost: number, rate: Rate): string {
  return `Request costs ${cost} ${cost === 1 ? 'unit' : 'units'}; the limit is ${rateInWords(rate)}.`;
}

/**
 * The 429 of a request that costs more than the limit of a refusing decision (its `overLimit`): no wait
 * would admit it, so it carries no `Retry-After` and no `RateLimit` field (whose `t` would promise one), only
 * `RateLimit-Policy` for every decision not in shadow; DRF's body has the detail above, the problem details the
 * violated policies and no `retry-after`.
 */
export function overLimitAnswer(decisions: readonly Decision[]): RefusalAnswer {
  const refusing = decisions.find((decision) => decision.overLimit !== undefined);
  const detail = refusing
    ? overLimitDetail(refusing.overLimit as number, { limit: refusing.limit, windowMs: refusing.windowMs, text: '' })
    : 'Request costs more than the limit.';
  const policies: string[] = [];
  const violated: ViolatedPolicy[] = [];
  for (const { scope, limit, windowMs, inShadow, overLimit } of decisions) {
    if (inShadow) continue;
    const window = Math.ceil(windowMs / 1000);
    policies.push(`"${scope}";q=${limit};w=${window}`);
    if (overLimit !== undefined) violated.push({ scope, quota: limit, window });
  }
  const own = policies.length > 0 ? ['RateLimit-Policy', policies.join(', ')] : [];
  let problem: RefusalBytes | undefined;
  return {
    fields: [...own, 'Content-Type', 'application/json; charset=utf-8'],
    body: Buffer.from(JSON.stringify({ detail })),
    problem: () => {
      if (problem) return problem;
      const body: Record<string, unknown> = quotaExceededProblem(violated, 0, detail);
      delete body['retry-after'];
      return (problem = {
        fields: [...own, 'Content-Type', 'application/problem+json'],
        body: Buffer.from(JSON.stringify(body)),
      });
    },
  };
}
