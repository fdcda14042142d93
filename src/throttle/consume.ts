import hashSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { MAX_RULES } from './batches.js';
import { Batcher, type RingCommand } from './batcher.js';
import { Refusals } from './refusals.js';
import { RING_SCRIPT } from './ring-script.js';
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
  /**
   * Set when this process answered without asking Redis, from an earlier refusal of the same
   * log under the same rule (see refusals.ts); every decision of such a request has it.
   */
  local?: true;
}

/** One scope to check: the rule and the identity it counts (`ip:1.2.3.4`, `user:42`). */
export interface Check {
  rule: ScopeRule;
  ident: string;
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
   * Under Redis Cluster all checks of one call must have the same `ident` (one hash slot).
   * @throws Error (rejects) when two checks name the same scope and ident: a wiring mistake.
   */
  consume(checks: ReadonlyArray<Check>): Promise<Decision[]>;
  /**
   * True when this process already knows Redis refused `check` until a moment still ahead, so a
   * request counted by it now would be refused: asks nothing of Redis and records nothing.
   */
  isRefused(check: Check): boolean;
}

const COMMAND = 'pacelineThrottleRing';

/**
 * Creates a throttler over `redis`, on which it defines a custom command so the script is sent
 * by SHA (ioredis resends the body on NOSCRIPT). Keys are `${keyPrefix}throttle:v3:{<ident>}:<scope>`
 * (v3: the log format of ring.lua; a process of another format counts apart instead of clobbering);
 * the braces make every key of one identity share a Redis Cluster hash slot.
 *
 * The requests that reach `consume` in one turn of the event loop are decided by one script call
 * (one per hash slot on a Redis Cluster, at most MAX_BATCH requests each): under load a process
 * pays one round trip for many requests; idle, one per request with no added wait. Each request
 * is still decided atomically and exactly, as if it had a call of its own (see ring-script.ts).
 *
 * With `timeoutMs`, a request not answered within it of asking (time queued behind calls in
 * flight included) is rejected, with the rest of its call. Only the store's slowness counts, not
 * this process's event-loop lag: the deadline is judged after one more poll for I/O (an expired
 * timer runs before the loop reads the sockets), and a call this process sent late is waited for
 * a few round trips. The call carries, in Redis's clock, the latest moment it may start for its
 * answer to be back in time (see redis-clock.ts): started later (Redis paused, frozen, far
 * behind), it records nothing.
 *
 * With `localRefusals` (the default) a client Redis has refused is refused in process until its
 * window frees (see refusals.ts), so a flood of refused requests costs Redis nothing; turned off
 * only to measure that.
 */
export function createThrottler(deps: {
  redis: Redis | Cluster;
  keyPrefix: string;
  timeoutMs?: number;
  localRefusals?: boolean;
}): Throttler {
  const { redis, keyPrefix, timeoutMs, localRefusals = true } = deps;
  redis.defineCommand(COMMAND, { lua: RING_SCRIPT });
  const run = (redis as unknown as Record<`${typeof COMMAND}Buffer`, RingCommand>)[`${COMMAND}Buffer`].bind(redis);
  const batcher = new Batcher(redis, run, timeoutMs);
  const refusals = localRefusals ? new Refusals() : undefined;
  // A Redis that comes back may have lost its logs (restarted empty): only it can say again.
  if (refusals) redis.on('ready', () => refusals.clear());

  return {
    isRefused(check) {
      return refusals?.refuse([check], [throttleKey(keyPrefix, check)], performance.now()) !== undefined;
    },
    consume(checks) {
      return new Promise<Decision[]>((resolve, reject) => {
        if (checks.length === 0) return resolve([]);
        const keys = checks.map((check) => throttleKey(keyPrefix, check));
        if (keys.length > 1 && new Set(keys).size < keys.length)
          throw new Error(`throttle checks repeat a scope and ident: ${keys.join(', ')}`);
        if (checks.length > MAX_RULES) throw new Error(`a request may name at most ${MAX_RULES} throttle scopes`);
        if (redis.isCluster && keys.some((key) => hashSlot(key) !== hashSlot(keys[0] as string))) {
          throw new Error(`on a Redis Cluster the checks of one request must share an ident: ${keys.join(', ')}`);
        }
        if (!refusals) return batcher.push({ checks, keys, resolve, reject });
        const known = refusals.refuse(checks, keys, performance.now());
        if (known) return resolve(known);
        const learn = (decisions: Decision[], sentAt: number) => {
          refusals.learn(checks, keys, decisions, sentAt);
          resolve(decisions);
        };
        batcher.push({ checks, keys, resolve: learn, reject });
      });
    },
  };
}

/** The Redis key of one check. @throws Error if the ident contains a brace (it would split the hash tag). */
export function throttleKey(keyPrefix: string, check: Check): string {
  if (check.ident.includes('{') || check.ident.includes('}'))
    throw new Error(`throttle ident must not contain braces: ${check.ident}`);
  return `${keyPrefix}throttle:v3:{${check.ident}}:${check.rule.scope}`;
}

/** True when every scope admitted the request, i.e. it was recorded and may proceed. */
export function isAdmitted(decisions: ReadonlyArray<Decision>): boolean {
  return decisions.every((decision) => decision.allowed);
}
