import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import { BASE_FIELDS } from './answer.js';
import { Errors } from '../base/errors.js';

/** Sets BASE_FIELDS and refuses a request whose Host header is missing (HTTP/1.1) or repeated, with 400. */
export const baseHeaders: Middleware = async (ctx, next) => {
  // Straight to Node: nothing has been sent yet, and Koa's setter adds only checks for that.
  const res = ctx.res;
  for (let i = 0; i < BASE_FIELDS.length; i += 2) res.setHeader(BASE_FIELDS[i]!, BASE_FIELDS[i + 1]!);
  // HTTP/1.1 requires exactly one Host (RFC 9112 §3.2); Node keeps the first of several silently,
  // and its own refusal has no body (see answerClientErrors).
  if (!ctx.req.headers.host && ctx.req.httpVersion === '1.1')
    throw Errors.badRequest('Bad request: the Host header is missing.');
  if (countHost(ctx.req.rawHeaders) > 1) throw Errors.badRequest('Bad request: more than one Host header.');
  await next();
};

/** True when `req` has exactly one Host field: the only requests baseHeaders lets through whatever their version. */
export function hasOneHost(req: IncomingMessage): boolean {
  return req.headers.host !== undefined && countHost(req.rawHeaders) === 1;
}

/** How many Host fields a request sent, read from the raw headers (`headersDistinct` builds arrays for every field). */
function countHost(raw: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') count += 1;
  return count;
}
