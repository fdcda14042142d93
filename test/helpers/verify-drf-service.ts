/**
 * A small service shaped like Django REST Framework rather than Paceline, for verify's tests (docs/verify.md
 * "Identity is checked"): it has no /api/events/ and states no RateLimit-Policy. DRF 3.14's answers:
 * TokenAuthentication (`Authorization: Token <40 hex>`; another scheme is ignored, so the request is
 * anonymous; a key it does not know is a 401 "Invalid token."), then the view's permission, then
 * AnonRateThrottle and UserRateThrottle as SimpleRateThrottle keeps them (a sliding log per key in a cache,
 * every throttle consulted, the longest wait in `Retry-After` and the detail). A path outside DRF is
 * Django's 404 page, never throttled.
 *   GET /api/tasks/    anyone; the path verify's limits check requests
 *   GET /api/profile/  signed-in users only (401 without a token): a path for `--identity-path`
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { USERS } from './verify-model-service.js';

export interface DrfRates {
  anon: { limit: number; windowS: number };
  user: { limit: number; windowS: number };
  /**
   * The cache is one round trip away and nothing holds a key between its get and its set, as with DRF's
   * cache throttle over Redis: concurrent requests each read a free slot, and all but one write is lost.
   */
  racy: boolean;
}

type Who = { user: string } | { anonymous: true } | { invalid: string };
interface Answer {
  status: number;
  body: string;
  headers: Record<string, string>;
}

const TOKENS = new Map(Object.keys(USERS).map((name) => [randomBytes(20).toString('hex'), name]));
const TASKS = Array.from({ length: 25 }, (_, i) => ({ id: i + 1, title: `Task ${i + 1}` }));

/** TokenAuthentication: the keyword compared without case, one key after it, the key looked up. */
function authenticate(header: string | undefined): Who {
  const words = (header ?? '').split(' ').filter((word) => word !== '');
  if (words.length === 0 || words[0]!.toLowerCase() !== 'token') return { anonymous: true };
  if (words.length === 1) return { invalid: 'Invalid token header. No credentials provided.' };
  if (words.length > 2) return { invalid: 'Invalid token header. Token string should not contain spaces.' };
  const user = TOKENS.get(words[1]!);
  return user === undefined ? { invalid: 'Invalid token.' } : { user };
}

/** SimpleRateThrottle over a cache: `allow` records the request when it admits it; `wait` is DRF's `wait()`. */
function throttle(scope: string, rate: { limit: number; windowS: number }, racy: boolean) {
  const cache = new Map<string, number[]>();
  const roundTrip = () => (racy ? sleep(1) : undefined);
  return async (key: string | undefined): Promise<{ allowed: boolean; waitS: number | null }> => {
    if (key === undefined) return { allowed: true, waitS: null };
    await roundTrip();
    const history = [...(cache.get(`throttle_${scope}_${key}`) ?? [])];
    // DRF's `time.time()` to the microsecond, here on the monotonic clock verify times on (test/helpers/verify-model-service.ts).
    const now = performance.now() / 1000;
    while (history.length > 0 && history.at(-1)! <= now - rate.windowS) history.pop();
    if (history.length >= rate.limit) {
      const available = rate.limit - history.length + 1;
      const remaining = rate.windowS - (now - history.at(-1)!);
      return { allowed: false, waitS: available <= 0 ? null : remaining / available };
    }
    history.unshift(now);
    await roundTrip();
    cache.set(`throttle_${scope}_${key}`, history);
    return { allowed: true, waitS: null };
  };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  body: JSON.stringify(body),
  headers: { 'Content-Type': 'application/json', Vary: 'Accept', Allow: 'GET, HEAD, OPTIONS', ...headers },
});

/** Serves the DRF-shaped API on 127.0.0.1:`port` (0 for any). */
export function serveDrf(rates: DrfRates, port: number): Promise<http.Server> {
  const anon = throttle('anon', rates.anon, rates.racy);
  const user = throttle('user', rates.user, rates.racy);
  const handle = async (request: http.IncomingMessage, body: string): Promise<Answer> => {
    const url = new URL(request.url ?? '/', `http://${request.headers.host ?? '127.0.0.1'}`);
    if (url.pathname === '/api/auth/token/' && request.method === 'POST') {
      const { username, password } = JSON.parse(body || '{}') as Record<string, unknown>;
      const key = [...TOKENS].find(([, name]) => name === username && USERS[name] === password)?.[0];
      return key === undefined
        ? json(400, { non_field_errors: ['Unable to log in with provided credentials.'] })
        : json(200, { token: key });
    }
    if (url.pathname !== '/api/tasks/' && url.pathname !== '/api/profile/') {
      const page = '<h1>Not Found</h1><p>The requested resource was not found on this server.</p>';
      return { status: 404, body: page, headers: { 'Content-Type': 'text/html; charset=utf-8' } };
    }
    const who = authenticate(request.headers.authorization);
    if ('invalid' in who) return json(401, { detail: who.invalid }, { 'WWW-Authenticate': 'Token' });
    if (url.pathname === '/api/profile/' && !('user' in who)) {
      const detail = 'Authentication credentials were not provided.';
      return json(401, { detail }, { 'WWW-Authenticate': 'Token' });
    }
    const ip = request.socket.remoteAddress ?? '';
    const decisions = await Promise.all([anon('user' in who ? undefined : ip), user('user' in who ? who.user : ip)]);
    if (decisions.some((d) => !d.allowed)) {
      const waits = decisions.filter((d) => !d.allowed && d.waitS !== null).map((d) => Math.ceil(d.waitS!));
      if (waits.length === 0) return json(429, { detail: 'Request was throttled.' });
      const s = Math.max(...waits);
      const detail = `Request was throttled. Expected available in ${s} second${s === 1 ? '' : 's'}.`;
      return json(429, { detail }, { 'Retry-After': String(s) });
    }
    if (request.method !== 'GET') return json(405, { detail: `Method "${request.method}" not allowed.` });
    if (url.pathname === '/api/profile/') return json(200, { username: 'user' in who ? who.user : '' });
    return json(200, listPage(url));
  };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const answer = await handle(request, Buffer.concat(chunks).toString());
      response.writeHead(answer.status, answer.headers);
      response.end(answer.body);
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

/** PageNumberPagination, 10 a page. */
function listPage(url: URL) {
  const page = Number(url.searchParams.get('page') ?? 1);
  const link = (n: number) => `http://${url.host}/api/tasks/${n === 1 ? '' : `?page=${n}`}`;
  return {
    count: TASKS.length,
    next: page * 10 < TASKS.length ? link(page + 1) : null,
    previous: page > 1 ? link(page - 1) : null,
    results: TASKS.slice((page - 1) * 10, page * 10),
  };
}
