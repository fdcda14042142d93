import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { History, Operation } from './history.js';

export interface RequestOptions {
  method?: string;
  /** A path with its query (`/api/tasks/?cursor=`) or an absolute URL on the same service. */
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** A new TCP connection for this request alone (a balancer may send it to any host). */
  fresh?: boolean;
  /** What the history names the operation; defaults to `METHOD path-without-query`. */
  f?: string;
}

const TIMEOUT_MS = 10_000;
let connections = 0;
const connectionIds = new WeakMap<Socket, number>();

/**
 * One client of the service under test: its own keep-alive connections (up to `sockets`), an optional
 * token, an optional local address to send from. Every request is recorded in the history.
 */
export class Client {
  private readonly agent: http.Agent;
  token: string | undefined;
  /** With `keep`, every request this client sent, in order, with its answer. */
  readonly sent: Operation[] = [];

  constructor(
    readonly base: URL,
    readonly name: string,
    private readonly history: History,
    options: { sockets?: number; localAddress?: string; scheme?: string; keep?: boolean } = {},
  ) {
    const Agent = base.protocol === 'https:' ? https.Agent : http.Agent;
    this.agent = new Agent({ keepAlive: true, maxSockets: options.sockets ?? 1, localAddress: options.localAddress });
    this.localAddress = options.localAddress;
    this.scheme = options.scheme ?? 'Bearer';
    this.keep = options.keep ?? false;
  }

  private readonly localAddress: string | undefined;
  private readonly scheme: string;
  private readonly keep: boolean;

  /** Sends one request and records it; never throws: a failure is an operation with `status: null`. */
  async send(options: RequestOptions): Promise<Operation> {
    const url = new URL(options.path, this.base);
    const method = options.method ?? 'GET';
    const f = options.f ?? `${method} ${url.pathname}`;
    const { op, time: invoke } = this.history.begin(this.name, f, { method, url: url.pathname + url.search });
    const answer = await this.exchange(url, method, options);
    const entry = { op, process: this.name, conn: answer.conn, f };
    const outcome =
      answer.error === undefined ? { status: answer.status, body: redact(answer.body) } : { error: answer.error };
    const complete = this.history.end({ ...entry, type: answer.error === undefined ? 'ok' : 'info', value: outcome });
    const operation = {
      ...entry,
      invoke,
      complete,
      status: answer.status,
      headers: answer.headers,
      body: answer.body,
      error: answer.error,
    };
    if (this.keep) this.sent.push(operation);
    return operation;
  }

  /** Sends until the answer is not a 429, waiting what `Retry-After` says (at most `maxWaits` times). */
  async sendPolitely(options: RequestOptions, maxWaits = 3): Promise<Operation> {
    for (let waits = 0; ; waits++) {
      const operation = await this.send(options);
      if (operation.status !== 429 || waits >= maxWaits) return operation;
      const seconds = Number(operation.headers['retry-after'] ?? '1');
      await sleep(Math.min(Number.isFinite(seconds) ? seconds : 1, 120) * 1000 + 50);
    }
  }

  close(): void {
    this.agent.destroy();
  }

  private exchange(url: URL, method: string, options: RequestOptions): Promise<Answer> {
    const body = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
    const headers: Record<string, string> = { Accept: 'application/json', ...options.headers };
    if (this.token !== undefined) headers.Authorization = `${this.scheme} ${this.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const transport = url.protocol === 'https:' ? https : http;
    const agent = options.fresh ? false : this.agent;
    return new Promise((resolve) => {
      let conn: number | null = null;
      const request = transport.request(url, { method, headers, agent, localAddress: this.localAddress });
      request.setTimeout(TIMEOUT_MS, () => request.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
      request.on('socket', (socket: Socket) => {
        if (!connectionIds.has(socket)) connectionIds.set(socket, ++connections);
        conn = connectionIds.get(socket) ?? null;
      });
      request.on('error', (error) =>
        resolve({ status: null, headers: {}, body: undefined, conn, error: error.message }),
      );
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', (error) =>
          resolve({ status: null, headers: {}, body: undefined, conn, error: error.message }),
        );
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? null,
            headers: flatten(response.headers),
            body: parse(chunks),
            conn,
          }),
        );
      });
      request.end(body);
    });
  }
}

interface Answer {
  status: number | null;
  headers: Record<string, string>;
  body: unknown;
  conn: number | null;
  error?: string;
}

function flatten(headers: http.IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) flat[name] = String(value);
  return flat;
}

function parse(chunks: Buffer[]): unknown {
  const text = Buffer.concat(chunks).toString('utf8');
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text.slice(0, 200);
  }
}

/** A history is meant to be shared: tokens in answers are kept out of it. */
function redact(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || !('token' in body)) return body;
  return { ...body, token: '<redacted>' };
}
