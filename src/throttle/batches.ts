import hashSlot from 'cluster-key-slot';
import type { Awaiting } from './reply.js';
import type { ScopeRule } from './scopes.js';

/** Requests decided by one script call at most, so one call never holds Redis for long. */
const MAX_BATCH = 128;

/** Distinct rules one script call can name (the layout holds indices as single bytes). */
export const MAX_RULES = 127;

/** A queued request: the keys of its checks, in order, and where its decisions go. */
export interface Pending extends Awaiting {
  keys: string[];
}

/** What one script call sends besides its keys' count (see ring-script.ts). */
export interface CallArguments {
  /** Every check's key, request after request. */
  keys: string[];
  /** The call's distinct rules as `N ms N ms …`. */
  ruleList: string;
  /** Per request its number of checks, then their 1-based rule indices, one character each. */
  layout: string;
}

/** The keys, rule list and layout of one script call deciding `batch`. */
export function callArguments(batch: ReadonlyArray<Pending>): CallArguments {
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
  return { keys, ruleList, layout: String.fromCharCode(...layout) };
}

/**
 * The queued requests as script calls, in arrival order: at most MAX_BATCH requests and
 * MAX_RULES distinct rules each; on a Cluster one group per hash slot (all keys of one request
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
