import type { Logger } from 'pino';
import { logStoreFailure } from '../src/stores/store-errors.js';

/**
 * Runs `task` every `intervalMs`, never two at once, logging (not throwing) its failures.
 * `close()` stops the timer and waits for a run in progress; it is safe twice.
 */
export function runPeriodically(
  name: string,
  intervalMs: number,
  task: () => Promise<void>,
  logger: Logger,
): { close(): Promise<void> } {
  let running: Promise<void> | undefined;
  let stopped = false;
  const tick = () => {
    if (running || stopped) return;
    running = task()
      .catch((error: unknown) => logStoreFailure(logger, error, 'periodic task failed', { task: name }))
      .finally(() => (running = undefined));
  };
  const timer = setInterval(tick, intervalMs);
  tick();
  return {
    async close() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
