/**
 * The limits oracle (docs/verify.md "Limits are exact"), on times in nanoseconds. A request was decided
 * somewhere between its invoke and its completion, so a verdict holds for every placement allowed by those
 * bounds: "over the limit" only when more than `limit` admissions certainly fell within one window, and
 * "under-admission" only when a refusal came while fewer than `limit` admissions could have been in its
 * window. Requests that got no answer may have been admitted: they count against the second, not the first.
 */
export interface Timed {
  op: number;
  invoke: number;
  complete: number;
}

export interface LimitFindings {
  /** The most admissions certainly inside one window, and the ops that show it. */
  maxInWindow: number;
  overLimit: number[] | null;
  /** Refusals that came while fewer than `limit` admissions could have been in their window. */
  unjustified: { op: number; possible: number }[];
  /** Refusals judged (those whose whole window lies after the identity's first request). */
  judged: number;
}

export function analyseLimits(input: {
  admitted: Timed[];
  refused: Timed[];
  unknown: Timed[];
  limit: number;
  windowNs: number;
  /** The identity's first request: refusals whose window reaches before it are not judged. */
  start: number;
}): LimitFindings {
  const { limit, windowNs } = input;
  const byInvoke = [...input.admitted].sort((a, b) => a.invoke - b.invoke);
  let maxInWindow = 0;
  let overLimit: number[] | null = null;
  for (let i = 0; i < byInvoke.length; i++) {
    const from = byInvoke[i]!.invoke;
    const inside = byInvoke.slice(i).filter((other) => other.complete < from + windowNs);
    if (inside.length > maxInWindow) {
      maxInWindow = inside.length;
      if (inside.length > limit) overLimit = inside.map((other) => other.op);
    }
  }
  const maybe = [...input.admitted, ...input.unknown];
  const unjustified: { op: number; possible: number }[] = [];
  let judged = 0;
  for (const refusal of input.refused) {
    if (refusal.invoke - windowNs < input.start) continue;
    judged++;
    const possible = maybe.filter((a) => a.complete > refusal.invoke - windowNs && a.invoke < refusal.complete).length;
    if (possible < limit) unjustified.push({ op: refusal.op, possible });
  }
  return { maxInWindow, overLimit, unjustified, judged };
}

/** Admissions in the trailing window at each admission's completion: the line the report plots. */
export function trailingCounts(admitted: Timed[], windowNs: number): [number, number][] {
  const times = admitted.map((a) => a.complete).sort((a, b) => a - b);
  const points: [number, number][] = [];
  let first = 0;
  for (let i = 0; i < times.length; i++) {
    while (times[first]! <= times[i]! - windowNs) first++;
    points.push([times[i]!, i - first + 1]);
  }
  return points;
}

/** Reads `RateLimit-Policy: "user";q=100;w=60` (the first policy): its limit and window. */
export function readPolicy(header: string | undefined): { limit: number; windowMs: number } | undefined {
  if (header === undefined) return undefined;
  const first = header.split(',')[0] ?? '';
  const q = /;\s*q=(\d+)/.exec(first);
  const w = /;\s*w=(\d+)/.exec(first);
  if (!q || !w) return undefined;
  return { limit: Number(q[1]), windowMs: Number(w[1]) * 1000 };
}

/** The number in a DRF throttle detail ("… Expected available in 37 seconds."), if it has one. */
export function detailSeconds(body: unknown): number | undefined {
  const detail = (body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail !== 'string') return undefined;
  const match = /available in (\d+) seconds?\./.exec(detail);
  return match ? Number(match[1]) : undefined;
}

/**
 * Retry-After honesty, judged from the history while demand went on: after a 429 that said "wait s
 * seconds", an admission must come no later than a request sent at that second (plus `slackNs` for the
 * gap between requests). Refusals whose stated second falls after the last request are not judged.
 */
export function dishonestRetryAfter(
  refused: (Timed & { retryAfterS: number })[],
  admitted: Timed[],
  slackNs: number,
  lastInvoke: number,
): { op: number; statedS: number; firstAdmissionAfterS: number | null }[] {
  const admissions = [...admitted].sort((a, b) => a.invoke - b.invoke);
  const found: { op: number; statedS: number; firstAdmissionAfterS: number | null }[] = [];
  for (const refusal of refused) {
    const due = refusal.complete + refusal.retryAfterS * 1e9;
    if (due + slackNs > lastInvoke) continue;
    const next = admissions.find((a) => a.complete > refusal.complete);
    if (next !== undefined && next.invoke <= due + slackNs) continue;
    const after = next === undefined ? null : (next.invoke - refusal.complete) / 1e9;
    found.push({ op: refusal.op, statedS: refusal.retryAfterS, firstAdmissionAfterS: after });
  }
  return found;
}

/**
 * The window of a sliding log, to the second, from its refusals' `Retry-After` (docs/verify.md "The limit, when
 * the service states none"): each states the whole seconds, rounded up as DRF's `wait()` is, until `first` (the
 * oldest admission in the window) leaves it, so that moment lies in (invoke + s − 1, complete + s] of every
 * refusal, and before the completion of an admission that came once a slot freed (`freed`). The window is that
 * moment less when `first` was decided. Undefined unless exactly one whole second fits.
 */
export function windowFromRetryAfter(
  first: Timed,
  refusals: (Timed & { retryAfterS: number })[],
  freed?: Timed,
): number | undefined {
  let leavesAfter = -Infinity;
  let leavesBy = freed?.complete ?? Infinity;
  for (const refusal of refusals) {
    leavesAfter = Math.max(leavesAfter, refusal.invoke + (refusal.retryAfterS - 1) * 1e9);
    leavesBy = Math.min(leavesBy, refusal.complete + refusal.retryAfterS * 1e9);
  }
  const [above, atMost] = [(leavesAfter - first.complete) / 1e9, (leavesBy - first.invoke) / 1e9];
  if (!Number.isFinite(above) || !Number.isFinite(atMost)) return undefined;
  const seconds = Math.floor(above) + 1;
  return seconds <= atMost && seconds + 1 > atMost && seconds >= 1 ? seconds * 1000 : undefined;
}
