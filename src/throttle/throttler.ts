// The throttle's shared shapes (docs/architecture.md "Throttling"): consume.ts answers them; refusals.ts and
// reply.ts build them.
import type { ScopeName, ScopeRule } from './scopes.js';

/**
 * One scope's verdict on one request.
 *
 * The request is admitted iff every decision of its `consume` call is `allowed` (see
 * `isAdmitted`); only then is it recorded, in every scope. A decision can be `allowed` while the
 * request was refused by another scope: its `remaining` then still counts the request as not made.
 */
export interface Decision {
  scope: ScopeName;
  /** This scope had room for the request. */
  allowed: boolean;
  /** The scope's N. */
  limit: number;
  /** The scope's window. */
  windowMs: number;
  /**
   * Units this scope would still admit in the current window, after this one (requests, where every request
   * costs 1); when refused, the units left, fewer than the request's cost.
   */
  remaining: number;
  /**
   * Milliseconds until the oldest admitted request still in the window leaves it, i.e. until
   * `remaining` next grows; 0 when the window is empty. When not allowed this is the wait until
   * enough units have left the window for this request's cost, so `ceil(resetMs / 1000)` equals `retryAfterS`; that
   * ceiling is what the RateLimit field's `t` carries. With a sliding log the quota never
   * resets all at once; this is the earliest point at which the client gets more.
   */
  resetMs: number;
  /** Whole seconds (≥ 1) until a request is admitted again when not allowed; 0 when allowed. */
  retryAfterS: number;
  /**
   * Set when this process answered without Redis: from an earlier refusal of the same log under
   * the same rule (see refusals.ts), or by its share of the limit (`degraded`); every decision of
   * such a request has it.
   */
  local?: true;
  /**
   * Set (with `local`) when Redis did not answer and this worker decided alone, by its share of
   * the limit (THROTTLE_FAILURE_MODE=local, see local-share.ts): `remaining` and `resetMs` are
   * then of that share, and `limit` is still the scope's.
   */
  degraded?: true;
  /**
   * Set when the request was admitted but this scope's shadow rule (or, for a scope wholly in
   * shadow, its own rule) would have refused it: counted and logged, the answer unchanged.
   */
  shadowRefused?: true;
  /** Set when the scope runs wholly in shadow: it never refuses and has no RateLimit fields. */
  inShadow?: true;
  /**
   * The request's cost, set (with `local`, not allowed, `retryAfterS` 0) when it is more than the scope's limit, so
   * no wait would admit it: refused in process, Redis not asked (docs/throttling.md "Cost: requests that weigh
   * more").
   */
  overLimit?: number;
}

/**
 * One scope to check: the rule and the identity it counts (`ip:1.2.3.4`, `user:42`), and what the request costs
 * in the scope's units (a positive integer; default 1).
 */
export interface Check {
  rule: ScopeRule;
  ident: string;
  cost?: number;
}

/**
 * Exact, Redis-shared throttling (docs/architecture.md "Throttling"). Holds no counts in process
 * memory, only until when Redis has refused a client on a rule (refusals.ts), which can only refuse.
 */
export interface Throttler {
  /**
   * Decides all checks of one request in one atomic step, in one Redis round trip, timed by
   * Redis's clock: the request is recorded in every check if every check admits it, and in none
   * otherwise. Returns one decision per check, in order. Rejection is a value; a Redis failure
   * rejects the promise. A request with a check Redis has already refused until a moment still
   * ahead is refused in process, with no round trip, records nothing, and is answered even while
   * Redis is down (see `Decision.local`).
   *
   * A check whose `cost` exceeds its limit is refused in process (`overLimit`), and so is its request.
   *
   * Under Redis Cluster all checks of one call must have the same `ident` (one hash slot).
   * @throws Error (rejects) when two checks name the same scope and ident, or a cost is not a positive
   * integer: a wiring mistake.
   */
  consume(checks: ReadonlyArray<Check>): Promise<Decision[]>;
  /**
   * True when this process already knows Redis refused `check` until a moment still ahead, so a
   * request counted by it now would be refused: asks nothing of Redis and records nothing.
   */
  isRefused(check: Check): boolean;
  /**
   * The decisions `consume([check])` would answer now when this process already knows Redis refused
   * `check` until a moment still ahead (every one `local`), else undefined: synchronous, asks nothing
   * of Redis and records nothing.
   */
  knownRefusal(check: Check): Decision[] | undefined;
  /**
   * Reads what `consume` would decide for each check now, recording nothing (one script call per
   * hash slot, in peek mode): a client's remaining budget, read without spending it.
   */
  peek(checks: ReadonlyArray<Check>): Promise<Decision[]>;
}
