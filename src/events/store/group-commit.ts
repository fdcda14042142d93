import type { CommandOutcome, TaskCommand } from '../domain/task.events.js';

/**
 * Runs a batch of commands atomically and returns one outcome per command, in order. With
 * `lockWaitMs`, a batch not granted the append lock within it fails with nothing written, with an
 * error that `isLockWaitOver` recognises.
 */
export type BatchRunner = (commands: readonly TaskCommand[], lockWaitMs?: number) => Promise<CommandOutcome[]>;

/** A command that waited longer than its deadline for its turn: nothing of it was written. */
export class CommandTimeoutError extends Error {
  override name = 'CommandTimeoutError';
  constructor(readonly waitedMs: number) {
    super(`command not run: it waited ${Math.round(waitedMs)} ms for the append lock`);
  }
}

/** Anything that executes task commands: the group committer in production, variants in benchmarks. */
export interface CommandBus {
  execute(command: TaskCommand): Promise<CommandOutcome>;
  close(): Promise<void>;
}

interface Pending {
  command: TaskCommand;
  resolve: (outcome: CommandOutcome) => void;
  reject: (error: unknown) => void;
  /** performance.now() at arrival, and the time after which it must not be started. */
  arrived: number;
  deadline: number;
  timer?: NodeJS.Timeout;
}

export interface GroupCommitOptions {
  /**
   * The longest a command waits for its turn (queued, then for the append lock). A command still
   * queued then is taken out and rejected with CommandTimeoutError; a batch asks the runner for
   * the lock within its earliest command's remaining time, and when not granted, those past their
   * deadline are rejected and the others queue again. Once a batch holds the lock, its commands
   * get its outcome, however long it takes (bounded by the statement timeout).
   */
  waitMs?: number;
  /** Recognises the runner's failure to get the append lock within `lockWaitMs`. */
  isLockWaitOver?: (error: unknown) => boolean;
}

/**
 * Group commit: while one batch is being committed, commands that arrive queue up and go
 * together in the next transaction, so the cost of the global append lock and of each commit is
 * shared by every command waiting for it. A batch that fails as a whole (a database error) is
 * retried command by command, so one bad command fails only itself.
 */
export class GroupCommitter implements CommandBus {
  #queue: Pending[] = [];
  #running: Promise<void> | null = null;
  #closed = false;

  constructor(
    private readonly run: BatchRunner,
    private readonly maxBatch: number,
    private readonly onBatch: (size: number) => void = () => {},
    private readonly options: GroupCommitOptions = {},
  ) {}

  execute(command: TaskCommand): Promise<CommandOutcome> {
    if (this.#closed) return Promise.reject(new Error('command bus is closed'));
    return new Promise((res, rej) => {
      const arrived = performance.now();
      const waitMs = this.options.waitMs ?? Infinity;
      const pending: Pending = {
        command,
        arrived,
        deadline: arrived + waitMs,
        resolve: (outcome) => {
          clearTimeout(pending.timer);
          res(outcome);
        },
        reject: (error) => {
          clearTimeout(pending.timer);
          rej(error);
        },
      };
      if (Number.isFinite(waitMs)) pending.timer = setTimeout(() => this.#expire(pending), waitMs);
      this.#queue.push(pending);
      this.#running ??= this.#drain();
    });
  }

  /** A command whose deadline passed while still queued leaves the queue unanswered by the database. */
  #expire(pending: Pending): void {
    const index = this.#queue.indexOf(pending);
    if (index === -1) return; // in a batch: its outcome answers it
    this.#queue.splice(index, 1);
    pending.reject(new CommandTimeoutError(performance.now() - pending.arrived));
  }

  /** Waits for every queued command to finish; later calls to execute() are refused. Safe twice. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#running;
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.maxBatch);
      this.onBatch(batch.length);
      await this.#commit(batch);
    }
    this.#running = null;
  }

  async #commit(all: Pending[]): Promise<void> {
    const batch = this.#live(all);
    if (batch.length === 0) return;
    const earliest = Math.min(...batch.map((p) => p.deadline));
    const lockWaitMs = Number.isFinite(earliest) ? Math.max(1, Math.ceil(earliest - performance.now())) : undefined;
    try {
      const outcomes = await this.run(
        batch.map((p) => p.command),
        lockWaitMs,
      );
      batch.forEach((p, i) => p.resolve(outcomes[i]!));
    } catch (error) {
      if (lockWaitMs !== undefined && this.options.isLockWaitOver?.(error)) {
        // Nothing was written: those still within their deadline wait for the next batch.
        this.#queue.unshift(...this.#live(batch));
        return;
      }
      if (batch.length === 1 || !wasRolledBack(error)) {
        for (const pending of batch) pending.reject(error);
        return;
      }
      for (const pending of batch) await this.#commit([pending]);
    }
  }

  /** The commands still within their deadline; the others are rejected, never started. */
  #live(batch: Pending[]): Pending[] {
    const now = performance.now();
    return batch.filter((pending) => {
      if (pending.deadline > now) return true;
      pending.reject(new CommandTimeoutError(now - pending.arrived));
      return false;
    });
  }
}

/**
 * Whether the database answered the failure itself (a SQLSTATE outside connection classes), so the
 * transaction certainly rolled back and its commands may be retried one by one. A lost connection
 * may have lost the answer to a COMMIT that succeeded: retrying then could append twice.
 */
function wasRolledBack(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !code.startsWith('57');
}
