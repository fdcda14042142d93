import { createServer, type Server } from 'node:http';
import { answerClientErrors } from './http/client-errors.js';
import { Server as NetServer } from 'node:net';
import { childDrainBudgetMs, type Config } from './config.js';
import { reportMetricsToPrimary } from './cluster/metrics-reporter.js';
import { buildDeps } from './deps.js';
import { createApp } from './http/app.js';

/** Advertised to clients as `Keep-Alive: timeout=5`; an idle connection is closed after it. */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * A web child: serves the API on PORT (the primary shares the listening socket among its web
 * children). On SIGTERM/SIGINT it stops accepting, lets in-flight requests finish, lets idle
 * keep-alive connections run out (answering what still arrives on them with `Connection:
 * close`), then closes its pools and exits 0, within SHUTDOWN_TIMEOUT_MS.
 */
export async function runWebChild(config: Config): Promise<void> {
  const { deps, close } = await buildDeps(config, 'web');
  const reporter = reportMetricsToPrimary(deps.metrics.registry);
  const handle = createApp(deps).callback();
  let draining: Promise<void> | undefined;
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
  process.send?.({ type: 'ready' });

  const drain = async () => {
    deps.logger.info('draining');
    await closeServer(http, childDrainBudgetMs(config) - 500);
    await close();
    await reporter.sendFinal();
    process.exit(0);
  };
  const stop = () => void (draining ??= drain());
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
}

/**
 * Stops accepting and waits until every connection has ended, or closes them after `timeoutMs`.
 * Idle keep-alive connections are not closed at once (as http's `close()` does): a client may be
 * sending a request on one at this very moment and would see the connection reset under it.
 * They end by the timeout the client was told, or after one more response with `Connection: close`.
 */
function closeServer(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, Math.max(timeoutMs, 100));
    NetServer.prototype.close.call(server, () => {
      clearTimeout(force);
      resolve();
    });
  });
}
