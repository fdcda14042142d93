/**
 * The limits oracle (docs/verify.md "Limits are exact"), on times in nanoseconds. A request was decided
 * somewhere between its invoke and its completion, so a verdict holds for every placement allowed by those
 * bounds: "over the limit" only when more than the limit certainly fell within one window, and
 * "under-admission" only when a refusal came while its units would have fitted beside every admission that could
 * have been in its window. Requests that got no answer may have been admitted: they count against the second, not
 * the first. Counts are in units (docs/verify.md "Weighted routes"): a request weighs `units` (1 unless given) and
 * was decided under `limit`, the limit its answer stated (the input's unless given).
 */
export interface Timed {
  op: number;
  invoke: number;
  complete: number;
}

/** A request with what it weighs and the limit it was decided under, where they are not 1 and the identity's. */
export interface Weighed extends Timed {
  units?: number;
  limit?: number;
}

export interface LimitFindings {
  /** The most units certainly inside one window, and the ops of the window that exceeds its limit most. */
  maxInWindow: number;
  overLimit: number[] | null;
  /** That window's units and the highest limit its admissions were decided under. */
  excess: { units: number; limit: number } | null;
  /** Refusals that came while their units fitted beside all that could have been in their window. */
  unjustified: { op: number; possible: number }[];
  /** Refusals judged (those whose whole window lies after the identity's first request). */
  judged: number;
}

export function analyseLimits(input: {
  admitted: Weighed[];
  refused: Weighed[];
  unknown: Weighed[];
  limit: number;
  windowNs: number;
  /** The identity's first request: refusals whose window reaches before it are not judged. */
  start: number;
}): LimitFindings {
  const { windowNs } = input;
  const limitOf = (t: Weighed) => t.limit ?? input.limit;
  const byInvoke = [...input.admitted].sort((a, b) => a.invoke - b.invoke);
  let maxInWindow = 0;
  let worst: { ops: number[]; units: number; limit: number } | null = null;
  for (let i = 0; i < byInvoke.length; i++) {
    const from = byInvoke[i]!.invoke;
    const inside = byInvoke.slice(i).filter((other) => other.complete < from + windowNs);
    if (inside.length === 0) continue;
    const units = unitsOf(inside);
    // The last of them to be decided found the others in its window, under a limit no higher than this.
    const limit = Math.max(...inside.map(limitOf));
    maxInWindow = Math.max(maxInWindow, units);
    if (units > limit && (worst === null || units - limit > worst.units - worst.limit))
      worst = { ops: inside.map((other) => other.op), units, limit };
  }
  const maybe = [...input.admitted, ...input.unknown];
  const unjustified: { op: number; possible: number }[] = [];
  let judged = 0;
  for (const refusal of input.refused) {
    if (refusal.invoke - windowNs < input.start) continue;
    judged++;
    const possible = unitsOf(
      maybe.filter((a) => a.complete > refusal.invoke - windowNs && a.invoke < refusal.complete),
    );
    if (possible + (refusal.units ?? 1) <= limitOf(refusal)) unjustified.push({ op: refusal.op, possible });
  }
  const excess = worst && { units: worst.units, limit: worst.limit };
  return { maxInWindow, overLimit: worst?.ops ?? null, excess, unjustified, judged };
}

/** The units `requests` weigh together. */
export function unitsOf(requests: readonly Weighed[]): number {
  let units = 0;
  for (const request of requests) units += request.units ?? 1;
  return units;
}

/** Units admitted in the trailing window at each admission's completion: the line the report plots. */
export function trailingCounts(admitted: Weighed[], windowNs: number): [number, number][] {
  const byComplete = [...admitted].sort((a, b) => a.complete - b.complete);
  const points: [number, number][] = [];
  let [first, units] = [0, 0];
  for (const admission of byComplete) {
    units += admission.units ?? 1;
    for (; byComplete[first]!.complete <= admission.complete - windowNs; first++)
      units -= byComplete[first]!.units ?? 1;
    points.push([admission.complete, units]);
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

/**
 * The units left that an answer states: `r` of the first member of `RateLimit: "user";r=42;t=18` (the draft's
 * structured field, as Paceline sends it), or undefined.
 */
export function readRemaining(header: string | undefined): number | undefined {
  const r = /;\s*r=(\d+)/.exec(header?.split(',')[0] ?? '');
  return r ? Number(r[1]) : undefined;
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
