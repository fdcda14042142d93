import type { Cluster, Redis } from 'ioredis';
import { RING_SCRIPT } from './ring.lua.js';
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
  /** Requests this scope would still admit in the current window, after this one. */
  remaining: number;
  /**
   * Milliseconds until the oldest admitted request still in the window leaves it, i.e. until
   * `remaining` next grows by one; 0 when the window is empty. When not allowed this is the wait
   * until a request is admitted again, so `ceil(resetMs / 1000)` equals `retryAfterS`; that
   * ceiling is what the RateLimit field's `t` carries. With a sliding log the quota never
   * resets all at once; this is the earliest point at which the client gets more.
   */
  resetMs: number;
  /** Whole seconds (≥ 1) until a request is admitted again when not allowed; 0 when allowed. */
  retryAfterS: number;
}

/** One scope to check: the rule and the identity it counts (`ip:1.2.3.4`, `user:42`). */
export interface Check {
  rule: ScopeRule;
  ident: string;
}

/** Exact, Redis-shared throttling (DESIGN §4). Holds no counts in process memory. */
export interface Throttler {
  /**
   * Decides all checks of one request in one atomic step, in one Redis round trip, timed by
   * Redis's clock: the request is recorded in every check if every check admits it, and in none
   * otherwise. Returns one decision per check, in order. Rejection is a value; a Redis failure
   * rejects the promise.
   *
   * Under Redis Cluster all checks of one call must have the same `ident` (one hash slot).
   * @throws Error (rejects) when two checks name the same scope and ident: a wiring mistake.
   */
  consume(checks: ReadonlyArray<Check>): Promise<Decision[]>;
}

const COMMAND = 'pacelineThrottleRing';

type RingCommand = (numKeys: number, ...keysThenArgs: Array<string | number>) => Promise<number[]>;

/**
 * Creates a throttler over `redis`, on which it defines a custom command so the script is sent
 * by SHA (ioredis resends the body on NOSCRIPT). Keys are `${keyPrefix}throttle:{<ident>}:<scope>`;
 * the braces make every key of one identity share a Redis Cluster hash slot.
 */
export function createThrottler(deps: { redis: Redis | Cluster; keyPrefix: string }): Throttler {
  deps.redis.defineCommand(COMMAND, { lua: RING_SCRIPT });
  const run = (deps.redis as unknown as Record<typeof COMMAND, RingCommand>)[COMMAND].bind(deps.redis);
  return {
    async consume(checks) {
      if (checks.length === 0) return [];
      const keys = checks.map((check) => throttleKey(deps.keyPrefix, check));
      if (new Set(keys).size < keys.length) throw new Error(`throttle checks repeat a scope and ident: ${keys.join(', ')}`);
      const args = checks.flatMap(({ rule }) => [rule.rate.limit, rule.rate.windowMs]);
      const reply = await run(keys.length, ...keys, ...args);
      return checks.map(({ rule }, i) => toDecision(rule, reply.slice(4 * i, 4 * i + 4)));
    },
  };
}

/** The Redis key of one check. @throws Error if the ident contains a brace (it would split the hash tag). */
export function throttleKey(keyPrefix: string, check: Check): string {
  if (/[{}]/.test(check.ident)) throw new Error(`throttle ident must not contain braces: ${check.ident}`);
  return `${keyPrefix}throttle:{${check.ident}}:${check.rule.scope}`;
}

/** True when every scope admitted the request, i.e. it was recorded and may proceed. */
export function isAdmitted(decisions: ReadonlyArray<Decision>): boolean {
  return decisions.every((decision) => decision.allowed);
}

function toDecision(rule: ScopeRule, [allowed = 0, remaining = 0, resetMs = 0, retryAfterS = 0]: number[]): Decision {
  const { limit, windowMs } = rule.rate;
  return { scope: rule.scope, allowed: allowed === 1, limit, windowMs, remaining, resetMs, retryAfterS };
}
