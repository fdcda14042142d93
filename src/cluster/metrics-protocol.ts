import type { WatchedScope } from '../throttle/throttle-watch.js';

/** The messages by which the primary asks a child for its metrics and the child answers. */
export const METRICS_REQUEST = 'paceline:metrics:get';
export const METRICS_REPLY = 'paceline:metrics';

/** A child's report: its registry as JSON; `id` answers a request, null is the final report. */
export interface MetricsReply {
  type: typeof METRICS_REPLY;
  id: number | null;
  metrics: unknown[];
  /** The child's heaviest refused clients per scope (docs/throttling.md "Who is throttled"); web children only. */
  throttled?: WatchedScope[];
}
