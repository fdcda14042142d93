/** How long one span of an estimate lasts; each estimate is the least sample of the last two spans. */
const SPAN_MS = 10_000;

/** What the quickest recent calls to one Redis server showed, in ms. */
export interface LinkEstimate {
  /**
   * Redis's clock minus this process's monotonic clock (`performance.now()`), plus the quickest
   * call's delay on the way there: Redis's `now` minus when the call was sent.
   */
  offsetMs: number;
  /** The quickest round trip: reply read minus call sent. */
  roundTripMs: number;
}

/**
 * Learns, from its replies, how one Redis server's clock reads against this process's, so that a
 * moment of ours can travel in a call as a moment of Redis's: `ours + offsetMs - roundTripMs` is
 * the latest Redis may start the call for its reply to come back by `ours` (at the quickest
 * return seen). Each figure is the least sample of the last two spans of SPAN_MS, so a clock
 * that steps back is followed at once and one that steps forward within two spans (or at once:
 * see `reset`).
 */
export function createRedisClock() {
  const least = () => ({ current: Number.POSITIVE_INFINITY, previous: Number.POSITIVE_INFINITY });
  let [offset, roundTrip, spanStart] = [least(), least(), Number.NEGATIVE_INFINITY];
  const add = (figure: { current: number; previous: number }, value: number) =>
    (figure.current = Math.min(figure.current, value));
  const read = (figure: { current: number; previous: number }) => Math.min(figure.current, figure.previous);
  return {
    /** undefined until a call has answered. */
    estimate(): LinkEstimate | undefined {
      const [offsetMs, roundTripMs] = [read(offset), read(roundTrip)];
      return Number.isFinite(offsetMs) && Number.isFinite(roundTripMs) ? { offsetMs, roundTripMs } : undefined;
    },
    /** One answered call: sent at `sentAt`, Redis's clock `redisNowMs` when it ran, read at `readAt` (all ms). */
    sample(sentAt: number, redisNowMs: number, readAt: number) {
      if (sentAt - spanStart > SPAN_MS) {
        [offset, roundTrip, spanStart] = [
          { current: Number.POSITIVE_INFINITY, previous: offset.current },
          { current: Number.POSITIVE_INFINITY, previous: roundTrip.current },
          sentAt,
        ];
      }
      add(offset, redisNowMs - sentAt);
      add(roundTrip, readAt - sentAt);
    },
    /** Forgets every earlier sample (Redis's clock has stepped forward) and starts again from this call. */
    reset(sentAt: number, redisNowMs: number, readAt: number) {
      [offset, roundTrip, spanStart] = [least(), least(), sentAt];
      this.sample(sentAt, redisNowMs, readAt);
    },
  };
}

export type RedisClock = ReturnType<typeof createRedisClock>;
