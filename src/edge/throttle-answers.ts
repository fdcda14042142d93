// What the throttle's decisions say in HTTP (docs/throttling.md): the RateLimit fields, and every 429's fields and
// bytes, DRF's and as problem details, the rate's, the concurrency limit's and the over-limit one. src/throttle/
// decides; the edge answers.
import { quotaExceededProblem, type ViolatedPolicy } from './quota-problem.js';
import type { Rate } from '../throttle/rate.js';
import type { Decision } from '../throttle/throttler.js';

/** The field that marks an answer decided by one worker's share of the limit, without Redis. */
const DEGRADED_FIELD = 'Paceline-Throttle';

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers, structured-field lists) for
 * a request's decisions, one list member per scope, e.g.
 * `RateLimit-Policy: "user";q=100;w=60` and `RateLimit: "user";r=42;t=18`.
 *
 * `q` is the limit, `w` the window in seconds, `r` the remaining requests and `t` the seconds
 * until `r` next grows (`ceil(resetMs / 1000)`; on a 429 the same as `Retry-After`, as the draft
 * asks). No decisions (or only scopes wholly in shadow), no fields. Decisions this worker took
 * alone while Redis was unreachable (`degraded`) add `Paceline-Throttle: local`; their `r` and
 * `t` are of the worker's share (docs/throttling.md "When Redis is unreachable").
 */
export function rateLimitHeaders(decisions: ReadonlyArray<Decision>): Record<string, string> {
  if (decisions.length === 0) return {};
  // Built by concatenation: this runs for every throttled request.
  let policy = '';
  let state = '';
  for (const { scope, limit, windowMs, remaining, resetMs, inShadow } of decisions) {
    // A scope wholly in shadow limits nothing, so it promises the client nothing.
    if (inShadow) continue;
    const name = quote(scope);
    const separator = policy === '' ? '' : ', ';
    policy += `${separator}${name};q=${limit};w=${Math.ceil(windowMs / 1000)}`;
    state += `${separator}${name};r=${remaining};t=${Math.ceil(resetMs / 1000)}`;
  }
  if (policy === '') return {};
  const fields: Record<string, string> = { 'RateLimit-Policy': policy, RateLimit: state };
  if (decisions[0]?.degraded) fields[DEGRADED_FIELD] = 'local';
  return fields;
}

/** A 429's own header fields (a flat name, value list) and body. */
export interface RefusalBytes {
  readonly fields: readonly string[];
  readonly body: Buffer;
}

/**
 * A 429 whichever path answers it, shared and never changed: DRF's (`fields`, `body`), and the same answer as
 * RFC 9457 problem details (`problem()`: `Content-Type: application/problem+json` and the quota-exceeded body),
 * built on its first use and kept with it (docs/api.md "Problem details").
 */
export interface RefusalAnswer extends RefusalBytes {
  problem(): RefusalBytes;
}

/**
 * What a refusal adds to its 429, waiting `retryAfterS`: the RateLimit fields of `decisions`, `Retry-After`, the
 * JSON content type, and DRF's body `{"detail":"Request was throttled. Expected available in 37 seconds."}`; as
 * problem details, the policies of the refusing decisions (those not in shadow), with the plan or override that set
 * `policy.scope`'s quota for the client, if one did.
 */
export function refusalAnswer(
  decisions: ReadonlyArray<Decision>,
  retryAfterS: number,
  policy?: { scope: string; plan?: string; override?: number },
): RefusalAnswer {
  const fields: string[] = [];
  const limits = rateLimitHeaders(decisions);
  for (const name in limits) fields.push(name, limits[name] as string);
  fields.push('Retry-After', String(retryAfterS));
  return answerWith(fields, retryAfterS, () => {
    const violated: ViolatedPolicy[] = [];
    for (const { allowed, inShadow, scope, limit, windowMs } of decisions)
      if (!allowed && !inShadow) {
        const member: ViolatedPolicy = { scope, quota: limit, window: Math.ceil(windowMs / 1000) };
        // Which plan or override set the client's quota (docs/throttling.md "Plans and overrides").
        if (policy?.scope === scope && policy.plan !== undefined) member.plan = policy.plan;
        if (policy?.scope === scope && policy.override !== undefined) member.override = String(policy.override);
        violated.push(member);
      }
    return violated;
  });
}

/**
 * A refusal's answer from its own fields (before the content type): DRF's JSON, and its problem details, whose
 * `policies` are read on first use.
 */
function answerWith(own: readonly string[], retryAfterS: number, policies: () => ViolatedPolicy[]): RefusalAnswer {
  const detail = throttledDetail(retryAfterS);
  let problem: RefusalBytes | undefined;
  return {
    fields: [...own, 'Content-Type', 'application/json; charset=utf-8'],
    body: Buffer.from(JSON.stringify({ detail })),
    problem: () =>
      (problem ??= {
        fields: [...own, 'Content-Type', 'application/problem+json'],
        body: Buffer.from(JSON.stringify(quotaExceededProblem(policies(), retryAfterS, detail))),
      }),
  };
}

/**
 * `refusalAnswer` with its last answer kept: a flood's refusals of one rule wait the same whole seconds for a second
 * at a time, so one answer serves them all (docs/throttling.md "Refusals: the cheap answer, logged by sample").
 */
export function createRefusalAnswers(): (decisions: ReadonlyArray<Decision>, retryAfterS: number) => RefusalAnswer {
  let last: { decision: Decision; resetS: number; retryAfterS: number; answer: RefusalAnswer } | undefined;
  return (decisions, retryAfterS) => {
    if (decisions.length !== 1) return refusalAnswer(decisions, retryAfterS);
    const decision = decisions[0] as Decision;
    const resetS = Math.ceil(decision.resetMs / 1000);
    if (last && retryAfterS === last.retryAfterS && resetS === last.resetS) {
      const known = last.decision;
      // What rateLimitHeaders and the problem details read of a decision besides its reset.
      const same =
        decision.scope === known.scope &&
        decision.limit === known.limit &&
        decision.windowMs === known.windowMs &&
        decision.remaining === known.remaining &&
        decision.allowed === known.allowed &&
        decision.inShadow === known.inShadow &&
        decision.degraded === known.degraded;
      if (same) return last.answer;
    }
    const answer = refusalAnswer(decisions, retryAfterS);
    last = { decision, resetS, retryAfterS, answer };
    return answer;
  };
}

/** Seconds a client refused by a concurrency limit is told to wait: a slot frees whenever a request ends. */
export const CONCURRENCY_RETRY_S = 1;

/**
 * A concurrency limit's members of the RateLimit fields, with the draft's `concurrent-requests` quota unit and no
 * window or reset (a slot frees when a request ends, at no known time), named `scope` (`user:concurrent`):
 * `"user:concurrent";q=4;qu="concurrent-requests"` and `"user:concurrent";r=3`.
 */
export function concurrencyFields(scope: string, limit: number, remaining: number): { policy: string; state: string } {
  const name = quote(scope);
  return { policy: `${name};q=${limit};qu="concurrent-requests"`, state: `${name};r=${remaining}` };
}

/**
 * A concurrency refusal's 429 (docs/throttling.md "Concurrency limits"): its RateLimit fields with `r=0`
 * (`Paceline-Throttle: local` when this worker decided alone), `Retry-After: 1` and DRF's body; as problem
 * details, its policy with the `concurrent-requests` unit and no window.
 */
export function concurrencyRefusal(scope: string, limit: number, degraded: boolean): RefusalAnswer {
  const { policy, state } = concurrencyFields(scope, limit, 0);
  const fields = ['RateLimit-Policy', policy, 'RateLimit', state];
  if (degraded) fields.push(DEGRADED_FIELD, 'local');
  fields.push('Retry-After', String(CONCURRENCY_RETRY_S));
  return answerWith(fields, CONCURRENCY_RETRY_S, () => [{ scope, quota: limit, quotaUnit: 'concurrent-requests' }]);
}

/** The 429 body's detail: `Request was throttled. Expected available in 37 seconds.` (`1 second.`). */
export function throttledDetail(seconds: number): string {
  return `Request was throttled. Expected available in ${seconds} ${seconds === 1 ? 'second' : 'seconds'}.`;
}

/**
 * The rejecting decision with the longest wait, whose `retryAfterS` the 429 reports; undefined
 * when every decision allowed the request.
 */
export function longestWait(decisions: ReadonlyArray<Decision>): Decision | undefined {
  let longest: Decision | undefined;
  for (const decision of decisions) {
    if (!decision.allowed && (!longest || decision.retryAfterS > longest.retryAfterS)) longest = decision;
  }
  return longest;
}

/** A structured-field String (RFC 8941 §3.3.3): quotes with `"` and `\` escaped. */
function quote(value: string): string {
  // Scope names never need escaping (see buildScopes); the check keeps this correct for any string.
  if (!value.includes('"') && !value.includes('\\')) return `"${value}"`;
  return `"${value.replace(/[\\"]/g, '\\$&')}"`;
}

/** The over-limit 429's detail: `Request costs 50 units; the limit is 10 per hour.` */
export function overLimitDetail(cost: number, rate: Rate): string {
  return `Request costs ${cost} ${cost === 1 ? 'unit' : 'units'}; the limit is ${rateInWords(rate)}.`;
}

/**
 * The 429 of a request that costs more than the limit of a refusing decision (its `overLimit`): no wait
 * would admit it, so it carries no `Retry-After` and no `RateLimit` field (whose `t` would promise one), only
 * `RateLimit-Policy` for every decision not in shadow; DRF's body has the detail above, the problem details the
 * violated policies and no `retry-after`.
 */
export function overLimitAnswer(decisions: readonly Decision[]): RefusalAnswer {
  const refusing = decisions.find((decision) => decision.overLimit !== undefined);
  const detail = refusing
    ? overLimitDetail(refusing.overLimit as number, { limit: refusing.limit, windowMs: refusing.windowMs, text: '' })
    : 'Request costs more than the limit.';
  const policies: string[] = [];
  const violated: ViolatedPolicy[] = [];
  for (const { scope, limit, windowMs, inShadow, overLimit } of decisions) {
    if (inShadow) continue;
    const window = Math.ceil(windowMs / 1000);
    policies.push(`"${scope}";q=${limit};w=${window}`);
    if (overLimit !== undefined) violated.push({ scope, quota: limit, window });
  }
  const own = policies.length > 0 ? ['RateLimit-Policy', policies.join(', ')] : [];
  let problem: RefusalBytes | undefined;
  return {
    fields: [...own, 'Content-Type', 'application/json; charset=utf-8'],
    body: Buffer.from(JSON.stringify({ detail })),
    problem: () => {
      if (problem) return problem;
      const body: Record<string, unknown> = quotaExceededProblem(violated, 0, detail);
      delete body['retry-after'];
      return (problem = {
        fields: [...own, 'Content-Type', 'application/problem+json'],
        body: Buffer.from(JSON.stringify(body)),
      });
    },
  };
}

/** `10 per hour`, `300 per 5 minutes`: a rate as the over-limit message says it. */
function rateInWords({ limit, windowMs }: Rate): string {
  for (const [ms, unit] of UNITS) {
    if (windowMs % ms !== 0) continue;
    const count = windowMs / ms;
    return count === 1 ? `${limit} per ${unit}` : `${limit} per ${count} ${unit}s`;
  }
  return `${limit} per ${windowMs} ms`;
}

const UNITS: ReadonlyArray<readonly [number, string]> = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1_000, 'second'],
];
