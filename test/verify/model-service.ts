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
  check(identity: string): Decision;
}
interface Task {
  id: number;
  title: string;
}
export interface Parts {
  limiter: Limiter;
  /** Lists tasks for the `cursor` style; the honest one keys the cursor on the last id. */
  cursorPage?: (
    tasks: Task[],
    cursor: string,
    size: number,
    descending: boolean,
  ) => { results: Task[]; next: string | null };
}
export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export const USERS: Record<string, string> = { alpha: 'alpha-pass', beta: 'beta-pass' };

/** A sliding log per identity, exact within this process. */
export function slidingLog(limit: number, windowS: number): Limiter {
  const logs = new Map<string, number[]>();
  return {
    policy: { limit, windowS },
    check(identity) {
      const now = Date.now();
      const log = (logs.get(identity) ?? []).filter((t) => t > now - windowS * 1000);
      logs.set(identity, log);
      if (log.length >= limit)
        return { allowed: false, retryAfterS: Math.max(1, Math.ceil((log[0]! + windowS * 1000 - now) / 1000)) };
      log.push(now);
      return { allowed: true, retryAfterS: 0 };
    },
  };
}

export function keyedCursorPage(tasks: Task[], cursor: string, size: number, descending: boolean) {
  const after = cursor === '' ? undefined : Number(Buffer.from(cursor, 'base64url').toString());
  const ordered = descending ? [...tasks].reverse() : tasks;
  const rest = after === undefined ? ordered : ordered.filter((t) => (descending ? t.id < after : t.id > after));
  const results = rest.slice(0, size);
  const more = rest.length > size;
  return { results, next: more ? Buffer.from(String(results.at(-1)!.id)).toString('base64url') : null };
}

/** The service's state: one per process, shared by every "host" a fault puts in front of it. */
export class Model {
  private readonly tasks = new Map<number, Task>();
  private readonly events: { position: number; task_id: number; type: string }[] = [];
  private readonly replies = new Map<string, Answer>();
  private nextId = 1;

  constructor(private readonly parts: Parts) {}

  handle(method: string, url: URL, headers: http.IncomingHttpHeaders, body: Record<string, unknown>): Answer {
    if (url.pathname === '/api/auth/token/' && method === 'POST') {
      const ok = USERS[String(body.username)] === body.password;
      return ok
        ? { status: 200, body: { token: `token-${String(body.username)}` } }
        : { status: 400, body: { non_field_errors: ['bad'] } };
    }
    const user = /^Bearer token-(\w+)$/.exec(headers.authorization ?? '')?.[1];
    const identity = user === undefined ? `ip:${headers['x-client'] ?? 'anon'}` : `user:${user}`;
    const decision = this.parts.limiter.check(identity);
    const { limit, windowS } = this.parts.limiter.policy;
    const policy = { 'RateLimit-Policy': `"user";q=${limit};w=${windowS}` };
    if (!decision.allowed) {
      const s = decision.retryAfterS;
      const detail = `Request was throttled. Expected available in ${s} second${s === 1 ? '' : 's'}.`;
      return { status: 429, body: { detail }, headers: { ...policy, 'Retry-After': String(s) } };
    }
    const answer = method === 'GET' ? this.read(url) : this.write(method, url, headers, body);
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
      return { next: page.next === null ? null : link({ cursor: page.next }), previous: null, results: page.results };
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
  const handle = (method: string, url: URL, headers: http.IncomingHttpHeaders, body: Record<string, unknown>) => {
    const key = url.pathname + url.search;
    const hit = method === 'GET' ? cache.get(key) : undefined;
    if (hit !== undefined && hit.until > Date.now()) return hit.answer;
    const answer = model.handle(method, url, headers, body);
    if (method === 'GET' && cacheTtlMs > 0 && answer.status !== 429)
      cache.set(key, { answer, until: Date.now() + cacheTtlMs });
    return answer;
  };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      const body = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
      const url = new URL(request.url ?? '/', `http://${request.headers.host ?? '127.0.0.1'}`);
      const answer = handle(request.method ?? 'GET', url, request.headers, body);
      response.writeHead(answer.status, { 'Content-Type': 'application/json', ...answer.headers });
      response.end(answer.body === undefined ? undefined : JSON.stringify(answer.body));
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}
