import type { Check, Decision } from './throttler.js';

/** Bytes of the script's reply per check: allowed, remaining, resetMs, retryAfterS as doubles. */
const RESULT_BYTES = 32;

/** Bytes of Redis's clock (µs, a double) that follow the checks' results in every reply. */
const CLOCK_BYTES = 8;

/** The first double of the reply of a call that reached Redis after its deadline (nothing recorded). */
const EXPIRED = -2;

/** A check's first double when the request was admitted but the check's shadow rule would have refused it. */
const SHADOW_REFUSED = 2;

/** A request waiting for the script's reply: its checks, and where their decisions go. */
export interface Awaiting {
  checks: ReadonlyArray<Check>;
  /** `sentAt`: when the call that decided them was sent (`performance.now()`); the script ran after it. */
  resolve: (decisions: Decision[], sentAt: number) => void;
  reject: (error: Error) => void;
}

/** True when the call reached Redis after its deadline, so it decided and recorded nothing. */
export function isExpired(reply: Buffer): boolean {
  return reply.readDoubleLE(0) === EXPIRED;
}

/**
 * Redis's clock (µs) in a reply: after the results, or after the EXPIRED mark. @throws Error for a reply of another
 * shape.
 */
export function clockOf(reply: Buffer, checkCount: number): number {
  const expired = reply.length === 2 * CLOCK_BYTES && reply.readDoubleLE(0) === EXPIRED;
  if (!expired && reply.length < RESULT_BYTES * checkCount + CLOCK_BYTES)
    throw new Error(`throttle script replied ${reply.length} bytes for ${checkCount} checks`);
  return reply.readDoubleLE(expired ? CLOCK_BYTES : RESULT_BYTES * checkCount);
}

/**
 * Hands each request of a batch its decisions from the reply of the script call sent at `sentAt` (see
 * ring-script.ts).
 */
export function answer(batch: ReadonlyArray<Awaiting>, checkCount: number, reply: Buffer, sentAt: number): void {
  const end = RESULT_BYTES * checkCount + CLOCK_BYTES;
  const errors = reply.length > end ? reply.subarray(end).toString().split('\n') : [];
  let at = 0;
  for (const { checks, resolve, reject } of batch) {
    if (reply.readDoubleLE(at) === -1) {
      reject(new Error(errors.shift() ?? 'throttle script failed'));
      at += RESULT_BYTES * checks.length;
      continue;
    }
    const decisions: Decision[] = [];
    for (const { rule } of checks) {
      const verdict = reply.readDoubleLE(at);
      const decision: Decision = {
        scope: rule.scope,
        allowed: verdict >= 1,
        limit: rule.rate.limit,
        windowMs: rule.rate.windowMs,
        remaining: reply.readDoubleLE(at + 8),
        resetMs: reply.readDoubleLE(at + 16),
        retryAfterS: reply.readDoubleLE(at + 24),
      };
      if (verdict === SHADOW_REFUSED) decision.shadowRefused = true;
      if (rule.inShadow) decision.inShadow = true;
      decisions.push(decision);
      at += RESULT_BYTES;
    }
    resolve(decisions, sentAt);
  }
}
