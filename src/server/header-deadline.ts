import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** What a deadline past Node's own is allowed on top of it, so Node's 408 comes first whenever it works. */
const GRACE_MS = 500;

/**
 * A second, independent enforcement of the headers timeout, per connection: a connection whose
 * next request's headers have not arrived within `headersTimeoutMs` + `checkEveryMs` + 0.5 s of
 * its opening (or of its last answer, plus `keepAliveMs`) is answered 408 by the server's
 * `clientError` handler and closed. Node enforces the limit only for the connections in one list
 * per server that a timer walks; one missing from it, or a walk that does not run, is never timed
 * out (nor by requestTimeout), and trickling clients were once all left open that way
 * (docs/security.md "Slow clients"). This deadline depends on neither.
 */
export function enforceHeaderDeadline(
  server: Server,
  limits: { headersTimeoutMs: number; checkEveryMs: number; keepAliveMs: number },
): void {
  const firstWait = limits.headersTimeoutMs + limits.checkEveryMs + GRACE_MS;
  const deadlines = new WeakMap<Socket, NodeJS.Timeout>();
  const arm = (socket: Socket, waitMs: number) => {
    clearTimeout(deadlines.get(socket));
    const timer = setTimeout(() => expire(server, socket), waitMs);
    timer.unref();
    deadlines.set(socket, timer);
  };
  server.on('connection', (socket: Socket) => {
    arm(socket, firstWait);
    socket.once('close', () => clearTimeout(deadlines.get(socket)));
  });
  // Requests whose answer is not yet written, per connection (more than one when the client pipelines).
  const open = new WeakMap<Socket, number>();
  server.on('request', (req, res) => {
    const socket = req.socket;
    clearTimeout(deadlines.get(socket));
    open.set(socket, (open.get(socket) ?? 0) + 1);
    // Once all are answered, the connection waits for its next request: idle for keepAliveMs at most, then its headers.
    res.once('close', () => {
      const left = (open.get(socket) ?? 1) - 1;
      open.set(socket, left);
      if (left === 0 && !socket.destroyed) arm(socket, firstWait + limits.keepAliveMs);
    });
  });
}

function expire(server: Server, socket: Socket): void {
  if (socket.destroyed) return;
  const timeout = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
  server.emit('clientError', timeout, socket);
  // The answer is the last thing written; whatever the client still sends is not read.
  socket.destroySoon();
}
