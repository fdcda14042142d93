/**
 * How many requests a web worker lets run at once, learnt from their latency alone: Netflix's
 * Gradient2 (concurrency-limits), chosen over Vegas, which needs the minimum latency of an idle
 * server (a Node worker rarely is one), and over AIMD, which only backs off once requests already
 * fail. Two averages of the time requests take: a long one (the baseline) and a short one (now).
 * While now is no slower than the baseline × TOLERANCE, the limit grows by a few slots; as it gets
 * slower, the limit shrinks in proportion, down to half at once. docs/throttling.md "Past capacity:
 * admission and shedding" shows it converging in the overload bench.
 */
export interface LimitSettings {
  min: number;
  max: number;
  /** The limit before any sample. */
  initial?: number;
}

/**
 * The limit before any sample: room for a burst of I/O-bound requests (a group commit of writes, logins
 * waiting for their hash budget) on a fresh worker; the latency then moves it.
 */
const INITIAL = 64;
/** How much slower than the baseline the recent requests may be before the limit shrinks. */
const TOLERANCE = 1.5;
/**
 * The baseline's weight per update: it follows about the last 5 s of latency, however many requests
 * that is (a baseline counted in requests forgets a saturated event loop within a fraction of a second).
 */
const LONG_WEIGHT = 0.02;
/** How many times slower the baseline rises while the worker fills its limit. */
const BOUND_SLOWER = 10;
/** How far each update moves the limit toward its new estimate. */
const SMOOTHING = 0.2;
/** The limit is updated every UPDATE_MS, from the requests that finished in it (at least MIN_SAMPLES). */
const UPDATE_MS = 100;
const MIN_SAMPLES = 5;

export class AdaptiveLimit {
  readonly #min: number;
  readonly #max: number;
  #limit: number;
  #longMs = 0;
  #windowSum = 0;
  #windowCount = 0;
  #windowStarted = 0;
  /** The most requests in progress seen in this window: a limit is not grown past what was used. */
  #windowPeak = 0;

  constructor(settings: LimitSettings) {
    this.#min = settings.min;
    this.#max = settings.max;
    this.#limit = clamp(settings.initial ?? INITIAL, this.#min, this.#max);
  }

  /** The current limit, a whole number of requests. */
  get value(): number {
    return Math.floor(this.#limit);
  }

  /** The baseline latency, in ms (0 before any sample). */
  get baselineMs(): number {
    return this.#longMs;
  }

  /** One finished request: how long it ran (ms), and how many were in progress when it started. */
  sample(durationMs: number, inFlight: number, now: number): void {
    if (this.#windowCount === 0) this.#windowStarted = now;
    this.#windowSum += durationMs;
    this.#windowCount += 1;
    this.#windowPeak = Math.max(this.#windowPeak, inFlight);
    if (this.#windowCount >= MIN_SAMPLES && now - this.#windowStarted >= UPDATE_MS) this.#update();
  }

  #update(): void {
    const shortMs = this.#windowSum / this.#windowCount;
    const peak = this.#windowPeak;
    this.#windowSum = this.#windowCount = this.#windowPeak = 0;
    // A worker that fills its limit is where a longer latency is the limit's doing: there the baseline rises ten
    // times slower (it still falls at once), or it would follow an overload up, and the limit with it (Gradient2's
    // drift: at 6,000 requests/s of the overload bench's mix, the host's limit went from 151 to 263 in 10 s).
    const bound = peak >= this.#limit / 2;
    const weight = bound && shortMs > this.#longMs ? LONG_WEIGHT / BOUND_SLOWER : LONG_WEIGHT;
    this.#longMs = this.#longMs === 0 ? shortMs : this.#longMs + (shortMs - this.#longMs) * weight;
    // A baseline far above now (the load has passed): let it come down quickly rather than over 5 s.
    if (this.#longMs / shortMs > 2) this.#longMs *= 0.95;
    const gradient = clamp((TOLERANCE * this.#longMs) / Math.max(shortMs, 0.001), 0.5, 1);
    // A worker that did not use half its limit learns nothing about its capacity, either way: its requests were
    // not held back by the limit, so a slower one is not the limit's doing (a step of load while the baseline
    // still remembers a quieter host), and shrinking a limit nobody reaches would only shed the next burst.
    if (!bound) return;
    const estimate = this.#limit * gradient + Math.sqrt(this.#limit);
    this.#limit = clamp(this.#limit * (1 - SMOOTHING) + estimate * SMOOTHING, this.#min, this.#max);
  }
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}
