import type { Server } from 'node:http';
import type { Config } from './config.js';
import { reportMetricsToPrimary } from './cluster/metrics-reporter.js';
import { buildDeps } from './deps.js';
import { createApp } from './http/app.js';

/**
 * A web child: serves the API on PORT (the primary shares the listening socket among its web
 * children). On SIGTERM/SIGINT it stops accepting, lets in-flight requests finish, then closes
 * its pools and exits 0.
 */
export async function runWebChild(config: Config): Promise<void> {
  const { deps, close } = await buildDeps(config, 'web');
  const reporter = reportMetricsToPrimary(deps.metrics.registry);
  const server = createApp(deps).callback();
  const http = (await import('node:http')).createServer({ keepAliveTimeout: 5_000 }, server);
  await new Promise<void>((resolve) => http.listen(config.PORT, config.HOST, resolve));
  process.send?.({ type: 'ready' });

  const drain = async () => {
    deps.logger.info('draining');
    await closeServer(http, config.SHUTDOWN_TIMEOUT_MS - 500);
    await close();
    await reporter.sendFinal();
    process.exit(0);
  };
  let draining: Promise<void> | undefined;
  const stop = () => void (draining ??= drain());
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
}

/** Stops accepting, closes idle keep-alive sockets, and waits for in-flight requests. */
function closeServer(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, Math.max(timeoutMs, 100));
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
