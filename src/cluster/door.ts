import type { Worker } from 'node:cluster';
import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import {
  Admission,
  LEVEL_NAMES,
  SHED_BODY,
  STANDING_AFTER_MS,
  shedRetryAfterS,
  type Level,
  type ShedReason,
} from '../edge/admission.js';
import { BASE_FIELDS, JSON_TYPE } from '../edge/answer.js';
import { CLIENT_ID, createRequestIds } from '../edge/request-context.js';
import { CONNECTION } from '../server/server.js';
import { FirstRequest } from './first-request.js';
import type { Config } from '../settings/config.js';

/** How the door saw one connection, for the metrics: a probe it answered, handed to a worker, or refused. */
export type DoorOutcome = 'health' | 'handed' | 'shed' | 'unavailable' | 'timeout' | 'dropped';

export interface DoorParts {
  config: Pick<
    Config,
    | 'PORT'
    | 'HOST'
    | 'HTTP_HEADERS_TIMEOUT_MS'
    | 'HTTP_REQUEST_TIMEOUT_MS'
    | 'HTTP_MAX_CONNECTIONS'
    | 'BODY_LIMIT_BYTES'
    | 'ADMISSION_CONTROL'
    | 'ADMISSION_QUEUE_MS'
    | 'ADMISSION_QUEUE_SIZE'
  >;
  logger: Logger;
  /** The web workers that take connections now: ready and not draining (supervisor.ts). */
  serving(): Worker[];
  /** Counts what it did with a connection; a probe it answered also as a request (metrics-hub.ts). */
  count?(outcome: DoorOutcome, probe?: { method: string; status: number; seconds: number }): void;
  /** Counts a new connection the door shed, by its class and why (metrics-hub.ts). */
  countShed?(level: Level, reason: ShedReason): void;
}

const LIVE_BODY = Buffer.from(JSON.stringify({ status: 'ok' }));
const DOWN_BODY = SHED_BODY;
/** The workers' own text for a request past its timeout (src/server/client-errors.ts). */
const TIMEOUT_BODY = Buffer.from(JSON.stringify({ detail: 'Request timeout.' }));
const HEALTH_LINE = /^(GET|HEAD) \/healthz(\?[^ ]*)? HTTP\/1\.[01]\r\n/;
const nextId = createRequestIds();
const REASONS = { 200: 'OK', 408: 'Request Timeout', 503: 'Service Unavailable' } as const;
/** One log line per class and reason at most this often, with the number shed since the last. */
const SHED_LOG_EVERY_MS = 60_000;

/**
 * The host's door (docs/throttling.md "Past capacity: admission and shedding"): the primary accepts every
 * connection on PORT itself and reads its first request. A liveness probe (`GET /healthz`) is answered here,
 * by a process whose event loop no request ever holds, so a load balancer's check and a new client are not
 * queued behind a saturated worker's backlog; it is 200 while a web worker serves, else 503. Any other
 * connection goes to the next serving worker with the bytes read, once its first request has arrived whole
 * (a client sends nothing more before its answer, so nothing is in flight while the socket changes hands).
 * A connection that arrives while no worker serves (a start, a crash) waits for one, up to
 * HTTP_HEADERS_TIMEOUT_MS, then gets 503.
 *
 * Node passes a worker one socket at a time and waits until the worker takes it, which a saturated worker does
 * once per turn of its event loop: past capacity, new connections would queue here for seconds. With
 * ADMISSION_CONTROL=on they wait in the door's own admission instead (edge/admission.ts, by the class the first
 * request's head tells, `classOf`): at most one hand-over on its way per serving worker, the highest class first,
 * and a connection that waited longer than the burst allowance (STANDING_AFTER_MS, or ADMISSION_QUEUE_MS if
 * longer) is answered 503 here, as a worker sheds, and closed. A request that needs a worker to answer about health (`/readyz`) is never shed.
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
  /** New connections waiting for a worker to take them (ADMISSION_CONTROL=on), at most one per serving worker. */
  readonly #admission: Admission | undefined;
  /** The serving workers as of the last connection routed. */
  #workers: Worker[] = [];
  /** Per class and reason: when the last shed line was logged, and how many were shed since. */
  readonly #shedLog = new Map<string, { at: number; count: number }>();
  /** Where it listens, once it does. */
  address: { host: string; port: number } | undefined;

  constructor(parts: DoorParts) {
    this.#parts = parts;
    this.#server = createServer({ pauseOnConnect: true, noDelay: true }, (socket) => this.#accept(socket));
    // Connections still being read here; each worker bounds the ones it was handed by the same setting.
    this.#server.maxConnections = parts.config.HTTP_MAX_CONNECTIONS;
    const { ADMISSION_CONTROL, ADMISSION_QUEUE_MS, ADMISSION_QUEUE_SIZE } = parts.config;
    const workers = () => this.#workers;
    this.#admission =
      ADMISSION_CONTROL === 'on'
        ? new Admission(
            {
              get value() {
                return Math.max(1, workers().length);
              },
              sample() {},
            },
            // A hand-over costs a worker little: the door sheds only a connection that waited out the burst
            // allowance, never one that waited a standing queue's short target (a burst of new clients at a
            // latency spike is served late, not refused).
            { queueSize: ADMISSION_QUEUE_SIZE, queueMs: Math.max(ADMISSION_QUEUE_MS, STANDING_AFTER_MS) },
          )
        : undefined;
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
      this.#server.listen({ port: PORT, host: HOST, exclusive: true }, () => {
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
    const queued = () => this.#admission?.queued ?? 0;
    while ((this.#reading.size > 0 || queued() > 0) && performance.now() < until) await sleep(20);
    this.#admission?.close();
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
    if (serving) return this.#admit(socket, head, workers);
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

  /** Hands the connection over now, or through the door's admission (ADMISSION_CONTROL=on). */
  #admit(socket: Socket, head: Buffer, workers: Worker[]): void {
    const level = classOf(head);
    const admission = this.#admission;
    if (admission === undefined || level === 'health') return this.#handOver(socket, head, workers);
    this.#workers = workers;
    admission.admit({
      level,
      queuedAt: performance.now(),
      start: () => this.#handOver(socket, head, this.#workers, () => admission.finish(0, 0)),
      shed: (reason) => this.#shed(socket, head, level, reason),
      gone: () => socket.destroyed,
    });
  }

  #shed(socket: Socket, head: Buffer, level: Level, reason: ShedReason): void {
    if (socket.destroyed) return this.#parts.count?.('dropped');
    this.#parts.count?.('shed');
    this.#parts.countShed?.(level, reason);
    answer(socket, head, 503, DOWN_BODY, shedRetryAfterS());
    const key = `${LEVEL_NAMES[level]} ${reason}`;
    const now = Date.now();
    const line = this.#shedLog.get(key) ?? { at: -Infinity, count: 0 };
    line.count += 1;
    this.#shedLog.set(key, line);
    if (now - line.at < SHED_LOG_EVERY_MS) return;
    this.#parts.logger.warn(
      { class: LEVEL_NAMES[level], reason, shed: line.count, queued: this.#admission?.queued },
      'the door shed new connections (503): no web worker took them within a second',
    );
    Object.assign(line, { at: now, count: 0 });
  }

  /** `taken` is told once the socket is on its way to the worker (or could not be), whichever comes first. */
  #handOver(socket: Socket, head: Buffer, workers: Worker[], taken?: () => void): void {
    if (workers.length === 0 || socket.destroyed) {
      this.#parts.count?.('dropped');
      taken?.();
      return void socket.destroy();
    }
    // Whatever the socket read meanwhile goes with it.
    for (let more = socket.read() as Buffer | null; more !== null; more = socket.read() as Buffer | null)
      head = Buffer.concat([head, more]);
    const worker = this.#choose(workers);
    this.#parts.count?.('handed');
    this.#pending.set(worker, (this.#pending.get(worker) ?? 0) + 1);
    let done = false;
    const settle = () => {
      if (done) return;
      done = true;
      if (taken) worker.off('exit', settle);
      this.#pending.set(worker, Math.max(0, (this.#pending.get(worker) ?? 1) - 1));
      taken?.();
    };
    // A worker that exits before it takes the socket frees its place in the door's admission all the same (at
    // most two such hand-overs per worker at a time: the door's admission bounds them).
    if (taken) worker.once('exit', settle);
    worker.send({ type: CONNECTION, head: head.toString('base64') }, socket, (error: Error | null) => {
      if (error) socket.destroy();
      settle();
    });
  }
}

const DOCS_PATH = /^\/api\/(schema|docs)\//;
const PROBE_PATH = /^\/(readyz|healthz)(\?|$)/;

/**
 * A new connection's class for the door's admission, from its first request's head as the workers classify by
 * the route (src/api/app.ts `classifyRequests`): `/readyz` (and a `/healthz` the door does not answer itself) is a probe, never shed; docs and schema; anonymous
 * without `Authorization`; an authenticated read (GET, HEAD, OPTIONS); an authenticated write.
 */
export function classOf(head: Buffer): Level | 'health' {
  const text = head.toString('latin1', 0, Math.min(head.length, 8_192));
  const line = /^([A-Z]+) (\S+)/.exec(text);
  const method = line?.[1] ?? 'GET';
  const path = line?.[2] ?? '/';
  if (PROBE_PATH.test(path)) return 'health';
  if (DOCS_PATH.test(path)) return 0;
  const end = text.indexOf('\r\n\r\n');
  if (!/\r\nauthorization:/i.test(end === -1 ? text : text.slice(0, end))) return 1;
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 2 : 3;
}

/** Writes a probe's or a refusal's answer as the app writes its own (edge/answer.ts), then closes. */
function answer(socket: Socket, head: Buffer, status: 200 | 408 | 503, body: Buffer, retryAfterS = 1): void {
  const given = /\r\nx-request-id:[ \t]*([^\r\n]*)/i.exec(head.toString('latin1'))?.[1]?.trim() ?? '';
  const requestId = CLIENT_ID.test(given) ? given : nextId();
  const headOnly = head.subarray(0, 5).toString('latin1') === 'HEAD ';
  const fields = ['X-Request-Id', requestId, ...BASE_FIELDS, ...JSON_TYPE, 'Content-Length', String(body.length)];
  if (status === 503) fields.push('Retry-After', String(retryAfterS));
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
