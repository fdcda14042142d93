import type { CommandOutcome, TaskCommand } from '../domain/task.events.js';

/** Runs a batch of commands atomically and returns one outcome per command, in order. */
export type BatchRunner = (commands: readonly TaskCommand[]) => Promise<CommandOutcome[]>;

/** Anything that executes task commands: the group committer in production, variants in benchmarks. */
export interface CommandBus {
  execute(command: TaskCommand): Promise<CommandOutcome>;
  close(): Promise<void>;
}

interface Pending {
  command: TaskCommand;
  resolve: (outcome: CommandOutcome) => void;
  reject: (error: unknown) => void;
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
  ) {}

  execute(command: TaskCommand): Promise<CommandOutcome> {
    if (this.#closed) return Promise.reject(new Error('command bus is closed'));
    return new Promise((resolve, reject) => {
      this.#queue.push({ command, resolve, reject });
      this.#running ??= this.#drain();
    });
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

  async #commit(batch: Pending[]): Promise<void> {
    try {
      const outcomes = await this.run(batch.map((p) => p.command));
      batch.forEach((p, i) => p.resolve(outcomes[i]!));
    } catch (error) {
      if (batch.length === 1 || !wasRolledBack(error)) {
        for (const pending of batch) pending.reject(error);
        return;
      }
      for (const pending of batch) await this.#commit([pending]);
    }
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
