import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Config } from '../settings/config.js';
import type { MetricsAuth } from '../settings/config-values.js';

type Exposition = { text: string; contentType: string };
export type MetricsLimits = Pick<Config, 'METRICS_AUTH' | 'METRICS_HEADERS_TIMEOUT_MS' | 'METRICS_MAX_CONNECTIONS'>;

/**
 * The metrics port's HTTP server, unstarted: GET (and HEAD) /metrics answers `collect()`, another
 * method on it 405 with `Allow`, any other path 404.
 * It is no way in (docs/configuration.md "Metrics"): a request must arrive whole within
 * METRICS_HEADERS_TIMEOUT_MS (else 408 and the connection is closed, idle or half-sent alike),
 * at most METRICS_MAX_CONNECTIONS are open at once (more are closed as they are accepted), and
 * with METRICS_AUTH a scrape without its credentials gets 401 and no metrics.
 */
export function createMetricsServer(
  limits: MetricsLimits,
  collect: () => Promise<Exposition>,
  onError: (error: unknown) => void,
): Server {
  const timeout = limits.METRICS_HEADERS_TIMEOUT_MS;
  const authorized = authorizer(limits.METRICS_AUTH);
  const server = createServer(
    {
      headersTimeout: timeout,
      requestTimeout: timeout,
      keepAliveTimeout: Math.min(timeout, 5_000),
      // Node checks both timeouts on this period (30 s by default), so a short limit needs a short one.
      connectionsCheckingInterval: Math.max(10, Math.min(1_000, Math.floor(timeout / 4))),
    },
    (req, res) => answer(req, res, authorized, collect, onError),
  );
  server.maxConnections = limits.METRICS_MAX_CONNECTIONS;
  // A connection refused by the parser or timed out is closed at once: nothing more is read from it.
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return void socket.destroy();
    const status = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request';
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`, () => socket.destroy());
  });
  return server;
}

function answer(
  req: IncomingMessage,
  res: ServerResponse,
  authorized: ((header: string | undefined) => { ok: true } | { ok: false; challenge: string }) | undefined,
  collect: () => Promise<Exposition>,
  onError: (error: unknown) => void,
): void {
  if (authorized) {
    const verdict = authorized(req.headers.authorization);
    if (!verdict.ok) {
      return void res
        .writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': verdict.challenge })
        .end('Unauthorized: /metrics needs the credentials of METRICS_AUTH\n');
    }
  }
  if (req.url?.split('?')[0] !== '/metrics') {
    return void res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not found: metrics are at /metrics\n');
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return void res
      .writeHead(405, { 'Content-Type': 'text/plain', Allow: 'GET, HEAD' })
      .end(`Method ${req.method} not allowed: /metrics answers GET and HEAD\n`);
  }
  collect().then(
    ({ text, contentType }) => res.writeHead(200, { 'Content-Type': contentType }).end(text),
    (error: unknown) => {
      onError(error);
      res.writeHead(500, { 'Content-Type': 'text/plain' }).end('metrics collection failed\n');
    },
  );
}

/**
 * Checks an Authorization header against METRICS_AUTH in constant time (digests compared, so
 * neither the length nor a prefix of the secret shows in the time taken).
 */
function authorizer(auth: MetricsAuth | undefined) {
  if (!auth) return undefined;
  const expected =
    auth.scheme === 'bearer'
      ? `Bearer ${auth.token}`
      : `Basic ${Buffer.from(`${auth.user}:${auth.password}`).toString('base64')}`;
  const challenge = auth.scheme === 'bearer' ? 'Bearer realm="metrics"' : 'Basic realm="metrics", charset="UTF-8"';
  const want = digest(expected);
  return (header: string | undefined) =>
    header !== undefined && timingSafeEqual(digest(header.trim()), want)
      ? ({ ok: true } as const)
      : ({ ok: false, challenge } as const);
}

const digest = (text: string) => createHash('sha256').update(text).digest();
