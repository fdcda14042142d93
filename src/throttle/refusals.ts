import type { Check, Decision } from './throttler.js';
import type { ScopeRule } from './scopes.js';

/** Refusals one process remembers at most; past it the one learnt longest ago is forgotten. */
const MAX_REFUSALS = 10_000;

/**
 * Until when, in this process's clock (`performance.now()`), Redis has said a client's window on a
 * rule is full, so that its requests before then are refused without asking Redis again; why this
 * refuses nothing Redis would admit: docs/architecture.md "Throttling". Any admission of the log,
 * or a Redis connection that comes back, forgets it; a log deleted by hand is not seen until the
 * moment passes. A refusal of a request costing c units refuses here only requests costing at least c (a cheaper
 * one may fit, and goes to Redis). Bounded (MAX_REFUSALS, oldest forgotten first).
 */
export class Refusals {
  /**
   * Redis key → the rule it was refused under, the refused request's cost, and when that window frees for that
   * cost, in this process's clock (ms). One entry per key: an admission of the key under any rule (a reload may
   * change the rule, and the script may shorten the log) forgets it. Map order: oldest learnt first.
   */
  private readonly until = new Map<string, Held>();

  constructor(private readonly max = MAX_REFUSALS) {}

  /** Refusals held now (expired ones not yet looked up included). */
  get size(): number {
    return this.until.size;
  }

  /** Forgets every refusal: Redis came back (perhaps empty), so only it can say. */
  clear(): void {
    this.until.clear();
  }

  /**
   * The decisions for a request some of whose checks are known to be refused at `now`, or
   * undefined when none is (the request must go to Redis). `keys` are the checks' Redis keys.
   */
  refuse(checks: ReadonlyArray<Check>, keys: ReadonlyArray<string>, now: number): Decision[] | undefined {
    if (this.until.size === 0) return undefined;
    let waits: Array<Held | undefined> | undefined;
    for (let i = 0; i < checks.length; i++) {
      const key = keys[i] as string;
      const held = this.until.get(key);
      const check = checks[i] as Check;
      if (held === undefined || held.rule !== ruleId(check.rule) || (check.cost ?? 1) < held.cost) continue;
      if (held.freeAt <= now) {
        this.until.delete(key);
        continue;
      }
      waits ??= new Array<Held | undefined>(checks.length);
      waits[i] = held;
    }
    if (!waits) return undefined;
    const known = waits;
    return checks.map(({ rule }, i) => {
      const held = known[i];
      return held === undefined ? notAsked(rule) : refused(rule, held.freeAt - now, held.remaining);
    });
  }

  /**
   * Learns from Redis's decisions for one request, decided by a call sent at `sentAt` (this
   * process's clock). A refused check's `resetMs` counts from the moment the script ran, which
   * was after `sentAt`: counted from `sentAt` instead, the window frees here no later than it
   * frees in Redis. That is the clock offset of this very call (see redis-clock.ts), taken at
   * the end of its uncertainty that lets requests through to Redis sooner, never later. (The
   * least offset of earlier calls would be tighter by part of a round trip, but stale if
   * Redis's clock has since stepped forward.) `resetMs` is rounded up to whole ms, hence the 1
   * taken off. A check Redis found room for forgets any refusal of its log held here. Of two refusals of one
   * log, the later is kept; of the same cost, the later moment (both are safe).
   */
  learn(
    checks: ReadonlyArray<Check>,
    keys: ReadonlyArray<string>,
    decisions: ReadonlyArray<Decision>,
    sentAt: number,
  ): void {
    for (let i = 0; i < decisions.length; i++) {
      const decision = decisions[i] as Decision;
      if (decision.allowed && this.until.size === 0) continue;
      const key = keys[i] as string;
      if (decision.allowed) {
        this.until.delete(key);
        continue;
      }
      // A refusal that no wait ends (a cost above the limit) says nothing of the log.
      if (decision.overLimit) continue;
      const check = checks[i] as Check;
      const rule = ruleId(check.rule);
      const cost = check.cost ?? 1;
      const freeAt = sentAt + decision.resetMs - 1;
      // A later refusal under the same rule and cost frees no sooner; keep the later of the two (both are safe).
      const known = this.until.get(key);
      if (known !== undefined) this.until.delete(key);
      else if (this.until.size >= this.max) this.until.delete(this.until.keys().next().value as string);
      const same = known?.rule === rule && known.cost === cost;
      const remaining = same ? Math.min(decision.remaining, known.remaining) : decision.remaining;
      this.until.set(key, { rule, cost, freeAt: same ? Math.max(freeAt, known.freeAt) : freeAt, remaining });
    }
  }
}

/** A refusal held: its rule's id, the refused request's cost, when its window frees, the units Redis said were left. */
interface Held {
  rule: string;
  cost: number;
  freeAt: number;
  remaining: number;
}

/** Rules' ids, built once per rule object: `refuse` runs for every request of a refused flood. */
const ruleIds = new WeakMap<ScopeRule, string>();

/** A rule as a refusal remembers it: its limit and window. */
function ruleId(rule: ScopeRule): string {
  let id = ruleIds.get(rule);
  if (id === undefined) ruleIds.set(rule, (id = `${rule.rate.limit}/${rule.rate.windowMs}`));
  return id;
}

/**
 * What Redis would answer for a check whose window frees in `waitMs`, with the units it last said were left (0
 * for a request of cost 1): see ring.lua's refusal.
 */
function refused(rule: ScopeRule, waitMs: number, remaining: number): Decision {
  const { limit, windowMs } = rule.rate;
  return {
    scope: rule.scope,
    allowed: false,
    limit,
    windowMs,
    remaining,
    resetMs: Math.ceil(waitMs),
    retryAfterS: Math.max(1, Math.ceil(waitMs / 1000)),
    local: true,
  };
}

/**
 * A check of a request refused here by another of its checks. Redis was not asked and nothing
 * was recorded (all-or-nothing): the check refused nothing, so it reads allowed, and as nothing
 * is known of its log, with its whole budget.
 */
function notAsked(rule: ScopeRule): Decision {
  const { limit, windowMs } = rule.rate;
  return {
    scope: rule.scope,
    allowed: true,
    limit,
    windowMs,
    remaining: limit,
    resetMs: 0,
    retryAfterS: 0,
    local: true,
    ...(rule.inShadow ? { inShadow: true as const } : {}),
  };
}
