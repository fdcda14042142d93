import { writeSync } from 'node:fs';

/** Past this many characters waiting, the lines are written at once instead of at the end of the turn. */
const MAX_PENDING = 64 * 1024;
/** How long a write to a full pipe waits before it is tried again (the reader is behind). */
const FULL_PIPE_WAIT_MS = 1;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

export interface LineBuffer {
  write(line: string): void;
  /** Writes every line still waiting, before returning. */
  flushSync(): void;
}

/**
 * Log lines gathered over one turn of the event loop and written to `fd` in one synchronous write
 * at its end (docs/architecture.md "Observability"): a busy worker makes one write for the many
 * requests of a turn instead of one per line, a quiet one's line still leaves within the turn, and
 * no write is ever in flight, so the lines still waiting are written when the process exits — on
 * SIGTERM's drain (process.exit) and on an uncaught exception alike. Only a SIGKILL loses a turn.
 */
export function lineBufferFor(fd: number): LineBuffer {
  let buffer = buffers.get(fd);
  if (!buffer) buffers.set(fd, (buffer = createLineBuffer(fd)));
  return buffer;
}

/** One per file descriptor and process, so lines of every logger on it stay in order. */
const buffers = new Map<number, LineBuffer>();

function createLineBuffer(fd: number): LineBuffer {
  let pending: string[] = [];
  let size = 0;
  let scheduled = false;
  const flushSync = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const data = Buffer.from(pending.length === 1 ? pending[0]! : pending.join(''));
    pending = [];
    size = 0;
    writeFully(fd, data);
  };
  process.on('exit', flushSync);
  return {
    write(line) {
      pending.push(line);
      size += line.length;
      if (size >= MAX_PENDING) flushSync();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flushSync);
      }
    },
    flushSync,
  };
}

/** Writes all of `data`, waiting while a non-blocking pipe is full; a closed pipe drops it (nobody reads). */
function writeFully(fd: number, data: Buffer): void {
  let offset = 0;
  while (offset < data.length) {
    try {
      offset += writeSync(fd, data, offset);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EAGAIN' && code !== 'EBUSY') return;
      Atomics.wait(sleeper, 0, 0, FULL_PIPE_WAIT_MS);
    }
  }
}
