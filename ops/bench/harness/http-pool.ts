import { connect, type Socket } from 'node:net';

/**
 * An answer (its status, ms from the planned start to its last byte), or none: no answer in time (`timeout`), no
 * connection free in time so never sent (`unsent`, also a timeout), or a failure (`error`).
 */
export type Outcome = { status: number; ms: number } | 'timeout' | 'unsent' | 'error';

/** One request of the load: what to send. */
export interface RequestSpec {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

type Done = (outcome: Outcome) => void;

const HEAD_END = Buffer.from('\r\n\r\n');
const LINE_END = Buffer.from('\r\n');
const EMPTY = Buffer.alloc(0);
/** An answer's head longer than this is not an HTTP answer the service writes: the connection fails. */
const MAX_HEAD_BYTES = 64 * 1024;

/**
 * The load's HTTP/1.1 client: keep-alive connections, one request at a time on each, an answer read for its
 * status and the end of its body and nothing more. Cheaper than node:http's client, whose CPU would be taken from
 * the service on a shared host (docs/benchmarks.md "Overload (`npm run bench:overload`)").
 */
export class HttpPool {
  readonly #host: string;
  readonly #port: number;
  readonly #hostHeader: string;
  readonly #idle: Connection[] = [];
  readonly #open = new Set<Connection>();

  constructor(base: string) {
    const url = new URL(base);
    this.#host = url.hostname;
    this.#port = Number(url.port);
    this.#hostHeader = url.host;
  }

  /** Connections open, busy or idle. */
  get open(): number {
    return this.#open.size;
  }

  /**
   * Sends `spec` on an idle connection (or a new one) and calls `done` once with its outcome: the status and the ms
   * from `plannedAt` (a performance.now() time) to the answer's last byte, or `timeout` when no answer has ended by
   * `plannedAt + timeoutMs` (the request is then abandoned and its connection closed, as a client that gives up
   * does), or `error`. `close`: the request asks for `Connection: close` and the connection ends with its answer.
   */
  send(spec: RequestSpec, plannedAt: number, timeoutMs: number, done: Done, close = false): void {
    let connection = this.#idle.pop();
    if (connection === undefined) {
      connection = new Connection(connect({ host: this.#host, port: this.#port, noDelay: true }), this);
      this.#open.add(connection);
    }
    connection.send(this.#bytes(spec, close), plannedAt, timeoutMs, done);
  }

  /** Closes every connection; a request still in flight ends as an error. */
  destroy(): void {
    for (const connection of this.#open) connection.socket.destroy();
  }

  idle(connection: Connection): void {
    this.#idle.push(connection);
  }

  closed(connection: Connection): void {
    this.#open.delete(connection);
    const at = this.#idle.indexOf(connection);
    if (at !== -1) this.#idle.splice(at, 1);
  }

  #bytes(spec: RequestSpec, close: boolean): string {
    let head = `${spec.method} ${spec.path} HTTP/1.1\r\nHost: ${this.#hostHeader}\r\n`;
    for (const [name, value] of Object.entries(spec.headers ?? {})) head += `${name}: ${value}\r\n`;
    if (close) head += 'Connection: close\r\n';
    if (spec.body === undefined) return `${head}\r\n`;
    return `${head}Content-Length: ${Buffer.byteLength(spec.body)}\r\n\r\n${spec.body}`;
  }
}

/** Sends `spec` on a new connection that closes with its answer (a probe's), as HttpPool.send reports it. */
export function sendOnce(base: string, spec: RequestSpec, plannedAt: number, timeoutMs: number, done: Done): void {
  const pool = new HttpPool(base);
  pool.send(
    spec,
    plannedAt,
    timeoutMs,
    (outcome) => {
      pool.destroy();
      done(outcome);
    },
    true,
  );
}

/** Where the reading of an answer is: its head, a body of known length, a chunked body, or a body up to the close. */
type Phase = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'trailer' | 'until-close';

/** One keep-alive connection of an HttpPool, and the answer it is reading. */
class Connection {
  readonly socket: Socket;
  readonly #pool: HttpPool;
  #buffer: Buffer = EMPTY;
  #phase: Phase = 'head';
  /** Body bytes still to come (a chunk's with its CRLF). */
  #left = 0;
  #status = 0;
  #keepAlive = true;
  #current: { plannedAt: number; done: Done; timer: NodeJS.Timeout } | null = null;

  constructor(socket: Socket, pool: HttpPool) {
    this.socket = socket;
    this.#pool = pool;
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      this.#pool.closed(this);
      if (this.#phase === 'until-close' && this.#current !== null) this.#finish({ status: this.#status });
      else this.#finish('error');
    });
  }

  send(bytes: string, plannedAt: number, timeoutMs: number, done: Done): void {
    const timer = setTimeout(
      () => {
        this.#finish('timeout');
        this.socket.destroy();
      },
      Math.max(0, plannedAt + timeoutMs - performance.now()),
    );
    this.#current = { plannedAt, done, timer };
    this.#phase = 'head';
    this.socket.write(bytes);
  }

  #finish(outcome: Outcome | { status: number }): void {
    const current = this.#current;
    if (current === null) return;
    this.#current = null;
    clearTimeout(current.timer);
    current.done(
      typeof outcome === 'object' ? { status: outcome.status, ms: performance.now() - current.plannedAt } : outcome,
    );
  }

  #answered(): void {
    this.#phase = 'head';
    this.#buffer = EMPTY;
    // Idle again before its request's outcome is reported: the next request may take this connection at once.
    if (this.#keepAlive) this.#pool.idle(this);
    this.#finish({ status: this.#status });
    if (!this.#keepAlive) this.socket.destroy();
  }

  #read(chunk: Buffer): void {
    if (this.#current === null) return; // an abandoned answer's rest, on a connection being closed
    let buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      if (this.#phase === 'head') {
        const end = buffer.indexOf(HEAD_END);
        if (end === -1) {
          if (buffer.length > MAX_HEAD_BYTES) return void this.socket.destroy();
          break;
        }
        const head = buffer.toString('latin1', 0, end).toLowerCase();
        buffer = buffer.subarray(end + 4);
        this.#status = Number(head.slice(9, 12));
        if (this.#status >= 100 && this.#status < 200) continue; // 100 Continue: the answer follows
        this.#keepAlive = !/\r\nconnection:\s*close/.test(head);
        const length = /\r\ncontent-length:\s*(\d+)/.exec(head);
        if (this.#status === 204 || this.#status === 304) return this.#answered();
        if (/\r\ntransfer-encoding:[^\r]*chunked/.test(head)) this.#phase = 'chunk-size';
        else if (length !== null) {
          this.#left = Number(length[1]);
          this.#phase = 'length';
        } else {
          this.#keepAlive = false;
          this.#phase = 'until-close';
        }
      } else if (this.#phase === 'length' || this.#phase === 'chunk-data') {
        const taken = Math.min(this.#left, buffer.length);
        this.#left -= taken;
        buffer = buffer.subarray(taken);
        if (this.#left > 0) break;
        if (this.#phase === 'length') return this.#answered();
        this.#phase = 'chunk-size';
      } else if (this.#phase === 'chunk-size' || this.#phase === 'trailer') {
        const end = buffer.indexOf(LINE_END);
        if (end === -1) break;
        const line = buffer.toString('latin1', 0, end);
        buffer = buffer.subarray(end + 2);
        if (this.#phase === 'trailer') {
          if (line === '') return this.#answered();
          continue;
        }
        const size = parseInt(line, 16);
        if (Number.isNaN(size)) return void this.socket.destroy();
        if (size === 0) this.#phase = 'trailer';
        else {
          this.#left = size + 2;
          this.#phase = 'chunk-data';
        }
      } else {
        buffer = EMPTY; // until-close: the close ends the body
        break;
      }
    }
    this.#buffer = buffer;
  }
}
