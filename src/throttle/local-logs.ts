import type { Check, Decision } from './throttler.js';
import type { ScopeRule } from './scopes.js';

/** Client logs one worker keeps at most while Redis is unreachable; past it, the one used longest ago is dropped. */
const MAX_LOCAL_LOGS = 10_000;

/** Slots a window is cut into: an admission is forgotten at most a tenth of a window after it leaves the window. */
export const LOCAL_SLOTS = 10;

/**
 * The share of a limit one of `workers` web workers enforces alone: the limit divided by the
 * workers, rounded to the nearest whole request, at least 1. A deployment whose requests spread
 * over its workers then admits at most `limit + workers / 2` per window (within 1.5× the limit
 * whenever the limit is at least the number of workers); a client held on one worker gets one share.
 */
export function localShare(limit: number, workers: number): number {
  return Math.max(1, Math.round(limit / Math.max(1, workers)));
}

/** One client's admitted units in one scope, counted per slot of its window. */
interface Log {
  /** The window the slots cut (another rule over the same key starts the log afresh). */
  windowMs: number;
  /** The slots that still hold admissions, oldest first: slot `s` holds [s·width, (s+1)·width). */
  slots: number[];
  counts: number[];
  total: number;
}

/**
 * The admissions one worker made alone while Redis was unreachable (docs/throttling.md "When
 * Redis is unreachable"), as sliding logs per scope and client, in this process's clock (ms). A
 * log counts its admissions per tenth of the window and forgets a tenth only once its last
 * moment has left the window: it never admits more than the share in any window, and at worst
 * refuses for a tenth of a window longer than an exact log would. Bounded: at most `max` logs of
 * LOCAL_SLOTS + 1 counts each, whatever the limits.
 */
export class LocalLogs {
  /** Scope and client → log; Map order: the log used longest ago first. */
  private readonly logs = new Map<string, Log>();

  constructor(private readonly max = MAX_LOCAL_LOGS) {}

  /** Logs held now. */
  get size(): number {
    return this.logs.size;
  }

  /** Forgets every admission: Redis answers again, and only it counts. */
  clear(): void {
    this.logs.clear();
  }

  /**
   * Decides one request at `now` by each check's share of its limit with `workers` workers
   * (see `localShare`), all or nothing as Redis does: admitted iff every check has room, and then
   * recorded in every check's log. A check of cost c has room iff its units plus c fit the share, or
   * its log is empty: a share below the cost still admits one such request per window (docs/throttling.md "Cost:
   * requests that weigh more"). Returns one decision per check, each `local` and `degraded`.
   */
  consume(checks: ReadonlyArray<Check>, workers: number, now: number): Decision[] {
    const logs = checks.map(({ rule, ident }) => this.logOf(`${rule.scope} ${ident}`, rule.rate.windowMs, now));
    const shares = checks.map(({ rule }) => localShare(rule.rate.limit, workers));
    const fits = (log: Log, share: number, cost: number) => log.total === 0 || log.total + cost <= share;
    const admitted = logs.every((log, i) => fits(log, shares[i] as number, checks[i]?.cost ?? 1));
    return checks.map(({ rule, cost = 1 }, i) => {
      const log = logs[i] as Log;
      const share = shares[i] as number;
      const room = fits(log, share, cost);
      if (admitted) record(log, now, cost);
      return decision(rule, log, room, Math.max(0, share - log.total), now);
    });
  }

  /** The log of `key` with what has left its window dropped, made the most recently used. */
  private logOf(key: string, windowMs: number, now: number): Log {
    let log = this.logs.get(key);
    if (log) this.logs.delete(key);
    else if (this.logs.size >= this.max) this.logs.delete(this.logs.keys().next().value as string);
    if (!log || log.windowMs !== windowMs) log = { windowMs, slots: [], counts: [], total: 0 };
    this.logs.set(key, log);
    while (log.slots.length > 0 && leavesAt(log, log.slots[0] as number) <= now) {
      log.total -= log.counts[0] as number;
      log.slots.shift();
      log.counts.shift();
    }
    return log;
  }
}

/** When an admission of `slot` is forgotten: once the slot's last moment has left the window. */
function leavesAt(log: Log, slot: number): number {
  const width = log.windowMs / LOCAL_SLOTS;
  return (slot + 1) * width + log.windowMs;
}

function record(log: Log, now: number, cost: number): void {
  const slot = Math.floor(now / (log.windowMs / LOCAL_SLOTS));
  const last = log.slots.length - 1;
  if (log.slots[last] === slot) log.counts[last] = (log.counts[last] as number) + cost;
  else {
    log.slots.push(slot);
    log.counts.push(cost);
  }
  log.total += cost;
}

/**
 * A check's decision as Redis's would read: whether it had `room`, the units its share still
 * admits after this one (read after recording), and the wait until its oldest slot is forgotten (the earliest
 * moment it admits more).
 */
function decision(rule: ScopeRule, log: Log, room: boolean, remaining: number, now: number): Decision {
  const { limit, windowMs } = rule.rate;
  const oldest = log.slots[0];
  const resetMs = oldest === undefined ? 0 : Math.max(0, Math.ceil(leavesAt(log, oldest) - now));
  const retryAfterS = room ? 0 : Math.max(1, Math.ceil(resetMs / 1000));
  return {
    scope: rule.scope,
    allowed: room,
    limit,
    windowMs,
    remaining,
    resetMs,
    retryAfterS,
    local: true,
    degraded: true,
  };
}
