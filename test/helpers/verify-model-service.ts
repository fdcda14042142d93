/**
 * A small in-memory service that speaks the API contract `verify` checks (login, the task list in its three
 * styles, task reads and writes, Idempotency-Key, the event feed, 429 with Retry-After). Honest by default;
 * each fault in faulty-services.ts swaps one part of it, so the verify tests can show each fault is caught.
 */
import http from 'node:http';

export interface Decision {
  allowed: boolean;
  retryAfterS: number;
}
export interface Limiter {
  policy: { limit: number; windowS: number };
  /** May wait (a limiter over a network cache); the model awaits it. */
  check(identity: string): Decision | Promise<Decision>;
}
interface Task {
  id: number;
  title: string;
}
export interface Parts {
  limiter: Limiter;
  /** The word `Authorization` must start with (`Bearer`; DRF's TokenAuthentication takes only `Token`). */
  scheme?: string;
  /** Lists tasks for the `cursor` style; the honest one keys the cursor on the last id. */
  cursorPage?: (tasks: Task[], cursor: string, size: number, descending: boolean) => CursorPage;
}
export interface CursorPage {
  results: Task[];
  next: string | null;
  previous: string | null;
}
export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export const USERS: Record<string, string> = { alpha: 'alpha-pass', beta: 'beta-pass' };

/**
 * A sliding log per identity, exact within this process: on the monotonic clock to the microsecond, as verify
 * times requests (`Date.now()` truncates to the millisecond, and a log on it lets an admission leave up to 1 ms
 * early).
 */
export function slidingLog(limit: number, windowS: number): Limiter {
  const logs = new Map<string, number[]>();
  return {
    policy: { limit, windowS },
    check(identity) {
      const now = performance.now();
      const log = (logs.get(identity) ?? []).filter((t) => t > now - windowS * 1000);
      logs.set(identity, log);
      if (log.length >= limit)
        return { allowed: false, retryAfterS: Math.max(1, Math.ceil((log[0]! + windowS * 1000 - now) / 1000)) };
      log.push(now);
      return { allowed: true, retryAfterS: 0 };
    },
  };
}

/** A cursor token: the id to continue from, and whether it leads back (`previous`) or on (`next`). */
const encode = (key: number, back: boolean) => Buffer.from(JSON.stringify({ key, back })).toString('base64url');

/** The honest cursor: keyed on the id, forward after it or (a `previous` link) the page just before it. */
export function keyedCursorPage(tasks: Task[], cursor: string, size: number, descending: boolean): CursorPage {
  const at =
    cursor === ''
      ? undefined
      : (JSON.parse(Buffer.from(cursor, 'base64url').toString()) as { key: number; back: boolean });
  const ordered = descending ? [...tasks].reverse() : tasks;
  const beyond = (t: Task, key: number) => (descending ? t.id < key : t.id > key);
  const ahead = (t: Task, key: number) => (descending ? t.id > key : t.id < key);
  if (at?.back) {
    const before = ordered.filter((t) => ahead(t, at.key));
    const results = before.slice(-size);
    const more = before.length > size;
    return {
      results,
      previous: more ? encode(results[0]!.id, true) : null,
      next: encode(results.at(-1)?.id ?? at.key, false),
    };
  }
  const rest = at === undefined ? ordered : ordered.filter((t) => beyond(t, at.key));
  const results = rest.slice(0, size);
  const more = rest.length > size;
  return {
    results,
    next: more ? encode(results.at(-1)!.id, false) : null,
    previous: at === undefined ? null : encode(results[0]?.id ?? at.key, true),
  };
}

/** The service's state: one per process, shared by every "host" a fault puts in front of it. */
export class Model {
  private readonly tasks = new Map<number, Task>();
  private readonly events: { position: number; task_id: number; type: string }[] = [];
  private readonly replies = new Map<string, Answer>();
  private nextId = 1;

  constructor(private readonly parts: Parts) {}

  async handle(
    method: string,
    url: URL,
    headers: http.IncomingHttpHeaders,
    body: Record<string, unknown>,
    address = 'anon',
  ): Promise<Answer> {
    if (url.pathname === '/api/auth/token/' && method === 'POST') {
      const ok = USERS[String(body.username)] === body.password;
      return ok
        ? { status: 200, body: { token: `token-${String(body.username)}` } }
        : { status: 400, body: { non_field_errors: ['bad'] } };
    }
    // As DRF does, an Authorization header of another scheme is ignored: the request is anonymous.
    const [scheme, token] = (headers.authorization ?? '').split(' ');
    const user = scheme === (this.parts.scheme ?? 'Bearer') ? /^token-(\w+)$/.exec(token ?? '')?.[1] : undefined;
    const identity = user === undefined ? `ip:${address}` : `user:${user}`;
    const decision = await this.parts.limiter.check(identity);
    const { limit, windowS } = this.parts.limiter.policy;
    const scope = user === undefined ? 'anon' : 'user';
    const policy = { 'RateLimit-Policy': `"${scope}";q=${limit};w=${windowS}` };
    if (!decision.allowed) {
      const s = decision.retryAfterS;
      const detail = `Request was throttled. Expected available in ${s} second${s === 1 ? '' : 's'}.`;
      return { status: 429, body: { detail }, headers: { ...policy, 'Retry-After': String(s) } };
    }
    const needsUser = method !== 'GET' || url.pathname === '/api/events/';
    const answer =
      needsUser && user === undefined
        ? { status: 401, body: { detail: 'Authentication credentials were not provided.' } }
        : method === 'GET'
          ? this.read(url)
          : this.write(method, url, headers, body);
    return { ...answer, headers: { ...policy, ...answer.headers } };
  }

  private read(url: URL): Answer {
    const q = url.searchParams;
    const id = /^\/api\/tasks\/(\d+)\/$/.exec(url.pathname)?.[1];
    if (id !== undefined) {
      const task = this.tasks.get(Number(id));
      return task ? { status: 200, body: task } : { status: 404, body: { detail: 'Not found.' } };
    }
    if (url.pathname === '/api/events/') {
      const after = Number(q.get('after') ?? 0);
      const results = this.events.filter((e) => e.position > after).slice(0, Number(q.get('limit') ?? 10));
      const next = new URL(url);
      next.searchParams.set('after', String(results.at(-1)?.position ?? after));
      return { status: 200, body: { next: next.href, results } };
    }
    if (url.pathname !== '/api/tasks/') return { status: 404, body: { detail: 'Not found.' } };
    return { status: 200, body: this.list(url) };
  }

  private list(url: URL) {
    const q = url.searchParams;
    const all = [...this.tasks.values()];
    const size = Number(q.get('page_size') ?? q.get('limit') ?? 10);
    const link = (set: Record<string, string>) => {
      const next = new URL(url);
      for (const [k, v] of Object.entries(set)) next.searchParams.set(k, v);
      return next.href;
    };
    if (q.has('cursor')) {
      const page = (this.parts.cursorPage ?? keyedCursorPage)(all, q.get('cursor')!, size, q.get('ordering') === '-id');
      const to = (cursor: string | null) => (cursor === null ? null : link({ cursor }));
      return { next: to(page.next), previous: to(page.previous), results: page.results };
    }
    const offset = q.has('limit') ? Number(q.get('offset') ?? 0) : (Number(q.get('page') ?? 1) - 1) * size;
    const results = all.slice(offset, offset + size);
    const more = offset + size < all.length;
    const next = !more
      ? null
      : q.has('limit')
        ? link({ offset: String(offset + size) })
        : link({ page: String(offset / size + 2) });
    return { count: all.length, next, previous: null, results };
  }

  private write(method: string, url: URL, headers: http.IncomingHttpHeaders, body: Record<string, unknown>): Answer {
    const key = headers['idempotency-key'];
    if (method === 'POST' && url.pathname === '/api/tasks/') {
      if (typeof key === 'string' && this.replies.has(key)) return this.replies.get(key)!;
      const task = { id: this.nextId++, title: String(body.title) };
      this.tasks.set(task.id, task);
      this.events.push({ position: this.events.length + 1, task_id: task.id, type: 'TaskCreated' });
      const answer = { status: 201, body: task };
      if (typeof key === 'string') this.replies.set(key, answer);
      return answer;
    }
    const id = Number(/^\/api\/tasks\/(\d+)\/$/.exec(url.pathname)?.[1]);
    const task = this.tasks.get(id);
    if (task === undefined) return { status: 404, body: { detail: 'Not found.' } };
    if (method === 'DELETE') {
      this.tasks.delete(id);
      this.events.push({ position: this.events.length + 1, task_id: id, type: 'TaskDeleted' });
      return { status: 204 };
    }
    task.title = String(body.title ?? task.title);
    this.events.push({ position: this.events.length + 1, task_id: id, type: 'TaskUpdated' });
    return { status: 200, body: task };
  }
}

/**
 * Serves `model` over HTTP on `port` (127.0.0.1; 0 for any). With `cacheTtlMs`, this server (one "host")
 * answers a GET it answered within that time from its own memory, as a read cache with a TTL would.
 */
export function serve(model: Model, port: number, cacheTtlMs = 0): Promise<http.Server> {
  const cache = new Map<string, { answer: Answer; until: number }>();
  const handle = async (request: http.IncomingMessage, url: URL, body: Record<string, unknown>) => {
    const method = request.method ?? 'GET';
    const key = url.pathname + url.search + (request.headers.authorization ?? '');
    const hit = method === 'GET' ? cache.get(key) : undefined;
    if (hit !== undefined && hit.until > Date.now()) return hit.answer;
    const answer = await model.handle(method, url, request.headers, body, request.socket.remoteAddress);
    if (method === 'GET' && cacheTtlMs > 0 && answer.status !== 429)
      cache.set(key, { answer, until: Date.now() + cacheTtlMs });
    return answer;
  };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const text = Buffer.concat(chunks).toString();
      const body = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
      const url = new URL(request.url ?? '/', `http://${request.headers.host ?? '127.0.0.1'}`);
      const answer = await handle(request, url, body);
      response.writeHead(answer.status, { 'Content-Type': 'application/json', ...answer.headers });
      response.end(answer.body === undefined ? undefined : JSON.stringify(answer.body));
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}
