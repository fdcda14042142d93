import hashSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { createRedisClock, type RedisClock } from './redis-clock.js';
import { answer, clockOf, isExpired, type Awaiting } from './reply.js';
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

/** Requests decided by one script call at most, so one call never holds Redis for long. */
const MAX_BATCH = 128;

/**
 * Rounds of script calls a process has waiting for Redis at once (a round is one call, or one
 * per MAX_BATCH requests or hash slot); later requests queue and go together in the next round
 * when a call answers or times out. Idle, a request is sent at once; under load, the calls grow.
 */
const MAX_IN_FLIGHT = 2;

/**
 * How long a call sent after its requests' deadline (this process lagging) is still waited for:
 * this many of the quickest round trips seen, at least LATE_SEND_GRACE_MS, at most the timeout.
 */
const LATE_SEND_ROUND_TRIPS = 4;
const LATE_SEND_GRACE_MS = 50;

/** Distinct rules one script call can name (the layout holds indices as single bytes). */
const MAX_RULES = 127;

type RingCommand = (numKeys: number, ...keysThenArgs: string[]) => Promise<Buffer>;

interface Pending extends Awaiting {
  keys: string[];
}

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
 */
export function createThrottler(deps: { redis: Redis | Cluster; keyPrefix: string; timeoutMs?: number }): Throttler {
  const { redis, keyPrefix, timeoutMs } = deps;
  redis.defineCommand(COMMAND, { lua: RING_SCRIPT });
  const run = (redis as unknown as Record<`${typeof COMMAND}Buffer`, RingCommand>)[`${COMMAND}Buffer`].bind(redis);
  let queue: Pending[] = [];
  let inFlight = 0;
  // One per server: the masters of a Redis Cluster need not agree on the time.
  const clocks = new Map<string, RedisClock>();
  const clockFor = (batch: Pending[]): RedisClock => {
    const server = redis.isCluster ? ((redis as Cluster).slots[hashSlot(batch[0]?.keys[0] as string)]?.[0] ?? '') : '';
    let clock = clocks.get(server);
    if (!clock) clocks.set(server, (clock = createRedisClock()));
    return clock;
  };
  let scheduled = false;
  /** When the oldest queued request asked: the deadline of its call counts from then. */
  let queuedSince = 0;
  /** When a call last went unanswered past its deadline. */
  let lastExpiry = Number.NEGATIVE_INFINITY;

  const schedule = () => {
    if (scheduled || queue.length === 0 || inFlight >= MAX_IN_FLIGHT) return;
    scheduled = true;
    setImmediate(flush);
  };

  const flush = () => {
    scheduled = false;
    if (inFlight >= MAX_IN_FLIGHT) return;
    const pending = queue;
    queue = [];
    for (const batch of batches(pending, redis.isCluster)) decide(batch, queuedSince);
  };

  const decide = (batch: Pending[], since: number, retried = false) => {
    const keys: string[] = [];
    const rules = new Map<ScopeRule, number>();
    // Bytes 1–127 only: sent as a string, they are the same bytes in UTF-8, and ioredis writes
    // an all-string command in one piece.
    const layout: number[] = [];
    for (const request of batch) {
      layout.push(request.checks.length);
      for (const { rule } of request.checks) {
        let index = rules.get(rule);
        if (index === undefined) rules.set(rule, (index = rules.size + 1));
        layout.push(index);
      }
      for (const key of request.keys) keys.push(key);
    }
    let ruleList = '';
    for (const { rate } of rules.keys()) ruleList += `${rate.limit} ${rate.windowMs} `;
    if (timeoutMs !== undefined && lastExpiry >= since && performance.now() >= since + timeoutMs) {
      // Queued behind calls that got no answer in time: refused unsent, so a Redis that comes back
      // later does not record admissions for requests already answered under THROTTLE_FAILURE_MODE.
      // (A deadline passed only through this process's own lag is still sent and judged as usual.)
      rejectAll(batch, unanswered(timeoutMs));
      return;
    }
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const clock = timeoutMs === undefined ? undefined : clockFor(batch);
    const link = clock?.estimate();
    const sentAt = performance.now();
    // When this process stops waiting: the deadline, or, for a call this process's own lag sent
    // late, a few round trips after sending (only the store's slowness counts against a check).
    const grace = Math.min(timeoutMs ?? 0, Math.max(LATE_SEND_GRACE_MS, LATE_SEND_ROUND_TRIPS * (link?.roundTripMs ?? 0)));
    const giveUpAt = timeoutMs === undefined ? Number.POSITIVE_INFINITY : Math.max(since + timeoutMs, sentAt + grace);
    if (timeoutMs !== undefined) {
      const expire = () => settle(() => {
        lastExpiry = performance.now();
        rejectAll(batch, unanswered(timeoutMs));
      });
      timer = setTimeout(() => setImmediate(expire), Math.max(0, giveUpAt - sentAt));
    }
    const settle = (finish: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      inFlight--;
      finish();
      schedule();
    };
    inFlight++;
    // The latest moment, in Redis's clock, at which the call may start for its reply to be back
    // by giveUpAt: started later, it records nothing, so a request answered under
    // THROTTLE_FAILURE_MODE (a 503 in `closed`) is not counted once Redis catches up.
    const deadline = link === undefined ? 0 : Math.ceil((giveUpAt + link.offsetMs - link.roundTripMs) * 1000);
    run(keys.length, ...keys, ruleList, String.fromCharCode(...layout), String(deadline)).then(
      (reply) => settle(() => {
        try {
          const redisNowMs = clockOf(reply, keys.length) / 1000;
          const readAt = performance.now();
          if (!isExpired(reply)) {
            clock?.sample(sentAt, redisNowMs, readAt);
            answer(batch, keys.length, reply);
          } else if (!retried && readAt < giveUpAt - (link?.roundTripMs ?? 0)) {
            // Expired by Redis's clock, yet back with time for another round trip by ours: Redis's
            // clock has stepped forward since the estimate. Learnt afresh, the batch (recorded
            // nowhere) goes again.
            clock?.reset(sentAt, redisNowMs, readAt);
            decide(batch, since, true);
          } else {
            lastExpiry = readAt;
            rejectAll(batch, unanswered(timeoutMs ?? 0));
          }
        } catch (error) {
          // A reply not of the script's shape; requests already answered keep their answer.
          rejectAll(batch, error as Error);
        }
      }),
      (error: unknown) => settle(() => rejectAll(batch, error as Error)),
    );
  };

  return {
    consume(checks) {
      return new Promise<Decision[]>((resolve, reject) => {
        if (checks.length === 0) return resolve([]);
        const keys = checks.map((check) => throttleKey(keyPrefix, check));
        if (keys.length > 1 && new Set(keys).size < keys.length) throw new Error(`throttle checks repeat a scope and ident: ${keys.join(', ')}`);
        if (checks.length > MAX_RULES) throw new Error(`a request may name at most ${MAX_RULES} throttle scopes`);
        if (redis.isCluster && keys.some((key) => hashSlot(key) !== hashSlot(keys[0] as string))) {
          throw new Error(`on a Redis Cluster the checks of one request must share an ident: ${keys.join(', ')}`);
        }
        if (queue.length === 0) queuedSince = performance.now();
        queue.push({ checks, keys, resolve, reject });
        schedule();
      });
    },
  };
}

const unanswered = (timeoutMs: number) => new Error(`throttle store did not answer within ${timeoutMs} ms`);

function rejectAll(batch: Pending[], error: Error): void {
  for (const request of batch) request.reject(error);
}

/**
 * The queued requests as script calls, in arrival order: at most MAX_BATCH requests and
 * MAX_RULES distinct rules each; on a Cluster one group per hash slot (all keys of one request
 * share its ident's slot).
 */
function batches(pending: Pending[], byHashSlot: boolean): Pending[][] {
  const groups = new Map<number, Pending[]>();
  for (const request of pending) {
    const slot = byHashSlot ? hashSlot(request.keys[0] as string) : 0;
    const group = groups.get(slot);
    if (group) group.push(request);
    else groups.set(slot, [request]);
  }
  const calls: Pending[][] = [];
  for (const group of groups.values()) {
    let call: Pending[] = [];
    let rules = new Set<ScopeRule>();
    for (const request of group) {
      let fresh = 0;
      for (const { rule } of request.checks) if (!rules.has(rule)) fresh++;
      if (call.length === MAX_BATCH || rules.size + fresh > MAX_RULES) {
        calls.push(call);
        call = [];
        rules = new Set();
      }
      call.push(request);
      for (const { rule } of request.checks) rules.add(rule);
    }
    if (call.length > 0) calls.push(call);
  }
  return calls;
}

/** The Redis key of one check. @throws Error if the ident contains a brace (it would split the hash tag). */
export function throttleKey(keyPrefix: string, check: Check): string {
  if (check.ident.includes('{') || check.ident.includes('}')) throw new Error(`throttle ident must not contain braces: ${check.ident}`);
  return `${keyPrefix}throttle:v3:{${check.ident}}:${check.rule.scope}`;
}

/** True when every scope admitted the request, i.e. it was recorded and may proceed. */
export function isAdmitted(decisions: ReadonlyArray<Decision>): boolean {
  return decisions.every((decision) => decision.allowed);
}
