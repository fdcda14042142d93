import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import { Errors } from '../base/errors.js';
import {
  keepRenderedAnswer,
  type IdempotencyClaim,
  type RenderedAnswer,
  type Replay,
} from '../idempotency/idempotency.js';
import type { Deps } from '../deps.js';
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
 * record written before the records kept resources holds the rendered answer, sent as it is.
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

/**
 * After a first answer given under an `Idempotency-Key`: its rendered form joins the record, for hosts of the
 * previous release during a rolling deploy (`keepRenderedAnswer`). Best effort: a failure is logged, the answer
 * stands.
 */
export async function keepForOlderHosts(
  deps: Pick<Deps, 'db' | 'logger'>,
  userId: number,
  claim: IdempotencyClaim | undefined,
  answer: RenderedAnswer,
): Promise<void> {
  if (!claim) return;
  await keepRenderedAnswer(deps.db, { userId, key: claim.key }, answer).catch((error: unknown) =>
    deps.logger.warn({ cause: String(error) }, 'idempotency record kept without its rendered answer'),
  );
}
