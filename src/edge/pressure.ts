import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * The event loop's median delay over a period past which the worker is pressed: half its turns late by more than
 * this is saturation (a quiet worker's are late by about a millisecond), not one slow turn or a collection.
 */
export const PRESSED_DELAY_MS = 20;
/** How often the delay is read, and the histogram restarted. */
const PERIOD_MS = 250;

/**
 * Whether this worker's event loop is late: the median of its delay over the last PERIOD_MS past
 * PRESSED_DELAY_MS. Admission's queue says when requests that need PostgreSQL wait;
 * this says when every answer waits, as a crowd of cheap requests over kept connections makes them
 * (docs/throttling.md "Past capacity: newcomers take turns").
 */
export function eventLoopPressure(): { late(): boolean; close(): void } {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let late = false;
  const reader = setInterval(() => {
    late = delay.count > 0 && delay.percentile(50) / 1e6 > PRESSED_DELAY_MS;
    delay.reset();
  }, PERIOD_MS).unref();
  return {
    late: () => late,
    close() {
      clearInterval(reader);
      delay.disable();
    },
  };
}
