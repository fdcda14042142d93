import type { Context } from 'koa';
import type { Deps } from '../deps.js';
import { Errors } from '../base/errors.js';
import { concurrentScope, type Slot } from '../throttle/concurrency.js';
import { CONCURRENCY_RETRY_S, concurrencyFields, concurrencyRefusal } from './throttle-answers.js';
import type { ScopeName, ScopeRule } from '../throttle/index.js';
import type { RefusalAnswer } from './throttle-answers.js';
import { checkOf } from './client-identity.js';
import { createDecide, type Decide, type Limit, type Taken } from './decision.js';
import { answerRefusal } from './refusal.js';
import { createBurstLogger, STORE_DOWN_RETRY_S } from './throttle-store-down.js';

/**
 * The concurrency limits of one process (docs/throttling.md "Concurrency limits"). `limitFor(scope)`
 * is the check that holds a slot of the client in the scope that counts the request (the one
 * the throttle picks, see `ruleFor`) while the request is in progress, when THROTTLE_CONCURRENCY
 * limits that scope, and answers 429 while all of the client's slots are held, on any worker of
 * any host; undefined for a route none of whose scopes is limited. It runs before the rate check,
 * so a request it refuses is not counted by the rate, and a request the rate refuses gives its
 * slot back before its 429 goes out. A client the rate already refuses in process takes no slot.
 * The decision is recorded by decision.ts, as every limit's is.
 */
export function createConcurrencyLimits(
  deps: Deps,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
  decide: Decide = createDecide(deps),
): (scope?: ScopeName) => SlotCheck | undefined {
  const { config } = deps;
  const limits = new Map(Object.entries(config.THROTTLE_CONCURRENCY));
  // Scopes a plan limits (THROTTLE_PLAN_CONCURRENCY) hold slots too, for the users of that plan.
  const planned = new Set(Object.values(config.THROTTLE_PLAN_CONCURRENCY).flatMap((plan) => Object.keys(plan)));
  const limited = new Set([...limits.keys(), ...planned]);
  if (limited.size === 0) return () => undefined;
  const slots = slotLimit(deps, limits);
  decide.declare([...limited].map(concurrentScope));
  return (scope) => {
    const named = scope === undefined ? undefined : rules.get(scope);
    const counted = !named ? ['anon', 'user'] : named.keyedBy === 'user' ? [named.scope, 'anon'] : [named.scope];
    if (!counted.some((name) => limited.has(name))) return undefined;
    return async (ctx) => {
      if (!config.THROTTLE_ENABLED) return FREE;
      // The client's plan may set its limit (docs/throttling.md "Plans and overrides"), or lift it for others.
      const check = checkOf(ctx, named, rules, deps);
      const { rule } = check;
      if (rule.inProgress === undefined && !limits.has(rule.scope)) return FREE;
      // The throttle answers this one from memory, with no Redis: it need not hold a slot for that.
      if (deps.throttler.isRefused(check)) return FREE;
      const decided = await decide.take(slots, check);
      if (!decided?.slot) return FREE;
      if (decided.refusal) {
        answerRefusal(ctx, decided.refusal.refusal, decided.refusal.answer);
        return 'refused';
      }
      const { slot } = decided;
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

/**
 * Slots as the decision takes them (decision.ts): a client's requests in progress in Redis; without Redis,
 * this worker's share of them (THROTTLE_FAILURE_MODE=local), none held (open), or a 503 (closed).
 */
function slotLimit(deps: Deps, limits: ReadonlyMap<string, number>): Limit {
  const { config } = deps;
  const local = deps.alone?.slots;
  const answers = new Map<string, RefusalAnswer>();
  const request = ({ rule, ident }: { rule: ScopeRule; ident: string }) => ({
    scope: rule.scope,
    ident,
    limit: rule.inProgress ?? (limits.get(rule.scope) as number),
  });
  const taken = (slot: Slot, scope: ScopeName): Taken => ({
    by: slot.degraded ? 'alone' : 'store',
    refused: slot.admitted ? undefined : { scope: concurrentScope(scope), retryAfterS: CONCURRENCY_RETRY_S },
    decisions: [],
    slot,
  });
  return {
    store: { errors: createBurstLogger(deps, 'concurrency store unavailable; applying THROTTLE_FAILURE_MODE') },
    series: concurrentScope,
    take: async (check) => taken(await deps.slots.acquire(request(check)), check.rule.scope),
    withoutStore(check) {
      if (local) return taken(local.acquire(request(check)), check.rule.scope);
      if (config.THROTTLE_FAILURE_MODE !== 'closed') return undefined;
      throw Errors.unavailable('Rate limiting is temporarily unavailable; try again shortly.', STORE_DOWN_RETRY_S);
    },
    answer({ slot, refused }) {
      const local = slot?.degraded === true;
      const key = `${refused!.scope} ${slot!.limit} ${local}`;
      let answer = answers.get(key);
      if (!answer) answers.set(key, (answer = concurrencyRefusal(refused!.scope, slot!.limit, local)));
      return answer;
    },
  };
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
