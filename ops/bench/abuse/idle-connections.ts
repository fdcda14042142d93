import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** What became of idle connections: opened, refused, and closed by the server within the wait. */
export interface IdleOutcome {
  opened: number;
  /** Connections that failed to open (refused, reset, or not accepted within 5 s). */
  failed: number;
  /** Opened connections the server closed before the wait ended. */
  closed: number;
  /** Seconds from opening to the server's close: the median and the last, of those closed. */
  closeMedianS: number;
  closeLastS: number;
  /** Seconds it took to open them all. */
  openSeconds: number;
}

const CONNECTING_AT_ONCE = 200;
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Opens `count` TCP connections to `port` on 127.0.0.1 (at most 200 connecting at once) that
 * never send a byte, calls `during()` once they are open, then waits until the server has
 * closed them all or `waitMs` has passed, and closes what is left. Bounded: every socket is
 * destroyed before it resolves.
 */
export async function holdIdleConnections(
  port: number,
  count: number,
  waitMs: number,
  during: () => void,
): Promise<IdleOutcome> {
  const sockets: Socket[] = [];
  const closedAfterS: number[] = [];
  let failed = 0;
  let next = 0;
  const openOne = () =>
    new Promise<void>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1' });
      const openedAt = performance.now();
      let open = false;
      const timer = setTimeout(() => socket.destroy(), CONNECT_TIMEOUT_MS);
      socket.on('connect', () => {
        clearTimeout(timer);
        open = true;
        sockets.push(socket);
        resolve();
      });
      socket.on('data', () => {}); // a 408 the server may send before closing
      socket.on('error', () => {});
      socket.on('close', () => {
        clearTimeout(timer);
        if (open) closedAfterS.push((performance.now() - openedAt) / 1000);
        else {
          failed += 1;
          resolve();
        }
      });
    });
  const started = performance.now();
  const lane = async () => {
    while (next < count) {
      next += 1;
      await openOne();
    }
  };
  await Promise.all(Array.from({ length: CONNECTING_AT_ONCE }, lane));
  const openSeconds = (performance.now() - started) / 1000;
  during();
  const deadline = started + waitMs;
  while (closedAfterS.length < sockets.length && performance.now() < deadline) await sleep(250);
  const closed = [...closedAfterS].sort((a, b) => a - b);
  for (const socket of sockets) socket.destroy();
  return {
    opened: sockets.length,
    failed,
    closed: closed.length,
    closeMedianS: closed.length ? closed[Math.floor((closed.length - 1) / 2)]! : NaN,
    closeLastS: closed.length ? closed[closed.length - 1]! : NaN,
    openSeconds,
  };
}
