import type { Deps } from '../deps.js';
import type { Check, Decision, ScopeName, ScopeRule } from '../throttle/index.js';
import type { RefusalAnswer } from './throttle-answers.js';
import { refusalAnswer } from './throttle-answers.js';
import { primeThrottleSeries, setThrottleLimits } from './throttle-series.js';
import type { Slot } from '../throttle/concurrency.js';
import { REFUSAL_LOG_INTERVAL_MS, REFUSAL_LOG_MAX_CLIENTS, RefusalLog } from './refusal-log.js';
import { refusalOf } from './refusal.js';
import type { Refusal } from './request-state.js';
import type { BurstLogger } from './throttle-store-down.js';

/**
 * What a throttle decision does, in one place (docs/throttling.md "One decision, whichever limit takes it"):
 * whichever limit takes it — a rate in Redis (throttle.ts), the login budget (src/api/auth/login-limit.ts), a concurrency
 * slot (concurrency.ts) or the memory of an earlier refusal (known-refusal.ts) — the decision is counted in its
 * scope's series, its shadow refusal logged, the who view told, and a refusal recorded with its 429. The limits
 * are the inputs: how they decide, what they do without their store, and the bytes of their 429.
 */

/** How a decision was taken: by the store (Redis), from this process's memory of a refusal by it, or alone. */
export type DecidedBy = 'store' | 'memory' | 'alone';

/** One limit's decision on one request. */
export interface Taken {
  by: DecidedBy;
  /** The refusing scope (as the who view names it) and the wait; undefined when the request may go on. */
  refused: { scope: string; retryAfterS: number } | undefined;
  /** A rate's decisions, whose near-limit counts and shadow refusals are read (none for a slot). */
  decisions: readonly Decision[];
  /** A concurrency limit's slot, held until the request ends. */
  slot?: Slot;
}

/** A limit as the decision takes it. */
export interface Limit {
  /** Its store's failures, logged once per burst, and who hears that the store answered again. */
  store: { errors: BurstLogger; answered?(): void };
  /** The series a check counts in: the rate's scope, or the concurrency limit's name (`reports:concurrent`). */
  series(scope: ScopeName): string;
  /** Asks the store; rejects when it cannot answer. */
  take(check: Check): Promise<Taken>;
  /**
   * What a check the store did not answer gets: a decision taken alone, or undefined (admitted uncounted).
   * @throws AppError 503 when the limit refuses service without its store.
   */
  withoutStore(check: Check): Taken | undefined;
  /**
   * The 429 of a refusal; `counted` are the request's decisions its RateLimit fields list, `rule` the one that
   * counted it (a plan's or an override's, which its problem details name).
   */
  answer(taken: Taken, counted: readonly Decision[], rule: ScopeRule): RefusalAnswer;
}

/** A refusal: who was refused, where and for how long, and the 429 that says so. */
export interface KnownRefusal {
  refusal: Refusal;
  answer: RefusalAnswer;
}

/** A decision and, when it refused, its refusal. */
export type Decided = Taken & { refusal?: KnownRefusal };

export type Decide = ReturnType<typeof createDecide>;

/**
 * The decision of every limit of one app: `take` asks a limit for one request's decision and records it;
 * `record` records one taken without the store (an answer from memory, before Koa); `declare` creates a limit's
 * series as it learns its scopes. Undefined from `take`:
 * the store did not answer and the request goes on uncounted (THROTTLE_FAILURE_MODE=open, or a shadow scope).
 */
export function createDecide(deps: Pick<Deps, 'config' | 'metrics' | 'watch' | 'logger'>) {
  const series = seriesFor(deps);
  const refusedBy = refusalsByPolicy(deps);
  const shadowLog = createShadowLog(deps);
  const { config, watch } = deps;

  function record(
    limit: Pick<Limit, 'series' | 'answer'>,
    check: Check,
    taken: Taken,
    started: number,
    counted?: readonly Decision[],
  ): Decided {
    const bound = series(limit.series(check.rule.scope));
    const { refused, decisions } = taken;
    // A decision taken alone had its check time counted when the store failed.
    if (taken.by === 'alone') (refused ? bound.local.throttled : bound.local.allowed).inc();
    else {
      bound.duration.observe((performance.now() - started) / 1000);
      (refused ? bound.throttled : bound.allowed).inc();
    }
    if (refused) {
      watch?.refused(refused.scope, check.ident);
      refusedBy(check.rule).inc();
      const { retryAfterS } = refused;
      const refusal = refusalOf(
        refused.scope,
        check.ident,
        retryAfterS,
        taken.by !== 'store',
        watch?.pseudonym(check.ident),
      );
      const answer = limit.answer(taken, counted === undefined ? decisions : [...counted, ...decisions], check.rule);
      return { ...taken, refusal: { refusal, answer } };
    }
    if (decisions[0]?.shadowRefused) {
      bound.shadowRefused.inc();
      shadowLog(check.rule, check.ident);
      // In the who view beside the enforced refusals, as their own scope (docs/throttling.md "Shadow rules").
      watch?.refused(`${check.rule.scope}${SHADOW_SUFFIX}`, check.ident);
    }
    // A worker's share of a limit (Redis unreachable) is near it by the share, not by the limit.
    if (watch)
      for (const { scope, remaining, limit: n, degraded } of decisions)
        if (!degraded && remaining <= n * config.THROTTLE_NEAR_LIMIT_RATIO) series(scope).nearLimit.inc();
    return taken;
  }

  async function take(limit: Limit, check: Check, counted?: readonly Decision[]): Promise<Decided | undefined> {
    const started = performance.now();
    let taken: Taken | undefined;
    try {
      taken = await limit.take(check);
    } catch (error) {
      const bound = series(limit.series(check.rule.scope));
      bound.duration.observe((performance.now() - started) / 1000);
      bound.storeError.inc();
      limit.store.errors.report(error);
      taken = limit.withoutStore(check);
      if (!taken) return undefined;
    }
    // What memory or this worker alone decided says nothing of whether the store is back.
    if (taken.by === 'store') {
      limit.store.errors.recovered();
      limit.store.answered?.();
    }
    return record(limit, check, taken, started, counted);
  }

  /**
   * A limit's series, created at zero before its first decision, and the limit and window gauges of the rules it
   * counts by (src/base/throttle-series.ts); called as each limit learns its scopes.
   */
  function declare(series: Iterable<string>, rules: Iterable<ScopeRule> = []): void {
    primeThrottleSeries(deps.metrics, series);
    setThrottleLimits(deps.metrics, rules);
  }

  return { take, record, declare };
}

/**
 * A rate's 429: the one kept for the settings' rules (`answers`), or, for a rule a plan or an override set, one whose
 * problem details name it (docs/throttling.md "Plans and overrides").
 */
export function answerFor(
  answers: (decisions: readonly Decision[], retryAfterS: number) => RefusalAnswer,
  counted: readonly Decision[],
  taken: Taken,
  { scope, plan, override }: ScopeRule,
): RefusalAnswer {
  const retryAfterS = taken.refused!.retryAfterS;
  if (plan === undefined && override === undefined) return answers(counted, retryAfterS);
  return refusalAnswer(counted, retryAfterS, { scope, plan, override });
}

/** How a rate's decisions were taken: alone (`degraded`), from memory (`local`), or by Redis. */
export function takenFrom(decisions: readonly Decision[], refused: Decision | undefined): Taken {
  const first = decisions[0];
  const by = first?.degraded ? 'alone' : first?.local ? 'memory' : 'store';
  return { by, decisions, refused: refused && { scope: refused.scope, retryAfterS: refused.retryAfterS } };
}

/**
 * A rule's series of refusals by the policy that set its limit (docs/throttling.md "Plans and overrides"): its
 * plan's name (`default`: the settings), or `override`. Bound once per scope and policy.
 */
function refusalsByPolicy({ metrics }: Pick<Deps, 'metrics'>) {
  const bound = new Map<string, ReturnType<typeof metrics.throttlePlanRefusals.labels>>();
  return (rule: ScopeRule) => {
    const plan = rule.override !== undefined ? 'override' : (rule.plan ?? 'default');
    const key = `${rule.scope} ${plan}`;
    let counter = bound.get(key);
    if (!counter) bound.set(key, (counter = metrics.throttlePlanRefusals.labels({ scope: rule.scope, plan })));
    return counter;
  };
}

/** The who view's name for a scope's shadow refusals: `anon:shadow`. */
const SHADOW_SUFFIX = ':shadow';

/** A scope's metric series, bound once: the per-request path does no label lookups. */
function seriesFor({ metrics }: Pick<Deps, 'metrics'>) {
  const bound = new Map<string, ReturnType<typeof bind>>();
  const bind = (scope: string) => ({
    duration: metrics.throttleCheckDuration.labels({ scope }),
    allowed: metrics.throttleDecisions.labels({ scope, decision: 'allowed' }),
    throttled: metrics.throttleDecisions.labels({ scope, decision: 'throttled' }),
    storeError: metrics.throttleDecisions.labels({ scope, decision: 'store_error' }),
    shadowRefused: metrics.throttleDecisions.labels({ scope, decision: 'shadow_refused' }),
    local: {
      allowed: metrics.throttleLocalDecisions.labels({ scope, decision: 'allowed' }),
      throttled: metrics.throttleLocalDecisions.labels({ scope, decision: 'throttled' }),
    },
    nearLimit: metrics.throttleNearLimit.labels({ scope }),
  });
  return (scope: string) => {
    let series = bound.get(scope);
    if (!series) bound.set(scope, (series = bind(scope)));
    return series;
  };
}

/**
 * Logs what shadow rules would have refused, sampled per client as refusals are (RefusalLog): the
 * first of a client in an interval as a line naming the rule, the rest summed when it ends.
 */
function createShadowLog({ logger }: Pick<Deps, 'logger'>) {
  const log = new RefusalLog(
    logger,
    REFUSAL_LOG_INTERVAL_MS,
    REFUSAL_LOG_MAX_CLIENTS,
    'shadow rule would have refused',
  );
  return (rule: ScopeRule, client: string) => {
    const shadowRate = (rule.inShadow ? rule.rate : rule.shadow)?.text;
    if (log.note({ scope: rule.scope, client, retryAfterS: 0, local: false }))
      logger.info({ scope: rule.scope, client, shadowRate }, 'shadow rule would refuse');
  };
}
