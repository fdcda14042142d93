/** A throttle rate: at most `limit` admitted requests in any rolling window of `windowMs`. */
export interface Rate {
  limit: number;
  windowMs: number;
  /** The text the rate was parsed from, e.g. `"20/min"`. */
  text: string;
}

/** Largest accepted N: each active client key holds 8·N bytes in Redis. */
export const MAX_RATE_LIMIT = 100_000;

/** Longest accepted window (366 days); longer ones are almost surely typos. */
export const MAX_RATE_WINDOW_MS = 366 * 86_400_000;

const UNIT_MS: Readonly<Record<string, number>> = {
  s: 1_000,
  sec: 1_000,
  secs: 1_000,
  second: 1_000,
  seconds: 1_000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
};

const RATE_SYNTAX = /^(\d+)\/(\d*)([a-z]+)$/;

/**
 * Parses a rate such as `"20/min"`, `"10/hour"`, `"300/5m"` or `"3/2s"`.
 *
 * Grammar: `N/<unit>` or `N/<k><unit>`, with integers N ≥ 1 and k ≥ 1 and a unit among
 * `s|sec|second|m|min|minute|h|hour|d|day` (plural forms too, lower case). Surrounding
 * whitespace is ignored; `text` keeps the input as given.
 *
 * @throws Error `invalid rate "x": expected N/<unit> ...` when the text does not match, N or k
 *   is 0, N exceeds {@link MAX_RATE_LIMIT} or the window exceeds {@link MAX_RATE_WINDOW_MS}.
 */
export function parseRate(text: string): Rate {
  const match = RATE_SYNTAX.exec(text.trim());
  const unitMs = match ? UNIT_MS[match[3] ?? ''] : undefined;
  if (!match || unitMs === undefined) {
    throw invalidRate(text, 'unknown syntax or unit');
  }
  const limit = Number(match[1]);
  const multiplier = match[2] === '' ? 1 : Number(match[2]);
  if (limit < 1 || multiplier < 1) throw invalidRate(text, 'N and k must be at least 1');
  if (limit > MAX_RATE_LIMIT) throw invalidRate(text, `N must be at most ${MAX_RATE_LIMIT}`);
  const windowMs = multiplier * unitMs;
  if (windowMs > MAX_RATE_WINDOW_MS) throw invalidRate(text, 'the window must be at most 366 days');
  return { limit, windowMs, text };
}

function invalidRate(text: string, why: string): Error {
  return new Error(
    `invalid rate ${JSON.stringify(text)}: expected N/<unit> or N/<k><unit> with integers N, k >= 1 ` +
      `and unit s|sec|second|m|min|minute|h|hour|d|day, e.g. "20/min" or "300/5m" (${why})`,
  );
}
