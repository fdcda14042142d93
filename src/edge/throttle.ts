import type { Context } from 'koa';
import type { Deps } from '../deps.js';
import { primeThrottleSeries, setThrottleLimits } from '../base/throttle-series.js';
import type { Decision, RefusalAnswer, ScopeName, ScopeRule } from '../throttle/index.js';
import { LocalShare } from '../throttle/local-share.js';
import { createRefusalAnswers, longestWait, rateLimitHeaders } from '../throttle/index.js';
import { identify, ruleFor } from './client-identity.js';
import { REFUSAL_LOG_INTERVAL_MS, REFUSAL_LOG_MAX_CLIENTS, RefusalLog } from './refusal-log.js';
import { answerRefusal, refusalOf } from './refusal.js';
import { createBurstLogger, withoutRedis, type BurstLogger } from './throttle-store-down.js';

/**
 * The throttle of one process: `throttleFor(scope)` counts a request against its scope before any
 * permission check or other work. Without a named scope the general rate applies: `user` for an
 * authenticated client, `anon` otherwise. A named scope (e.g. `token-obtain`) replaces the
 * general rate on its route; one keyed by user (e.g. `reports`) counts only authenticated
 * clients, and anonymous ones (or bad credentials) against `anon`. Store failures are logged once per burst for all
 * routes together; what a check Redis did not answer gets is THROTTLE_FAILURE_MODE's (see `withoutRedis`).
 * @throws Error from `throttleFor` when the named scope has no rule (at start, where the route is declared).
 */
export function createThrottle(deps: Deps, rules: ReadonlyMap<ScopeName, ScopeRule>): (scope?: ScopeName) => RateCheck {
  const shared: Shared = {
    storeErrors: createBurstLogger(deps, 'throttle store unavailable; applying THROTTLE_FAILURE_MODE'),
    shadowLog: createShadowLog(deps),
    localShare: deps.census && new LocalShare({ census: deps.census, logger: deps.logger, metrics: deps.metrics }),
  };
  primeThrottleSeries(deps.metrics, rules.keys());
  setThrottleLimits(deps.metrics, rules.values());
  return (scope) => {
    if (scope !== undefined && !rules.has(scope)) throw new Error(`throttle scope "${scope}" is not configured`);
    if (scope !== undefined && rules.get(scope)?.keyedBy === 'username')
      throw new Error(`throttle scope "${scope}" counts usernames: the login route checks it`);
    if (scope !== undefined) primeThrottleSeries(deps.metrics, [scope]);
    if (scope !== undefined) setThrottleLimits(deps.metrics, [rules.get(scope) as ScopeRule]);
    return throttle(deps, rules, shared, scope);
  };
}

/** What every route's throttle of one app shares: the burst logger, the shadow log, the local share. */
interface Shared {
  storeErrors: BurstLogger;
  shadowLog: ShadowLog;
  localShare: LocalShare | undefined;
}

/**
 * Counts one request against its scope: true when it may go on (with its RateLimit fields set), false when it was
 * answered here with a 429.
 */
export type RateCheck = (ctx: Context) => Promise<boolean>;

function throttle(deps: Deps, rules: ReadonlyMap<ScopeName, ScopeRule>, shared: Shared, scope?: ScopeName): RateCheck {
  const { storeErrors, shadowLog, localShare } = shared;
  const { config } = deps;
  const series = seriesFor(deps);
  // Looked up once: createThrottle has checked that a named scope has its rule.
  const named = scope === undefined ? undefined : rules.get(scope);
  const answers = createRefusalAnswers();
  return async (ctx) => {
    if (!config.THROTTLE_ENABLED) return true;
    const rule = ruleFor(named, rules, ctx.state.user !== null);
    const ident = identify(ctx, rule, deps);
    const bound = series(rule.scope);
    const { duration, storeError, shadowRefused } = bound;
    const started = performance.now();
    let decisions: Decision[];
    try {
      // The throttler applies THROTTLE_TIMEOUT_MS (see deps.ts).
      decisions = await deps.throttler.consume([{ rule, ident }]);
    } catch (error) {
      duration.observe((performance.now() - started) / 1000);
      storeError.inc();
      storeErrors.report(error);
      const decided = withoutRedis(config, localShare, { rule, ident });
      if (!decided) return true;
      decisions = decided;
    }
    const rejected = longestWait(decisions);
    countDecisions(bound, decisions[0]?.degraded === true, rejected !== undefined, started);
    // A refusal answered in process (an earlier refusal by Redis still holds) did not reach Redis:
    // it says nothing of whether Redis is back.
    if (!decisions[0]?.local) {
      storeErrors.recovered();
      localShare?.answered();
    }
    watchDecisions(deps, series, decisions, ident);
    if (rejected) {
      refuse(ctx, answers(decisions, rejected.retryAfterS), rejected, ident, deps.watch?.pseudonym(ident));
      return false;
    }
    if (decisions[0]?.shadowRefused) {
      shadowRefused.inc();
      shadowLog(rule, ident);
      // In the who view beside the enforced refusals, as their own scope (docs/throttling.md "Shadow rules").
      deps.watch?.refused(`${rule.scope}${SHADOW_SUFFIX}`, ident);
    }
    const headers = rateLimitHeaders(decisions);
    // Straight to Node: nothing has been sent yet, and Koa's setter adds only checks for that.
    for (const name in headers) ctx.res.setHeader(name, headers[name] as string);
    // A route that checks another scope of its own (the login's) lists both in the fields; a
    // decision this worker took alone says nothing of the budget in Redis (own-budget.ts).
    if (!decisions[0]?.degraded) ctx.state.rateLimit = decisions;
    return true;
  };
}

/**
 * Counts one request's outcome in its scope's series: with its check time when Redis (or the memory of a refusal by
 * Redis) decided it; as a local decision when this worker decided alone (its time was counted when Redis failed).
 */
function countDecisions(bound: Series, degraded: boolean, rejected: boolean, started: number): void {
  if (degraded) return void (rejected ? bound.local.throttled : bound.local.allowed).inc();
  bound.duration.observe((performance.now() - started) / 1000);
  (rejected ? bound.throttled : bound.allowed).inc();
}

/**
 * Answers a refusal here, as a value rather than a thrown AppError: the JSON body and headers an
 * AppError would be answered with, without an Error's stack or the error middleware's work, so a
 * flood of refused requests stays the cheapest thing this process answers (docs/architecture.md
 * "Throttling"). `ctx.state.refusal` tells the access log who was refused, where and for how long.
 */
function refuse(
  ctx: Context,
  answer: RefusalAnswer,
  rejected: Decision,
  ident: string,
  pseudonym: string | undefined,
): void {
  const refusal = refusalOf(rejected.scope, ident, rejected.retryAfterS, rejected.local === true, pseudonym);
  answerRefusal(ctx, refusal, answer);
}

type Series = ReturnType<ReturnType<typeof seriesFor>>;

/** A scope's metric series, bound once: the per-request path does no label lookups. */
export function seriesFor({ metrics }: Pick<Deps, 'metrics'>) {
  const bound = new Map<ScopeName, ReturnType<typeof bind>>();
  const bind = (scope: ScopeName) => ({
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
  return (scope: ScopeName) => {
    let series = bound.get(scope);
    if (!series) bound.set(scope, (series = bind(scope)));
    return series;
  };
}

/** The who view's name for a scope's shadow refusals: `anon:shadow`. */
export const SHADOW_SUFFIX = ':shadow';

/**
 * What the throttle's watch learns of one request's decisions (docs/throttling.md "Who is
 * throttled"): a refusal counts against its client in memory, with no I/O; an admission that left
 * the client at or under THROTTLE_NEAR_LIMIT_RATIO of its budget counts as near the limit. With
 * THROTTLE_WATCH=off there is no watch, and neither is counted.
 */
export function watchDecisions(
  { config, watch }: Pick<Deps, 'config' | 'watch'>,
  series: ReturnType<typeof seriesFor>,
  decisions: readonly Decision[],
  ident: string,
): void {
  if (!watch) return;
  const rejected = longestWait(decisions);
  if (rejected) return watch.refused(rejected.scope, ident);
  // A worker's share of a limit (Redis unreachable) is near it by the share, not by the limit.
  for (const { scope, remaining, limit, degraded } of decisions)
    if (!degraded && remaining <= limit * config.THROTTLE_NEAR_LIMIT_RATIO) series(scope).nearLimit.inc();
}

type ShadowLog = ReturnType<typeof createShadowLog>;

/**
 * Logs what shadow rules would have refused, sampled per client as refusals are (RefusalLog): the
 * first of a client in an interval as a line naming the rule, the rest summed when it ends.
 */
export function createShadowLog({ logger }: Pick<Deps, 'logger'>) {
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
