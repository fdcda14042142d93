import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import { prefersProblem } from '../server/problem-details.js';
import type { RefusalAnswer } from './throttle-answers.js';
import { writeEdgeAnswer } from './answer.js';
import type { Refusal } from './request-state.js';

/**
 * The one place a throttle's 429 is made and written (docs/throttling.md "Refusals: the cheap answer, logged by
 * sample"): the record of who was refused (`refusalOf`), and the answer's status, fields and body (`writeRefusal`),
 * whether the listener answers it before Koa (src/listener/early-refusal.ts) or a guard inside the app (`answerRefusal`).
 */

/** Who was refused, where and for how long: what the access log and the who view say of a refusal. */
export function refusalOf(
  scope: string,
  client: string,
  retryAfterS: number,
  local: boolean,
  pseudonym: string | undefined,
): Refusal {
  const refusal: Refusal = { scope, client, retryAfterS, local };
  if (pseudonym !== undefined) refusal.pseudonym = pseudonym;
  return refusal;
}

/**
 * Writes a refusal's 429: the request's id, the base fields, its own fields (Content-Type, Retry-After, the
 * RateLimit fields), Content-Length and the path's `Allow`, with its body, in one write. DRF's body, or its problem
 * details when the request's `accept` asks for them (docs/api.md "Problem details"), both kept with the answer.
 */
export function writeRefusal(
  res: ServerResponse,
  answer: RefusalAnswer,
  lead: { requestId: string; allow: string | undefined; accept: string | undefined },
): void {
  const { fields, body } = prefersProblem(lead.accept) ? answer.problem() : answer;
  writeEdgeAnswer(res, { status: 429, requestId: lead.requestId, fields, body, allow: lead.allow });
}

/**
 * A refusal inside the app: recorded on the request (`ctx.state.refusal` for the access log, its answer for the
 * routing, which writes it with `writeRefusal` once the path's `Allow` is known, src/api/app.ts). Nothing more of
 * the route runs: the guard returns.
 */
export function answerRefusal(ctx: Context, refusal: Refusal, answer: RefusalAnswer): void {
  ctx.state.refusal = refusal;
  ctx.state.refusalAnswer = answer;
  ctx.status = 429;
}

/** Writes a refusal recorded by `answerRefusal`, if the request has one: true when it did. */
export function writeRecordedRefusal(ctx: Context, allow: string | undefined): boolean {
  const answer = ctx.state.refusalAnswer;
  if (!answer || ctx.res.headersSent) return false;
  ctx.respond = false;
  writeRefusal(ctx.res, answer, { requestId: ctx.state.requestId, allow, accept: ctx.req.headers.accept });
  return true;
}
