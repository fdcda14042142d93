import type { Context } from 'koa';
import type { Deps } from '../deps.js';
import { Errors } from '../base/errors.js';
import { primeThrottleSeries } from '../base/throttle-series.js';
import {
  concurrentScope,
  createConcurrencyLimiter,
  type ConcurrencyLimiter,
  type Slot,
  type SlotRequest,
} from '../throttle/concurrency.js';
import { CONCURRENCY_RETRY_S, concurrencyFields, concurrencyRefusal } from '../throttle/headers.js';
import type { RefusalAnswer, ScopeName, ScopeRule } from '../throttle/index.js';
import { LocalSlots } from '../throttle/local-slots.js';
import { identify, ruleFor } from './client-identity.js';
import { answerRefusal, refusalOf } from './refusal.js';
import { seriesFor } from './throttle.js';
import { createBurstLogger, STORE_DOWN_RETRY_S, type BurstLogger } from './throttle-store-down.js';

/** What every route's concurrency limit of one app shares. */
interface Shared {
  limiter: ConcurrencyLimiter;
  local: LocalSlots | undefined;
  storeErrors: BurstLogger;
  series: ReturnType<typeof seriesFor>;
  answers: Map<string, RefusalAnswer>;
}

/**
 * The concurrency limits of one process (docs/throttling.md "Concurrency limits"). `limitFor(scope)`
 * is the check that holds a slot of the client in the scope that counts the request (the one
 * the throttle picks, see `ruleFor`) while the request is in progress, when THROTTLE_CONCURRENCY
 * limits that scope, and answers 429 while all of the client's slots are held, on any worker of
 * any host; undefined for a route none of whose scopes is limited. It runs before the rate check,
 * so a request it refuses is not counted by the rate, and a request the rate refuses gives its
 * slot back before its 429 goes out. A client the rate already refuses in process takes no slot.
 */
export function createConcurrencyLimits(
  deps: Deps,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
): (scope?: ScopeName) => SlotCheck | undefined {
  const { config } = deps;
  const limits = new Map(Object.entries(config.THROTTLE_CONCURRENCY));
  if (limits.size === 0) return () => undefined;
  const shared: Shared = {
    limiter: createConcurrencyLimiter({
      redis: deps.redis,
      keyPrefix: config.REDIS_PREFIX,
      expiryMs: config.THROTTLE_CONCURRENCY_EXPIRY_MS,
      timeoutMs: config.THROTTLE_TIMEOUT_MS,
    }),
    local: deps.census && new LocalSlots(deps.census),
    storeErrors: createBurstLogger(deps, 'concurrency store unavailable; applying THROTTLE_FAILURE_MODE'),
    series: seriesFor(deps),
    answers: new Map(),
  };
  primeThrottleSeries(deps.metrics, [...limits.keys()].map(concurrentScope));
  return (scope) => {
    const named = scope === undefined ? undefined : rules.get(scope);
    const counted = !named ? ['anon', 'user'] : named.keyedBy === 'user' ? [named.scope, 'anon'] : [named.scope];
    if (!counted.some((name) => limits.has(name))) return undefined;
    return async (ctx) => {
      if (!config.THROTTLE_ENABLED) return FREE;
      const rule = ruleFor(named, rules, ctx.state.user !== null);
      const limit = limits.get(rule.scope);
      if (limit === undefined) return FREE;
      const ident = identify(ctx, rule, deps);
      // The throttle answers this one from memory, with no Redis: it need not hold a slot for that.
      if (deps.throttler.isRefused({ rule, ident })) return FREE;
      const slot = await hold(deps, shared, { scope: rule.scope, ident, limit });
      if (!slot) return FREE;
      if (!slot.admitted) {
        refuse(ctx, deps, shared, rule.scope, ident, slot);
        return 'refused';
      }
      return {
        async release() {
          await slot.release();
          if (!ctx.state.refusal && !ctx.res.headersSent) addFields(ctx, rule.scope, slot);
        },
      };
    };
  };
}

/** A slot held while the request runs; released (its fields added to the answer) when it ends. */
export interface Held {
  release(): Promise<void>;
}

/** Nothing held: the request has no limit of requests in progress, or it is left to the throttle. */
const FREE: Held = { release: async () => {} };

/** Takes a slot of the request's scope for the client, or answers 429 (`'refused'`) when none is free. */
export type SlotCheck = (ctx: Context) => Promise<Held | 'refused'>;

async function hold(deps: Deps, shared: Shared, request: SlotRequest): Promise<Slot | undefined> {
  const bound = shared.series(concurrentScope(request.scope));
  const started = performance.now();
  try {
    const slot = await shared.limiter.acquire(request);
    bound.duration.observe((performance.now() - started) / 1000);
    (slot.admitted ? bound.allowed : bound.throttled).inc();
    shared.storeErrors.recovered();
    return slot;
  } catch (error) {
    bound.duration.observe((performance.now() - started) / 1000);
    bound.storeError.inc();
    shared.storeErrors.report(error);
    if (shared.local) {
      const slot = shared.local.acquire(request);
      (slot.admitted ? bound.local.allowed : bound.local.throttled).inc();
      return slot;
    }
    if (deps.config.THROTTLE_FAILURE_MODE !== 'closed') return undefined;
    throw Errors.unavailable('Rate limiting is temporarily unavailable; try again shortly.', STORE_DOWN_RETRY_S);
  }
}

/** Answers a concurrency refusal as the throttle answers its own: a 429 value, logged by sample, in the who view. */
function refuse(ctx: Context, deps: Deps, shared: Shared, scope: ScopeName, ident: string, slot: Slot): void {
  const name = concurrentScope(scope);
  const local = slot.degraded === true;
  const refusal = refusalOf(name, ident, CONCURRENCY_RETRY_S, local, deps.watch?.pseudonym(ident));
  deps.watch?.refused(name, ident);
  const key = `${name} ${slot.limit} ${local}`;
  let answer = shared.answers.get(key);
  if (!answer) shared.answers.set(key, (answer = concurrencyRefusal(name, slot.limit, local)));
  answerRefusal(ctx, refusal, answer);
}

/** Adds the limit's members to the RateLimit fields the throttle set (a list each, so one more member). */
function addFields(ctx: Context, scope: ScopeName, slot: Slot): void {
  const { policy, state } = concurrencyFields(concurrentScope(scope), slot.limit, slot.remaining);
  for (const [name, member] of [
    ['RateLimit-Policy', policy],
    ['RateLimit', state],
  ] as const) {
    const before = ctx.res.getHeader(name);
    ctx.res.setHeader(name, before === undefined ? member : `${String(before)}, ${member}`);
  }
  if (slot.degraded) ctx.res.setHeader('Paceline-Throttle', 'local');
}
