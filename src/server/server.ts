import { createServer, type RequestListener, type Server } from 'node:http';
import { Server as NetServer } from 'node:net';
import { childDrainBudgetMs, type Config } from '../settings/config.js';
import type { Deps } from '../deps.js';
import { addAcceptors, type Acceptors } from './acceptors.js';
import { answerClientErrors } from './client-errors.js';
import { takeTurns } from './turns.js';
import { enforceHeaderDeadline } from './header-deadline.js';

/** Advertised to clients as `Keep-Alive: timeout=5`; an idle connection is closed after it. */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * The API's HTTP server, unstarted, with its limits: a request's headers must arrive within
 * HTTP_HEADERS_TIMEOUT_MS and the whole request within HTTP_REQUEST_TIMEOUT_MS (else 408 and the
 * connection is closed), at most HTTP_MAX_CONNECTIONS connections are open at once (more are
 * closed as they are accepted), and an idle keep-alive connection is closed after 5 s. Errors of
 * requests the parser refuses are answered in JSON.
 */
export function createApiServer(
  config: Pick<Config, 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_REQUEST_TIMEOUT_MS' | 'HTTP_MAX_CONNECTIONS'>,
  listener: RequestListener,
): Server {
  // Node checks both timeouts on this period (30 s by default), so a short limit needs a short one.
  const checkEveryMs = Math.max(10, Math.min(1_000, Math.floor(config.HTTP_HEADERS_TIMEOUT_MS / 4)));
  const server = createServer(
    {
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: checkEveryMs,
    },
    listener,
  );
  server.maxConnections = config.HTTP_MAX_CONNECTIONS;
  answerClientErrors(server);
  enforceHeaderDeadline(server, {
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
    checkEveryMs,
    keepAliveMs: KEEP_ALIVE_TIMEOUT_MS,
  });
  return server;
}

/**
 * Serves `handle` (the API's listener, src/listener/listener.ts) on PORT (the primary shares the listening socket among its web children).
 * `close()` stops accepting, lets in-flight requests finish and idle keep-alive connections run
 * out (answering what still arrives on them with `Connection: close`), within the child's drain
 * budget.
 */
export async function serve(
  { config, metrics }: Pick<Deps, 'config' | 'metrics'>,
  handle: RequestListener & { close(): void },
): Promise<{ close(): Promise<void> }> {
  let draining = false;
  const http = createApiServer(config, (req, res) => {
    if (draining) res.setHeader('Connection', 'close');
    handle(req, res);
  });
  const budgetMs = childDrainBudgetMs(config) - 500;
  // A listen error (the port taken meanwhile) ends the start with one line, not an unhandled event.
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen({ port: config.PORT, host: config.HOST, backlog: LISTEN_BACKLOG, ...door(config) }, () => {
      http.off('error', reject);
      resolve();
    });
  });
  if (config.ADMISSION_CONTROL === 'on') takeTurns(http, () => metrics.keptDeferred.inc());
  const acceptors: Acceptors | undefined =
    config.CONNECTION_DOOR === 'shared' ? addAcceptors(http, LISTEN_BACKLOG) : undefined;
  return {
    close() {
      draining = true;
      return closeServer(http, budgetMs, acceptors).finally(() => handle.close());
    },
  };
}

/**
 * The listening socket's queue of connections not yet accepted. Node's default, 511, overflows when a crowd of
 * clients connects at once (2,000 in the overload bench's flood): the kernel then drops their SYNs, and a load
 * balancer's probe among them waits for its retry, a second later. The kernel caps it at net.core.somaxconn
 * (docs/throttling.md "Past capacity: admission and shedding").
 */
const LISTEN_BACKLOG = 4_096;

/**
 * How a web worker of the cluster takes its connections (CONNECTION_DOOR; docs/throttling.md "Past capacity:
 * admission and shedding"): `shared` and `cluster` listen as node:cluster has the primary say (src/cluster/primary.ts
 * sets its scheduling policy); `reuseport`, for the overload bench's comparison only, gives each worker a listening
 * socket of its own with SO_REUSEPORT (`exclusive`, so node:cluster does not share the primary's).
 */
function door(config: Pick<Config, 'CONNECTION_DOOR' | 'PORT'>): { reusePort?: true; exclusive?: true } {
  // PORT=0 asks for any free port: one, shared by node:cluster, rather than a different one per worker.
  return config.CONNECTION_DOOR === 'reuseport' && config.PORT !== 0 ? { reusePort: true, exclusive: true } : {};
}

/**
 * Stops accepting and waits until every connection has ended, or closes them after `timeoutMs`.
 * Idle keep-alive connections are not closed at once (as http's `close()` does): a client may be
 * sending a request on one at this very moment and would see the connection reset under it.
 * They end by the timeout the client was told, or after one more response with `Connection: close`.
 */
function closeServer(server: Server, timeoutMs: number, acceptors?: Acceptors): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(
      () => {
        server.closeAllConnections();
        resolve();
      },
      Math.max(timeoutMs, 100),
    );
    const own = new Promise<void>((closed) => NetServer.prototype.close.call(server, () => closed()));
    void Promise.all([own, acceptors?.close()]).then(() => {
      clearTimeout(force);
      resolve();
    });
  });
}
