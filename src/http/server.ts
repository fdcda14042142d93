import { createServer, type Server } from 'node:http';
import { Server as NetServer } from 'node:net';
import { childDrainBudgetMs } from '../config.js';
import type { Deps } from '../deps.js';
import { createApp } from './app.js';
import { answerClientErrors } from './client-errors.js';

/** Advertised to clients as `Keep-Alive: timeout=5`; an idle connection is closed after it. */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * Serves the API on PORT (the primary shares the listening socket among its web children).
 * `close()` stops accepting, lets in-flight requests finish and idle keep-alive connections run
 * out (answering what still arrives on them with `Connection: close`), within the child's drain
 * budget.
 */
export async function serve(deps: Deps): Promise<{ close(): Promise<void> }> {
  const { config } = deps;
  const handle = createApp(deps).callback();
  let draining = false;
  const http = createServer({ keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS }, (req, res) => {
    if (draining) res.setHeader('Connection', 'close');
    void handle(req, res);
  });
  answerClientErrors(http);
  // A listen error (the port taken meanwhile) ends the start with one line, not an unhandled event.
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(config.PORT, config.HOST, () => {
      http.off('error', reject);
      resolve();
    });
  });
  return {
    close() {
      draining = true;
      return closeServer(http, childDrainBudgetMs(config) - 500);
    },
  };
}

/**
 * Stops accepting and waits until every connection has ended, or closes them after `timeoutMs`.
 * Idle keep-alive connections are not closed at once (as http's `close()` does): a client may be
 * sending a request on one at this very moment and would see the connection reset under it.
 * They end by the timeout the client was told, or after one more response with `Connection: close`.
 */
function closeServer(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(
      () => {
        server.closeAllConnections();
        resolve();
      },
      Math.max(timeoutMs, 100),
    );
    NetServer.prototype.close.call(server, () => {
      clearTimeout(force);
      resolve();
    });
  });
}
