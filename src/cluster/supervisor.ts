import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';

export type ChildRole = 'web' | 'jobs';

interface Slot {
  role: ChildRole;
  worker: Worker;
  crashes: number[];
  retiring: boolean;
  /** Said it is ready; a web child takes connections from then until it retires. */
  ready: boolean;
  /** When it last said it is alive (performance.now()): a web child's event loop still turns. */
  /** The reload generation the child was started in; a reload replaces every older child. */
  generation: number;
}

/** The message that tells a child its host is stopping (docs/architecture.md "Processes"). */
export const LEAVING = 'leaving';
/**
 * A draining child's question, sent once its server has stopped listening, and the primary's
 * answer: see `settleHandoffs` in child.ts (docs/architecture.md "Processes").
 */
export const HANDOFFS_PENDING = 'handoffs-pending';
export const HANDOFFS_SETTLED = 'handoffs-settled';

const CRASH_WINDOW_MS = 60_000;
const CRASH_LOOP_THRESHOLD = 5;
const MAX_BACKOFF_MS = 30_000;

/**
 * Keeps `count` children of each role alive. A child that dies unexpectedly is replaced after a
 * back-off that doubles with each crash in the last minute (capped at 30 s); five crashes in a
 * minute are reported as a crash loop. `reload` replaces web children one at a time, starting
 * the new one before retiring the old, so no request is refused. `stop` drains every child.
 */
export class Supervisor {
  #slots = new Set<Slot>();
  #stopping = false;
  #timers = new Set<NodeJS.Timeout>();
  #generation = 0;
  #reloading: Promise<boolean> | null = null;
  #env: Record<string, string>;
  #leaving = false;

  constructor(
    private readonly options: {
      logger: Logger;
      env: Record<string, string>;
      shutdownTimeoutMs: number;
      onRestart?: (role: ChildRole) => void;
      onExit?: (worker: Worker) => void;
      /** Called on each fork, before the child has started. */
      onFork?: (worker: Worker, role: ChildRole) => void;
    },
  ) {
    this.#env = options.env;
  }

  /** The environment children forked from now on get, on top of the primary's own (a reload's settings). */
  setEnv(env: Record<string, string>): void {
    this.#env = env;
  }

  async start(role: ChildRole, count: number): Promise<void> {
    await Promise.all(Array.from({ length: count }, () => this.#spawn(role, [])));
  }

  /**
   * Replaces every child of `role` started before this call, one at a time: a new child first,
   * then the old one drains. A reload asked for during another one extends it rather than running
   * beside it (which would leave twice the children). A new child that exits before it is ready
   * ends the reload, keeping the old children serving: resolves false then, true once all are replaced.
   */
  reload(role: ChildRole): Promise<boolean> {
    this.#generation += 1;
    return (this.#reloading ??= this.#replaceOlder(role).finally(() => (this.#reloading = null)));
  }

  async #replaceOlder(role: ChildRole): Promise<boolean> {
    for (;;) {
      const old = [...this.#slots].find((s) => s.role === role && !s.retiring && s.generation < this.#generation);
      if (!old || this.#stopping) return !this.#stopping;
      if (!(await this.#spawn(role, []))) {
        this.options.logger.error(
          { role },
          'a new child exited before it was ready; reload abandoned, the old children keep serving',
        );
        return false;
      }
      await this.#retire(old);
    }
  }

  /** Tells every child, and any started from now on, that the host is stopping (its /readyz turns 503). */
  announceLeaving(): void {
    this.#leaving = true;
    for (const { worker } of this.#slots) if (worker.isConnected()) worker.send({ type: LEAVING });
  }

  /** Stops every child gracefully, killing those still running after the shutdown timeout. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const timer of this.#timers) clearTimeout(timer);
    await Promise.all([...this.#slots].map((slot) => this.#retire(slot)));
  }

  workers(): Worker[] {
    return [...this.#slots].map((s) => s.worker);
  }

  /** Forks a child; resolves true once it is ready, false if it exits first. */
  #spawn(role: ChildRole, crashes: number[]): Promise<boolean> {
    const worker = cluster.fork({ ...this.#env, PACELINE_CHILD_ROLE: role });
    this.options.onFork?.(worker, role);
    const slot: Slot = {
      role,
      worker,
      crashes,
      retiring: false,
      ready: false,
      generation: this.#generation,
    };
    this.#slots.add(slot);
    worker.on('exit', (code, signal) => this.#onExit(slot, code, signal));
    worker.on('message', (message: { type?: string }) => {
      if (message?.type === HANDOFFS_PENDING && worker.isConnected()) worker.send({ type: HANDOFFS_SETTLED });
    });
    return new Promise((resolve) => {
      const ready = (message: unknown) => {
        if ((message as { type?: string })?.type !== 'ready') return;
        worker.off('message', ready);
        slot.ready = true;
        if (this.#leaving) worker.send({ type: LEAVING });
        resolve(true);
      };
      worker.on('message', ready);
      worker.once('exit', () => resolve(false));
    });
  }

  #onExit(slot: Slot, code: number | null, signal: string | null): void {
    this.#slots.delete(slot);
    this.options.onExit?.(slot.worker);
    if (this.#stopping || slot.retiring) return;
    const now = Date.now();
    const crashes = [...slot.crashes.filter((t) => now - t < CRASH_WINDOW_MS), now];
    const delay = Math.min(MAX_BACKOFF_MS, 250 * 2 ** (crashes.length - 1));
    const log =
      crashes.length >= CRASH_LOOP_THRESHOLD
        ? this.options.logger.error.bind(this.options.logger)
        : this.options.logger.warn.bind(this.options.logger);
    log(
      {
        role: slot.role,
        pid: slot.worker.process.pid,
        code,
        signal,
        crashesLastMinute: crashes.length,
        restartInMs: delay,
      },
      crashes.length >= CRASH_LOOP_THRESHOLD
        ? 'child is crash-looping; restarting with back-off'
        : 'child exited unexpectedly; restarting',
    );
    this.options.onRestart?.(slot.role);
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (!this.#stopping) void this.#spawn(slot.role, crashes);
    }, delay);
    this.#timers.add(timer);
  }

  #retire(slot: Slot): Promise<void> {
    slot.retiring = true;
    const { worker } = slot;
    if (worker.isDead()) return Promise.resolve();
    return new Promise((resolve) => {
      const kill = setTimeout(() => worker.process.kill('SIGKILL'), this.options.shutdownTimeoutMs);
      worker.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      worker.process.kill('SIGTERM');
    });
  }
}
