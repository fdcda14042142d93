import type { Logger } from 'pino';
import type { Config } from '../settings/config.js';

/**
 * What the primary has started, stopped in reverse order on SIGTERM/SIGINT after the step under
 * way finishes, so no embedded store is left running.
 */
export interface Lifecycle {
  /** Runs one start step; once shutting down it starts nothing and never resolves (the process exits). */
  step<T>(start: () => Promise<T>): Promise<T>;
  /** Run in reverse order with the stop's deadline: DRAIN_DELAY_MS + SHUTDOWN_TIMEOUT_MS after the signal. */
  readonly stops: Array<(deadline: number) => Promise<void>>;
  stopping(): boolean;
  /** Called first on a signal: a store that exits now (Ctrl-C reaches it too) is not restarted. */
  holdStores: () => void;
  /** Called once the step under way has finished, before anything is stopped. */
  announceLeaving: () => Promise<void>;
}

/** Handles SIGTERM and SIGINT from now on: the first one stops everything in `stops`, then exits. */
export function handleShutdown(logger: Logger, config: Config): Lifecycle {
  let current: Promise<unknown> = Promise.resolve();
  let stopping = false;
  const life: Lifecycle = {
    stops: [],
    stopping: () => stopping,
    holdStores: () => {},
    announceLeaving: async () => {},
    step(start) {
      if (stopping) return new Promise<never>(() => {});
      const work = start();
      current = work.catch(() => {});
      return work;
    },
  };
  const shutdown = onceShutdown(logger, config, async (deadline) => {
    stopping = true;
    life.holdStores();
    for (let seen = null as unknown; seen !== current;) await (seen = current);
    await life.announceLeaving();
    for (const stop of life.stops.reverse()) await stop(deadline);
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  return life;
}

function onceShutdown(logger: Logger, config: Config, stopAll: (deadline: number) => Promise<void>) {
  let started = false;
  return (signal: string) => {
    if (started) return;
    started = true;
    const deadline = Date.now() + config.DRAIN_DELAY_MS + config.SHUTDOWN_TIMEOUT_MS;
    logger.info({ signal }, 'shutting down: draining children');
    // Backstop: the children have most of SHUTDOWN_TIMEOUT_MS and the stores the rest; this is for a store that hangs.
    setTimeout(
      () => {
        logger.error('shutdown took too long; exiting');
        process.exit(1);
      },
      config.DRAIN_DELAY_MS + config.SHUTDOWN_TIMEOUT_MS + 20_000,
    ).unref();
    stopAll(deadline).then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
}
