import hashSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { batches, callArguments, MAX_CHECKS, type Pending } from './batches.js';
import { Batcher, type RingCommand } from './batcher.js';
import { Refusals } from './refusals.js';
import { answer } from './reply.js';
import { RING_SCRIPT } from './ring-script.js';
import type { Check, Decision, Throttler } from './throttler.js';

const COMMAND = 'pacelineThrottleRing';

/**
 * Creates a throttler over `redis` (docs/architecture.md "Throttling"), the script defined as a
 * custom command sent by SHA. Keys are `${keyPrefix}throttle:v3:{<ident>}:<scope>` (v3: ring.lua's
 * log format; the braces keep one identity in one Redis Cluster slot). The requests of one
 * event-loop turn share one script call per hash slot (at most MAX_BATCH each), each decided as if
 * it had a call of its own. `timeoutMs`: a request not answered within it of asking is rejected
 * with the rest of its call, and a call Redis starts too late records nothing. `localRefusals`
 * (default true): a client Redis has refused is refused in process until its window frees, for a cost at least
 * the refused one's.
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
  const knownRefusal = (check: Check) =>
    unaffordable([check]) ?? refusals?.refuse([check], [throttleKey(keyPrefix, check)], performance.now());

  return {
    isRefused: (check) => knownRefusal(check) !== undefined,
    knownRefusal,
    consume(checks) {
      return new Promise<Decision[]>((resolve, reject) => {
        if (checks.length === 0) return resolve([]);
        const keys = checks.map((check) => throttleKey(keyPrefix, check));
        if (keys.length > 1 && new Set(keys).size < keys.length)
          throw new Error(`throttle checks repeat a scope and ident: ${keys.join(', ')}`);
        if (checks.length > MAX_CHECKS) throw new Error(`a request may name at most ${MAX_CHECKS} throttle scopes`);
        const overLimit = unaffordable(checks);
        if (overLimit) return resolve(overLimit);
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
    peek(checks) {
      return peek(
        redis,
        run,
        checks.map((check) => throttleKey(keyPrefix, check)),
        checks,
        timeoutMs,
      );
    },
  };
}

/**
 * Each check decided by the script in peek mode (ring.lua's ARGV[4]), one call per hash slot,
 * recording nothing; rejects when a call fails or takes longer than `timeoutMs`.
 */
async function peek(
  redis: Redis | Cluster,
  run: RingCommand,
  keys: string[],
  checks: ReadonlyArray<Check>,
  timeoutMs = 5_000,
): Promise<Decision[]> {
  const decisions: Decision[] = [];
  const requests: Pending[] = checks.map((check, i) => ({
    checks: [check],
    keys: [keys[i] as string],
    resolve: ([decision]) => (decisions[i] = decision as Decision),
    reject: (error) => {
      throw error;
    },
  }));
  await Promise.all(
    batches(requests, redis.isCluster).map(async (batch) => {
      const call = callArguments(batch, true);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`throttle store did not answer within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        const reply = await Promise.race([
          run(call.keys.length, ...call.keys, call.ruleList, call.layout, '0', '1'),
          late,
        ]);
        answer(batch, call.checkCount, reply, performance.now());
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return decisions;
}

/**
 * The decisions of a request some check of which costs more than its limit, so that no wait would admit it
 * (docs/throttling.md "Cost: requests that weigh more"): that check refused in process (`overLimit`, no wait), the
 * others not asked; undefined when every cost fits. @throws Error for a cost that is not a positive integer.
 */
export function unaffordable(checks: ReadonlyArray<Check>): Decision[] | undefined {
  let over = false;
  for (const { cost, rule } of checks) {
    if (cost === undefined || cost === 1) continue;
    if (!Number.isSafeInteger(cost) || cost < 1) throw new Error(`a throttle cost must be a positive integer: ${cost}`);
    if (cost > rule.rate.limit && !rule.inShadow) over = true;
  }
  if (!over) return undefined;
  return checks.map(({ rule, cost = 1 }) => {
    const { scope, rate, inShadow } = rule;
    // A scope wholly in shadow refuses nothing: it only marks what it would have refused.
    const fits = cost <= rate.limit || inShadow === true;
    const decision: Decision = {
      scope,
      allowed: fits,
      limit: rate.limit,
      windowMs: rate.windowMs,
      remaining: fits ? rate.limit : 0,
      resetMs: 0,
      retryAfterS: 0,
      local: true,
    };
    if (!fits) decision.overLimit = cost;
    if (inShadow) decision.inShadow = true;
    return decision;
  });
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
