import { AsyncLocalStorage } from 'node:async_hooks';
import { createWriteStream, openSync, type WriteStream } from 'node:fs';
import { Stop } from './stop.js';

/** The check a request is sent for, so each check's requests are counted apart while they overlap. */
export const checkScope = new AsyncLocalStorage<string>();

/**
 * One line of a verify history (docs/verify.md "History format"): every request is two entries, an
 * `invoke` when it is sent and its completion (`ok` for any HTTP answer, `info` when no answer came, as
 * Jepsen marks an indeterminate operation), sharing `index`'s pair number `op`. Times are nanoseconds
 * since the run began, from one monotonic clock.
 */
export interface HistoryEntry {
  type: 'invoke' | 'ok' | 'info';
  op: number;
  process: string;
  conn: number | null;
  f: string;
  time: number;
  value: unknown;
}

/** A request as the checks see it once it has completed. */
export interface Operation {
  op: number;
  process: string;
  conn: number | null;
  f: string;
  invoke: number;
  complete: number;
  status: number | null;
  headers: Record<string, string>;
  body: unknown;
  error?: string;
}

/** Collects the run's history in memory and, when asked, as JSON lines in a file. */
export class History {
  private readonly started = process.hrtime.bigint();
  private next = 0;
  private readonly out: WriteStream | undefined;
  count = 0;
  private readonly perCheck = new Map<string, number>();

  /** Opens `file` at once, so that a path it cannot write stops the run before it sends anything. */
  constructor(file?: string) {
    this.out = file === undefined ? undefined : createWriteStream('', { fd: openHistory(file) });
  }

  /** Nanoseconds since the run began. */
  now(): number {
    return Number(process.hrtime.bigint() - this.started);
  }

  begin(process: string, f: string, value: unknown): { op: number; time: number } {
    const op = this.next++;
    this.count++;
    const check = checkScope.getStore() ?? 'setup';
    this.perCheck.set(check, (this.perCheck.get(check) ?? 0) + 1);
    const time = this.now();
    this.write({ type: 'invoke', op, process, conn: null, f, time, value });
    return { op, time };
  }

  /** Requests sent so far on behalf of `check`. */
  countFor(check: string): number {
    return this.perCheck.get(check) ?? 0;
  }

  end(entry: Omit<HistoryEntry, 'time'>): number {
    const time = this.now();
    this.write({ ...entry, time });
    return time;
  }

  private write(entry: HistoryEntry): void {
    this.out?.write(`${JSON.stringify(entry)}\n`);
  }

  async close(): Promise<void> {
    const out = this.out;
    if (out === undefined) return;
    await new Promise<void>((resolve, reject) =>
      out.end((error?: Error | null) => (error ? reject(error) : resolve())),
    );
  }
}

function openHistory(file: string): number {
  try {
    return openSync(file, 'w');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'its folder does not exist' : code === 'EACCES' ? 'permission denied' : code;
    throw new Stop(`--history ${file}: cannot write there (${why ?? (error as Error).message})`);
  }
}
