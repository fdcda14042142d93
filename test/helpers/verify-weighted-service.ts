/**
 * `node --import tsx test/helpers/verify-weighted-service.ts <fault> <port>`: what verify's limits check needs of a
 * service (a login, a limited GET, `RateLimit-Policy`, `RateLimit`, 429 with `Retry-After`) with costs and an
 * override, on 127.0.0.1:<port>, until killed; prints `listening <port>` when ready. A page costs a unit per 100
 * rows asked for (`page_size`), as Paceline's may (docs/throttling.md "Cost: requests that weigh more"); each user
 * has a sliding log of units over 2 s: alpha 30 (the settings' rate), beta 15 (an override's).
 *   honest               exact in units
 *   one-unit-left        admits a request while one unit is left, then records its whole cost: a window holds up to
 *                        the limit plus the cost less one
 *   override-unenforced  states beta's override (15) on every answer but counts beta by the settings' 30
 */
import http from 'node:http';

const [fault = 'honest', portText = '0'] = process.argv.slice(2);
const WINDOW_MS = 2_000;
const USERS: Record<string, { password: string; limit: number }> = {
  alpha: { password: 'alpha-pass', limit: 30 },
  beta: { password: 'beta-pass', limit: 15 },
};
const ANON_LIMIT = 100;
/** Each client's log: one instant per unit admitted, on the monotonic clock (see test/helpers/verify-model-service.ts). */
const logs = new Map<string, number[]>();

interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

function decide(key: string, enforced: number, cost: number) {
  const now = performance.now();
  const log = (logs.get(key) ?? []).filter((t) => t > now - WINDOW_MS);
  logs.set(key, log);
  const needs = fault === 'one-unit-left' ? 1 : cost;
  if (log.length + needs <= enforced) {
    log.push(...Array<number>(cost).fill(now));
    return { allowed: true, used: log.length, retryAfterS: 0 };
  }
  // The units that must leave the window before this cost fits: the oldest of them leaves last.
  const leaving = log.length + cost - enforced;
  const retryAfterS = Math.max(1, Math.ceil((log[leaving - 1]! + WINDOW_MS - now) / 1000));
  return { allowed: false, used: log.length, retryAfterS };
}

function limited(request: http.IncomingMessage, url: URL): Answer {
  const name = /^Bearer token-(\w+)$/.exec(request.headers.authorization ?? '')?.[1];
  const user = name === undefined ? undefined : USERS[name];
  const scope = user ? 'user' : 'anon';
  const stated = user?.limit ?? ANON_LIMIT;
  const enforced = fault === 'override-unenforced' && name === 'beta' ? USERS.alpha!.limit : stated;
  const cost = Math.max(1, Math.ceil(Number(url.searchParams.get('page_size') ?? 10) / 100));
  const key = user ? `user:${name}` : `address:${request.socket.remoteAddress}`;
  const { allowed, used, retryAfterS } = decide(key, enforced, cost);
  const headers = {
    'RateLimit-Policy': `"${scope}";q=${stated};w=${WINDOW_MS / 1000}`,
    RateLimit: `"${scope}";r=${Math.max(0, stated - used)};t=${retryAfterS}`,
  };
  if (allowed) return { status: 200, headers, body: { next: null, previous: null, results: [] } };
  const detail = `Request was throttled. Expected available in ${retryAfterS} second${retryAfterS === 1 ? '' : 's'}.`;
  return { status: 429, headers: { ...headers, 'Retry-After': String(retryAfterS) }, body: { detail } };
}

function logIn(text: string): Answer {
  const { username, password } = JSON.parse(text || '{}') as { username?: string; password?: string };
  const user = username === undefined ? undefined : USERS[username];
  if (user === undefined || user.password !== password) return { status: 400, body: { non_field_errors: ['bad'] } };
  return { status: 200, body: { token: `token-${username}` } };
}

const server = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const answer =
      request.method === 'POST' && url.pathname === '/api/auth/token/'
        ? logIn(Buffer.concat(chunks).toString())
        : limited(request, url);
    response.writeHead(answer.status, { 'Content-Type': 'application/json', ...answer.headers });
    response.end(JSON.stringify(answer.body));
  });
});
server.listen(Number(portText), '127.0.0.1', () => console.log(`listening ${portText}`));
