import type { Server } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/**
 * How many descriptors of PORT's one listening socket each web worker polls (docs/throttling.md "Past capacity:
 * newcomers take turns"). libuv accepts one connection per descriptor per turn of the event loop, and a turn under
 * a crowd of kept connections serves every request that arrived meanwhile (tens of milliseconds), so with one
 * descriptor a burst of new connections waits in the kernel's queue, in order, one per turn: 2,000 at once took
 * about 8 s to be accepted, and a newcomer behind them waited as long. Each descriptor is polled on its own, so a
 * turn accepts up to this many.
 */
export const ACCEPTORS_PER_WORKER = 16;

/** A web worker's request for more descriptors of its listening socket, and the primary's answer with one. */
export const DESCRIPTORS_WANTED = 'listen-descriptors-wanted';
export const DESCRIPTOR = 'listen-descriptor';

export interface Acceptors {
  /** Stops accepting on every added descriptor; resolves once each one's connections have ended. */
  close(): Promise<void>;
}

/**
 * Asks the primary for ACCEPTORS_PER_WORKER - 1 more descriptors of the socket `http` listens on, and accepts on
 * each one into `http` (its 'connection' event, as node:http documents for connections it did not accept itself),
 * within `http.maxConnections` counted over all of them. Without a primary, or when it sends none, `http`
 * accepts alone, as before.
 */
export function addAcceptors(http: Server, backlog: number): Acceptors {
  const acceptors: NetServer[] = [];
  let closed = false;
  let open = 0;
  http.on('connection', (socket: Socket) => {
    open += 1;
    socket.once('close', () => (open -= 1));
  });
  const take = (socket: Socket) => {
    // Counted before its 'connection' event: the cap applies to the connections already open.
    if (open >= http.maxConnections) {
      socket.destroy();
      return;
    }
    http.emit('connection', socket);
  };
  const onMessage = (message: { type?: string }, handle: unknown) => {
    if (message?.type !== DESCRIPTOR || !isSocket(handle) || closed) return;
    const acceptor = new NetServer(take);
    acceptor.on('error', () => acceptor.close());
    acceptor.listen(handle, backlog);
    acceptors.push(acceptor);
  };
  if (process.send && process.connected) {
    process.on('message', onMessage);
    process.send({ type: DESCRIPTORS_WANTED, count: ACCEPTORS_PER_WORKER - 1 });
  }
  return {
    close() {
      closed = true;
      process.off('message', onMessage);
      return Promise.all(acceptors.map((a) => new Promise<void>((resolve) => a.close(() => resolve())))).then(() => {});
    },
  };
}

const isSocket = (handle: unknown): handle is Socket =>
  typeof handle === 'object' && handle !== null && 'remoteAddress' in handle;
