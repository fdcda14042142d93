import hashSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { MAX_RULES } from './batches.js';
import { Batcher, type RingCommand } from './batcher.js';
import { Refusals } from './refusals.js';
import { RING_SCRIPT } from './ring-script.js';
import type { Check, Decision, Throttler } from './types.js';

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
