import type { IncomingMessage, ServerResponse } from 'node:http';

/** The fields every answer carries, as a flat name, value list (docs/architecture.md "HTTP API"). */
export const BASE_FIELDS: readonly string[] = [
  'X-Content-Type-Options',
  'nosniff',
  'Referrer-Policy',
  'same-origin',
  'Vary',
  'Accept, Authorization',
];

/** One answer as the access log and the request metrics see it, whether Koa or the listener before it gave it. */
export interface AnswerRecord {
  requestId: string;
  method: string;
  route: string;
  status: number;
  seconds: number;
  /** A refusal's scope, client and Retry-After: its access line is written by sample. */
  refusal?: { scope: string; client: string; retryAfterS: number; pseudonym?: string; local: boolean } | undefined;
}

/** What records each answer: the request context inside Koa (src/edge/request-context.ts), shared with the listener before Koa. */
export interface AnswerRecorder {
  /** The request's id: `given` (the client's `X-Request-Id`, or '') when it is sane, else a new one. */
  idFor(given: string): string;
  /** Counts an answer in the request metrics and writes its access line. */
  record(answer: AnswerRecord): void;
}

/** The id of a request answered before Koa, from its `X-Request-Id` as the request context reads it. */
export function requestIdOf(recorder: AnswerRecorder, req: IncomingMessage): string {
  return recorder.idFor((req.headers['x-request-id'] as string | undefined) ?? '');
}

/** An answer written before Koa: its status, the request's id, its own fields and its body. */
export interface EdgeAnswer {
  status: number;
  requestId: string;
  /** Its own fields as a flat name, value list, after the base ones (Content-Type, Retry-After, RateLimit...). */
  fields: readonly string[];
  body: Buffer;
  /** The path's `Allow`, which the app sends on every answer of a declared path. */
  allow?: string | undefined;
}

/**
 * The one writer of an answer given before Koa (a throttle refusal from memory, a shed request, a
 * liveness probe): the fields in the app's order (the request id, the base fields, its own,
 * Content-Length, the path's `Allow`) and the body in the same write, so such an answer is the
 * app's byte for byte (docs/architecture.md "HTTP API").
 */
export function writeEdgeAnswer(res: ServerResponse, answer: EdgeAnswer): void {
  const { status, requestId, fields: own, body, allow } = answer;
  const fields = ['X-Request-Id', requestId, ...BASE_FIELDS, ...own, 'Content-Length', String(body.length)];
  if (allow !== undefined) fields.push('Allow', allow);
  res.writeHead(status, fields);
  res.end(body);
}

/** The JSON type the app sends (Koa's, for a body it serialises). */
export const JSON_TYPE = ['Content-Type', 'application/json; charset=utf-8'] as const;

/**
 * The liveness probe's answer (`GET /healthz`): the process answers. Written before Koa by the admission listener
 * for a GET, and by the app's route for the methods that reach it (HEAD), so both say the same.
 */
export const LIVENESS = { status: 'ok' } as const;
