import hashSlot from 'cluster-key-slot';
import type { Awaiting } from './reply.js';
import type { Check } from './throttler.js';
import type { Rate } from './rate.js';
import type { ScopeRule } from './scopes.js';

/** Requests decided by one script call at most, so one call never holds Redis for long. */
const MAX_BATCH = 128;

/** Distinct rates one script call can name (the layout holds indices as single bytes, 127 meaning none). */
const MAX_RULES = 126;

/** Checks one request may have: the layout holds their count as one byte, from 64 when paired. */
export const MAX_CHECKS = 63;

/** Layout marks of ring.lua: a request with shadow rules counts its checks from PAIRED; NONE names no rule. */
const PAIRED = 64;
const NONE = 127;

/** A queued request: the keys of its checks, in order, and where its decisions go. */
export interface Pending extends Awaiting {
  keys: string[];
}

/** What one script call sends besides its keys' count (see ring-script.ts). */
export interface CallArguments {
  /** Every check's key, request after request, each followed by its shadow log's when it has one. */
  keys: string[];
  /** The call's distinct rates as `N ms N ms …`. */
  ruleList: string;
  /** Per request its number of checks, then their 1-based rate indices, one character each. */
  layout: string;
  /** The checks decided: the reply holds one result for each. */
  checkCount: number;
  /** Every check's cost, `c c …` in order, when any costs more than 1; else '' (the script's ARGV[5]). */
  costs: string;
}

/** The key of a check's shadow log: beside its log, in the same hash slot (docs/throttling.md "Shadow rules"). */
function shadowKey(key: string): string {
  return `${key}:shadow`;
}

/** The rates a check's rule names: its own, and its shadow rate when it has one beside an enforced one. */
function ratesOf(rule: ScopeRule): Rate[] {
  return rule.shadow && !rule.inShadow ? [rule.rate, rule.shadow] : [rule.rate];
}

/** The keys, rule list and layout of one script call deciding `batch`; `peek` sends every check plain. */
export function callArguments(batch: ReadonlyArray<Pending>, peek = false): CallArguments {
  const keys: string[] = [];
  const rates = new Map<Rate, number>();
  const indexOf = (rate: Rate) => {
    let index = rates.get(rate);
    if (index === undefined) rates.set(rate, (index = rates.size + 1));
    return index;
  };
  // Bytes 1–127 only: sent as a string, they are the same bytes in UTF-8, and ioredis writes
  // an all-string command in one piece.
  const layout: number[] = [];
  let checkCount = 0;
  let weighted = false;
  for (const request of batch) {
    const { checks } = request;
    checkCount += checks.length;
    let paired = false;
    for (const { rule, cost } of checks) {
      if (rule.shadow !== undefined || rule.inShadow) paired = !peek;
      if (cost !== undefined && cost !== 1) weighted = !peek;
    }
    layout.push(paired ? PAIRED + checks.length : checks.length);
    for (let i = 0; i < checks.length; i++) {
      const { rule } = checks[i] as Check;
      const key = request.keys[i] as string;
      keys.push(key);
      if (!paired) layout.push(indexOf(rule.rate));
      else if (rule.inShadow) layout.push(NONE, indexOf(rule.rate));
      else if (!rule.shadow) layout.push(indexOf(rule.rate), NONE);
      else {
        layout.push(indexOf(rule.rate), indexOf(rule.shadow));
        keys.push(shadowKey(key));
      }
    }
  }
  let ruleList = '';
  for (const { limit, windowMs } of rates.keys()) ruleList += `${limit} ${windowMs} `;
  return { keys, ruleList, layout: String.fromCharCode(...layout), checkCount, costs: weighted ? costsOf(batch) : '' };
}

/** Every check's cost in order, `1 5 1 …`: sent only for a batch with a cost above 1, so others parse nothing. */
function costsOf(batch: ReadonlyArray<Pending>): string {
  let costs = '';
  for (const { checks } of batch) for (const { cost = 1 } of checks) costs += `${cost} `;
  return costs;
}

/**
 * The queued requests as script calls, in arrival order: at most MAX_BATCH requests and
 * MAX_RULES distinct rates each; on a Cluster one group per hash slot (all keys of one request
 * share its ident's slot).
 */
export function batches(pending: Pending[], byHashSlot: boolean): Pending[][] {
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
    let rates = new Set<Rate>();
    for (const request of group) {
      // (a rate named twice by one request counts twice here: at worst the call ends early)
      let fresh = 0;
      for (const { rule } of request.checks) for (const rate of ratesOf(rule)) if (!rates.has(rate)) fresh++;
      if (call.length === MAX_BATCH || rates.size + fresh > MAX_RULES) {
        calls.push(call);
        call = [];
        rates = new Set();
      }
      call.push(request);
      for (const { rule } of request.checks) for (const rate of ratesOf(rule)) rates.add(rate);
    }
    if (call.length > 0) calls.push(call);
  }
  return calls;
}
