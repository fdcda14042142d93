import type { Logger } from 'pino';
import type { Refusal } from './request-state.js';

/** How long the refusals of one client are summed before their summary line. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;
/** Clients whose refusals are summed apart at most; past it they are summed together as others. */
export const REFUSAL_LOG_MAX_CLIENTS = 1_000;

interface Tally {
  scope: string;
  client: string;
  pseudonym?: string;
  count: number;
  retryAfterS: number;
}

/**
 * The access log of refused requests, bounded under a flood (docs/architecture.md
 * "Observability"): the first refusal of a client (scope and identity) in an interval is logged as a
 * request line with its scope, client and Retry-After; the rest of that interval are counted
 * and logged as one summary line per client when it ends. At most REFUSAL_LOG_MAX_CLIENTS
 * clients are tallied apart; the refusals of the rest are one `others` line. A flood therefore
 * writes about two lines per client per interval, whatever its speed.
 */
export class RefusalLog {
  readonly #tallies = new Map<string, Tally>();
  #others = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = REFUSAL_LOG_INTERVAL_MS,
    private readonly maxClients = REFUSAL_LOG_MAX_CLIENTS,
    /** The summary lines' message. */
    private readonly summary = 'requests refused',
  ) {}

  /** Counts a refusal; true when it is the first of its client in this interval (log it in full). */
  note(refusal: Refusal): boolean {
    const key = `${refusal.scope} ${refusal.client}`;
    const tally = this.#tallies.get(key);
    this.#arm();
    if (tally) {
      tally.count += 1;
      tally.retryAfterS = refusal.retryAfterS;
      return false;
    }
    if (this.#tallies.size >= this.maxClients) {
      this.#others += 1;
      return false;
    }
    const { scope, client, pseudonym } = refusal;
    this.#tallies.set(key, { scope, client, ...(pseudonym && { pseudonym }), count: 0, retryAfterS: 0 });
    return true;
  }

  /** Logs the interval's summaries; a client with none this interval is forgotten (its next refusal is logged). */
  flush(): void {
    this.#timer = undefined;
    const seconds = this.intervalMs / 1000;
    for (const [key, tally] of this.#tallies) {
      if (tally.count === 0) {
        this.#tallies.delete(key);
        continue;
      }
      const { scope, client, pseudonym, count, retryAfterS } = tally;
      this.logger.info({ scope, client, pseudonym, refused: count, seconds, retryAfterS }, this.summary);
      tally.count = 0;
    }
    if (this.#others > 0) this.logger.info({ client: 'others', refused: this.#others, seconds }, this.summary);
    this.#others = 0;
    if (this.#tallies.size > 0) this.#arm();
  }

  #arm(): void {
    if (this.#timer) return;
    // Unref'd: a pending summary never keeps a stopping process alive.
    this.#timer = setTimeout(() => this.flush(), this.intervalMs).unref();
  }
}
