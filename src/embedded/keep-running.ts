import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { RunningService } from './service.js';

const RESTART_WINDOW_MS = 60_000;
const MAX_RESTART_DELAY_MS = 30_000;

/** A store kept running by {@link keepRunning}. */
export interface KeptService extends RunningService {
  /** No more restarts from now on (shutdown has begun; the store may exit with the terminal's Ctrl-C). */
  hold(): void;
}

/**
 * Starts an embedded store and starts it again, on the same port and data, whenever it exits
 * on its own (killed, crashed): after 0.5 s, doubling with each exit in the last minute up to
 * 30 s, and again after a failed start. One restart at a time. The children's clients reconnect
 * by themselves, so the service recovers without a restart (and, meanwhile, answers as it does
 * with an external store that is down). `stop()` ends it for good: a pending restart is
 * cancelled, one under way is stopped once started.
 */
export async function keepRunning(
  name: string,
  logger: Logger,
  start: (onUnexpectedExit: (how: string) => void) => Promise<RunningService>,
): Promise<KeptService> {
  let held = false;
  let running = false; // a first start that fails is the caller's error, not a restart
  let restartPending = false;
  let exits: number[] = [];
  let restarting: Promise<void> = Promise.resolve();
  const cancel = new AbortController();
  // Each instance reports its exit once, whether through its exit hook or its failed start.
  const startInstance = () => {
    let reported = false;
    return start((how) => {
      if (reported) return;
      reported = true;
      restart(how);
    });
  };
  const restart = (how: string) => {
    if (held || !running || restartPending) return;
    restartPending = true;
    const now = Date.now();
    exits = [...exits.filter((at) => now - at < RESTART_WINDOW_MS), now];
    const delay = Math.min(MAX_RESTART_DELAY_MS, 500 * 2 ** (exits.length - 1));
    logger.error(
      { store: name, exit: how, exitsLastMinute: exits.length, restartInMs: delay },
      `embedded ${name} exited unexpectedly; restarting it`,
    );
    restarting = (async () => {
      try {
        await sleep(delay, undefined, { signal: cancel.signal });
      } catch {
        return; // held meanwhile
      }
      let started: RunningService;
      try {
        started = await startInstance();
      } catch (error) {
        restartPending = false;
        logger.error({ err: error, store: name }, `embedded ${name} could not be restarted`);
        restart('start failed');
        return;
      }
      restartPending = false;
      if (held) return void (await started.stop());
      current = started;
      logger.warn({ store: name }, `embedded ${name} restarted`);
    })();
  };
  const hold = () => {
    held = true;
    cancel.abort();
  };
  let current = await startInstance();
  running = true;
  return {
    url: current.url,
    hold,
    async stop(deadline) {
      hold();
      await restarting;
      await current.stop(deadline);
    },
  };
}
