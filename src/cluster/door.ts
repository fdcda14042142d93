import type { Worker } from 'node:cluster';
import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { BASE_FIELDS, JSON_TYPE } from '../edge/answer.js';
import { CLIENT_ID, createRequestIds } from '../edge/request-context.js';
import { CONNECTION, LISTEN_BACKLOG } from '../server/server.js';
import { FirstRequest } from './first-request.js';
import type { Config } from '../settings/config.js';

/** How the door saw one connection, for the metrics: a probe it answered, handed to a worker, or refused. */
export type DoorOutcome = 'health' | 'handed' | 'unavailable' | 'timeout' | 'dropped';

export interface DoorParts {
  config: Pick<
    Config,
    | 'PORT'
    | 'HOST'
    | 'HTTP_HEADERS_TIMEOUT_MS'
    | 'HTTP_REQUEST_TIMEOUT_MS'
    | 'HTTP_MAX_CONNECTIONS'
    | 'BODY_LIMIT_BYTES'
  >;
  logger: Logger;
  /** The web workers that take connections now: ready and not draining (supervisor.ts). */
  serving(): Worker[];
  /** Counts what it did with a connection; a probe it answered also as a request (metrics-hub.ts). */
  count?(outcome: DoorOutcome, probe?: { method: string; status: number; seconds: number }): void;
}

const LIVE_BODY = Buffer.from(JSON.stringify({ status: 'ok' }));
const DOWN_BODY = Buffer.from(JSON.stringify({ detail: 'Service temporarily unavailable, try again later.' }));
/** The workers' own text for a request past its timeout (src/server/client-errors.ts). */
const TIMEOUT_BODY = Buffer.from(JSON.stringify({ detail: 'Request timeout.' }));
const HEALTH_LINE = /^(GET|HEAD) \/healthz(\?[^ ]*)? HTTP\/1\.[01]\r\n/;
const nextId = createRequestIds();
const REASONS = { 200: 'OK', 408: 'Request Timeout', 503: 'Service Unavailable' } as const;

/**
 * The host's door (docs/throttling.md "Past capacity: admission and shedding"): the primary accepts every
 * connection on PORT itself and reads its first request. A liveness probe (`GET /healthz`) is answered here,
 * by a process whose event loop no request ever holds, so a load balancer's check and a new client are not
 * queued behind a saturated worker's backlog; it is 200 while a web worker serves, else 503. Any other
 * connection goes to the next serving worker with the bytes read, once its first request has arrived whole
 * (a client sends nothing more before its answer, so nothing is in flight while the socket changes hands).
 * A connection that arrives while no worker serves (a start, a crash) waits for one, up to
 * HTTP_HEADERS_TIMEOUT_MS, then gets 503.
 */
export class Door {
  readonly #server: Server;
  readonly #parts: DoorParts;
  readonly #waiting = new Set<{ socket: Socket; head: Buffer; timer: NodeJS.Timeout }>();
  /** Connections whose first request is still arriving. */
  readonly #reading = new Set<Socket>();
  #next = 0;
  /** Hand-overs sent to each worker and not yet taken. */
  readonly #pending = new WeakMap<Worker, number>();
  /** Where it listens, once it does. */
  address: { host: string; port: number } | undefined;

  constructor(parts: DoorParts) {
    this.#parts = parts;
    this.#server = createServer({ pauseOnConnect: true, noDelay: true }, (socket) => this.#accept(socket));
    // Connections still being read here; each worker bounds the ones it was handed by the same setting.
    this.#server.maxConnections = parts.config.HTTP_MAX_CONNECTIONS;
  }

  /** Listens on PORT; fails with the setting named, as a port taken by another process does at start. */
  listen(): Promise<{ host: string; port: number }> {
    const { PORT, HOST } = this.#parts.config;
    return new Promise((resolve, reject) => {
      this.#server.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new Error(
            `PORT ${PORT} on ${HOST} cannot be served: ` +
              `${error.code === 'EADDRINUSE' ? 'another process is listening on it' : error.message}`,
          ),
        ),
      );
      this.#server.listen({ port: PORT, host: HOST, exclusive: true, backlog: LISTEN_BACKLOG }, () => {
        const address = this.#server.address();
        if (address === null || typeof address === 'string') return reject(new Error('PORT: no address'));
        resolve((this.address = { host: address.address, port: address.port }));
      });
    });
  }

  /** A web worker became ready: connections waiting for one go to it. */
  workerReady(): void {
    const workers = this.#parts.serving();
    for (const waiting of this.#waiting) {
      this.#waiting.delete(waiting);
      clearTimeout(waiting.timer);
      this.#handOver(waiting.socket, waiting.head, workers);
    }
  }

  /**
   * Stops accepting, then lets the first requests still arriving here finish arriving and go to a worker, for at
   * most `withinMs` (the workers drain next: what they were handed, they finish); what is left is closed.
   */
  async close(withinMs: number): Promise<void> {
    if (!this.#server.listening) return;
    this.#server.close();
    const until = performance.now() + withinMs;
    while (this.#reading.size > 0 && performance.now() < until) await sleep(20);
    for (const socket of this.#reading) socket.destroy();
    for (const { socket, timer } of this.#waiting) {
      clearTimeout(timer);
      socket.destroy();
    }
    this.#waiting.clear();
  }

  #accept(socket: Socket): void {
    socket.on('error', () => socket.destroy());
    this.#reading.add(socket);
    const { HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, BODY_LIMIT_BYTES } = this.#parts.config;
    const request = new FirstRequest(BODY_LIMIT_BYTES);
    // As the workers' own limits (src/server/server.ts): the head within its timeout, the whole request within
    // its own from its first bytes, else 408 and the connection closed. A socket the door has read from cannot
    // change hands while its client is still sending (what arrives meanwhile would be lost), so it never does.
    const timedOut = () => {
      this.#reading.delete(socket);
      socket.off('data', onData);
      this.#parts.count?.('timeout');
      answer(socket, request.bytes(), 408, TIMEOUT_BODY);
    };
    let timer = setTimeout(timedOut, HTTP_HEADERS_TIMEOUT_MS);
    let startedAt = 0;
    const onData = (chunk: Buffer) => {
      if (startedAt === 0) startedAt = performance.now(); // as Node times a request: from its first bytes
      const before = request.state;
      const state = request.add(chunk);
      if (state === 'body' && before === 'head') {
        clearTimeout(timer);
        timer = setTimeout(timedOut, Math.max(0, startedAt + HTTP_REQUEST_TIMEOUT_MS - performance.now()));
      }
      if (state !== 'whole') return;
      clearTimeout(timer);
      this.#reading.delete(socket);
      socket.off('data', onData);
      socket.pause();
      if (!socket.destroyed) this.#route(socket, request.bytes(), startedAt);
    };
    socket.on('data', onData);
    socket.once('close', () => {
      clearTimeout(timer);
      this.#reading.delete(socket);
    });
    socket.resume();
  }

  /** A probe is answered; anything else is handed over, or waits for a worker. */
  #route(socket: Socket, head: Buffer, startedAt: number): void {
    const workers = this.#parts.serving();
    const serving = workers.length > 0;
    if (HEALTH_LINE.test(head.subarray(0, 64).toString('latin1'))) {
      const status = serving ? 200 : 503;
      answer(socket, head, status, serving ? LIVE_BODY : DOWN_BODY);
      const method = head.subarray(0, 4).toString('latin1') === 'HEAD' ? 'HEAD' : 'GET';
      return this.#parts.count?.('health', { method, status, seconds: (performance.now() - startedAt) / 1000 });
    }
    if (serving) return this.#handOver(socket, head, workers);
    const timer = setTimeout(() => {
      this.#waiting.delete(waiting);
      this.#parts.count?.('unavailable');
      answer(socket, head, 503, DOWN_BODY);
    }, this.#parts.config.HTTP_HEADERS_TIMEOUT_MS);
    const waiting = { socket, head, timer };
    this.#waiting.add(waiting);
  }

  /**
   * The worker with the fewest hand-overs still on their way (Node passes one socket at a time to a worker and
   * waits for it to take it, so a busy worker's hand-overs queue here), the next in turn among equals.
   */
  #choose(workers: Worker[]): Worker {
    const start = this.#next++;
    let chosen = workers[start % workers.length]!;
    for (let i = 1; i < workers.length; i += 1) {
      const worker = workers[(start + i) % workers.length]!;
      if ((this.#pending.get(worker) ?? 0) < (this.#pending.get(chosen) ?? 0)) chosen = worker;
    }
    return chosen;
  }

  #handOver(socket: Socket, head: Buffer, workers: Worker[]): void {
    if (workers.length === 0 || socket.destroyed) {
      this.#parts.count?.('dropped');
      return void socket.destroy();
    }
    // Whatever the socket read meanwhile goes with it.
    for (let more = socket.read() as Buffer | null; more !== null; more = socket.read() as Buffer | null)
      head = Buffer.concat([head, more]);
    const worker = this.#choose(workers);
    this.#parts.count?.('handed');
    this.#pending.set(worker, (this.#pending.get(worker) ?? 0) + 1);
    worker.send({ type: CONNECTION, head: head.toString('base64') }, socket, (error: Error | null) => {
      this.#pending.set(worker, Math.max(0, (this.#pending.get(worker) ?? 1) - 1));
      if (error) socket.destroy();
    });
  }
}

/** Writes a probe's or a refusal's answer as the app writes its own (edge/answer.ts), then closes. */
function answer(socket: Socket, head: Buffer, status: 200 | 408 | 503, body: Buffer): void {
  const given = /\r\nx-request-id:[ \t]*([^\r\n]*)/i.exec(head.toString('latin1'))?.[1]?.trim() ?? '';
  const requestId = CLIENT_ID.test(given) ? given : nextId();
  const headOnly = head.subarray(0, 5).toString('latin1') === 'HEAD ';
  const fields = ['X-Request-Id', requestId, ...BASE_FIELDS, ...JSON_TYPE, 'Content-Length', String(body.length)];
  if (status === 503) fields.push('Retry-After', '1');
  if (status === 200) fields.push('Allow', 'GET, HEAD, OPTIONS');
  fields.push('Date', new Date().toUTCString(), 'Connection', 'close');
  let text = `HTTP/1.1 ${status} ${REASONS[status]}\r\n`;
  for (let i = 0; i < fields.length; i += 2) text += `${fields[i]}: ${fields[i + 1]}\r\n`;
  // Closed once written, whatever the client still sends (as the workers close a refused connection).
  const bytes = headOnly
    ? Buffer.from(`${text}\r\n`, 'latin1')
    : Buffer.concat([Buffer.from(`${text}\r\n`, 'latin1'), body]);
  socket.end(bytes, () => socket.destroy());
}
