import type { User } from '../auth/users.repository.js';
import type { Decision } from '../throttle/index.js';
import type { RefusalAnswer } from './throttle-answers.js';

/** A request the throttle refused: what the access log and its summaries say of it. */
export interface Refusal {
  scope: string;
  /** The throttle's identity of the client: `ip:<address or prefix>` or `user:<id>`. */
  client: string;
  retryAfterS: number;
  /** The client's name in metrics (docs/throttling.md "Who is throttled"): the same on every host. */
  pseudonym?: string;
  /** Answered without Redis: from this process's memory of an earlier refusal, or by its share of the limit. */
  local: boolean;
}

/**
 * What the middleware of one request hand each other in `ctx.state`, declared once as Koa's
 * `DefaultState` so every reader gets the type without a cast.
 */
export interface RequestState {
  /** `X-Request-Id`: the client's when sane, else a new id (request-context.ts). */
  requestId: string;
  /** The authenticated user; null for an anonymous client or bad credentials. */
  user: User | null;
  /** The throttle's decisions of an admitted request, for routes that check a scope of their own. */
  rateLimit?: readonly Decision[];
  /** The read cache's published head, read as the request arrived (cached-read.ts). */
  head?: Promise<number | null>;
  /** Set when the throttle refused the request. */
  refusal?: Refusal;
  /** A refusal's answer, recorded by a guard inside the app and written by the routing (refusal.ts). */
  refusalAnswer?: RefusalAnswer;
}

declare module 'koa' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface DefaultState extends RequestState {}
}
