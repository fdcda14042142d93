/**
 * The throttle's series in the metrics of metrics.ts: the outcomes its counters are labelled by,
 * every scope's series created at zero before its first event, and the gauges of each scope's
 * configured limit and window. What every throttle decision does calls these as each limit learns its
 * scopes (src/edge/decision.ts `declare`).
 */
import type { Metrics } from '../base/metrics.js';

/** The outcomes `paceline_throttle_decisions_total` counts. */
const THROTTLE_DECISIONS = ['allowed', 'throttled', 'store_error', 'shadow_refused'] as const;

/** The outcomes `paceline_throttle_local_decisions_total` counts. */
const LOCAL_DECISIONS = ['allowed', 'throttled'] as const;

/**
 * Creates every decision series of `scopes` at zero, so a scope's ratio and its store errors
 * read 0 rather than "no data" before the first such event.
 */
export function primeThrottleSeries(metrics: Metrics, scopes: Iterable<string>): void {
  for (const scope of scopes) {
    for (const decision of THROTTLE_DECISIONS) metrics.throttleDecisions.inc({ scope, decision }, 0);
    metrics.throttleNearLimit.inc({ scope }, 0);
    for (const decision of LOCAL_DECISIONS) metrics.throttleLocalDecisions.inc({ scope, decision }, 0);
    metrics.throttleDistinctClients.set({ scope }, 0);
  }
}

/** Sets every scope's limit and window gauges: the lines a panel draws its scope's counts against. */
export function setThrottleLimits(
  metrics: Metrics,
  rules: Iterable<{ scope: string; rate: { limit: number; windowMs: number } }>,
): void {
  for (const { scope, rate } of rules) {
    metrics.throttleLimit.set({ scope }, rate.limit);
    metrics.throttleWindow.set({ scope }, rate.windowMs / 1000);
  }
}
