import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import { Errors } from '../base/errors.js';
import type { IdempotencyClaim, RenderedAnswer, Replay } from '../idempotency/idempotency.js';
import type { ProxySettings } from '../server/client-address.js';
import { absoluteUrl } from '../server/request-url.js';

const KEY_MAX = 255;

/**
 * The request's `Idempotency-Key` with a digest of what it asks for (route and validated body),
 * or undefined without the header. A key reused with another body, or on another endpoint,
 * therefore never replays the wrong answer.
 */
export function readIdempotencyClaim(ctx: Context, request: unknown): IdempotencyClaim | undefined {
  const key = ctx.get('Idempotency-Key');
  if (!key) return undefined;
  if (key.length > KEY_MAX) throw Errors.badRequest(`Idempotency-Key must be at most ${KEY_MAX} characters.`);
  const route = `${ctx.method} ${String(ctx.routerPath ?? ctx.path)}`;
  return {
    key,
    requestHash: createHash('sha256')
      .update(JSON.stringify([route, request]))
      .digest('base64url'),
  };
}

/**
 * Sends a replayed answer as first given, marked `Idempotent-Replayed: true`: `render`, the
 * function that rendered the first answer, renders it again from the resource the record kept; a
 * record written by 0.1.0, before records kept resources, holds the rendered answer, sent as it is
 * (src/idempotency/idempotency.ts says until when such a record can be live).
 */
export function sendReplay<R>(
  ctx: Context,
  proxies: ProxySettings,
  replay: Replay<R>,
  render: (created: R) => RenderedAnswer,
): void {
  ctx.set('Idempotent-Replayed', 'true');
  sendAnswer(ctx, proxies, replay.rendered === undefined ? render(replay.created) : replay.rendered);
}

/** Sends an answer: status, body, and `Location` (absolute) when it names a resource. */
export function sendAnswer(ctx: Context, proxies: ProxySettings, answer: RenderedAnswer): void {
  ctx.status = answer.status;
  if (answer.resourcePath) ctx.set('Location', absoluteUrl(ctx, proxies, answer.resourcePath));
  ctx.body = answer.body;
}
