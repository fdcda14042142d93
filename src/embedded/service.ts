/** A local server started for development or tests. */
export interface RunningService {
  /** Connection URL, always on 127.0.0.1. */
  url: string;
  /**
   * Stops the server and waits for it to exit. Safe to call more than once. Given a `deadline` (ms since the epoch),
   * a server still shutting down then is ended at once (docs/configuration.md `SHUTDOWN_TIMEOUT_MS`).
   */
  stop(deadline?: number): Promise<void>;
}

/**
 * How long before a stop's deadline a server still shutting down is ended at once: the time its exit, the primary's
 * and late timers on a busy host take. At 250 ms a loaded 2-core host saw a stop end 368 ms past its deadline.
 */
const EXIT_MARGIN_MS = 750;

/** How long a server may take to shut down its own way: `graceMs`, cut short by the stop's deadline. */
export function graceBefore(deadline: number | undefined, graceMs: number): number {
  if (deadline === undefined) return graceMs;
  return Math.max(0, Math.min(graceMs, deadline - Date.now() - EXIT_MARGIN_MS));
}
