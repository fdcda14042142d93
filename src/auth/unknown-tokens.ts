/** Unknown tokens remembered per process at most; past it the one learnt longest ago is forgotten. */
const MAX_UNKNOWN_TOKENS = 10_000;
/** Unknown tokens a client the throttle has refused may still have looked up, per STRIKE_WINDOW_MS. */
export const MAX_STRIKES = 2;
/** How long a client's unknown tokens count as strikes. */
const STRIKE_WINDOW_MS = 60_000;
/** How long a token PostgreSQL did not know is answered 401 without asking it again. */
const UNKNOWN_TOKEN_TTL_MS = 5_000;

/**
 * Token hashes PostgreSQL has just said it does not know (never issued, expired or revoked), so
 * that repeating one costs no database (docs/architecture.md "Auth and errors"). Remembering an
 * unknown token can only refuse it, which is what any host would answer: a logout only makes
 * more tokens unknown, and a login issues a new random token, which no one can have presented
 * before. Only a token read from a lagging replica could be new and yet unknown; the short TTL
 * bounds how long it is refused. Bounded (MAX_UNKNOWN_TOKENS, oldest forgotten first).
 */
export class UnknownTokens {
  readonly #until = new Map<string, number>();
  /** Client key → its unknown tokens presented while refused, and when that count is forgotten. */
  readonly #strikes = new Map<string, { count: number; until: number }>();

  constructor(
    private readonly ttlMs = UNKNOWN_TOKEN_TTL_MS,
    private readonly max = MAX_UNKNOWN_TOKENS,
  ) {}

  /** True when `tokenHash` was found unknown less than the TTL before `nowMs`. */
  has(tokenHash: string, nowMs: number): boolean {
    const until = this.#until.get(tokenHash);
    if (until === undefined) return false;
    if (until > nowMs) return true;
    this.#until.delete(tokenHash);
    return false;
  }

  /**
   * True while `client` (refused by the throttle) has presented MAX_STRIKES unknown tokens in the
   * strike window: its tokens are then no longer looked up until the window passes. Before that a
   * real user sharing a refused address is still looked up, and counted under `user`.
   */
  struckOut(client: string, nowMs: number): boolean {
    const strikes = this.#strikes.get(client);
    if (strikes === undefined) return false;
    if (strikes.until > nowMs) return strikes.count >= MAX_STRIKES;
    this.#strikes.delete(client);
    return false;
  }

  /** Counts an unknown token `client` presented while refused. */
  strike(client: string, nowMs: number): void {
    const strikes = this.#strikes.get(client);
    if (strikes !== undefined && strikes.until > nowMs) {
      strikes.count += 1;
      return;
    }
    this.#strikes.delete(client);
    if (this.#strikes.size >= this.max) this.#strikes.delete(this.#strikes.keys().next().value as string);
    this.#strikes.set(client, { count: 1, until: nowMs + STRIKE_WINDOW_MS });
  }

  /** Remembers `tokenHash` as unknown from `nowMs`. */
  add(tokenHash: string, nowMs: number): void {
    this.#until.delete(tokenHash);
    if (this.#until.size >= this.max) this.#until.delete(this.#until.keys().next().value as string);
    this.#until.set(tokenHash, nowMs + this.ttlMs);
  }
}

/** A request that waited longer than its deadline for its turn at a token lookup: nothing was looked up. */
export class TurnTimeoutError extends Error {
  override name = 'TurnTimeoutError';
  constructor(readonly waitedMs: number) {
    super(`token not looked up: it waited ${Math.round(waitedMs)} ms for its turn`);
  }
}

/**
 * One turn at a time per key: `enter(key)` resolves, with its `release`, once every earlier
 * holder of the key has released. Keys with no holder and no waiter are forgotten. A turn not come
 * within `waitMs` is given up, and the ones behind it wait only for those before it: each turn lasts
 * a lookup and a throttle check, so while the stores are slow (a Redis failover) the queue of one
 * address would otherwise grow without end (docs/architecture.md "Bounded work").
 */
export class KeyedTurns {
  readonly #tails = new Map<string, Promise<void>>();

  constructor(private readonly waitMs: number) {}

  /** @throws TurnTimeoutError (rejects) when the earlier holders have not all released within `waitMs`. */
  async enter(key: string): Promise<() => void> {
    const previous = this.#tails.get(key);
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    const tail = previous ? previous.then(() => done) : done;
    this.#tails.set(key, tail);
    const forget = () => void (this.#tails.get(key) === tail && this.#tails.delete(key));
    if (previous && !(await settlesWithin(previous, this.waitMs))) {
      release();
      // Forgotten only once the holders before it are done: a newcomer still waits for them.
      void tail.then(forget);
      throw new TurnTimeoutError(this.waitMs);
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
      forget();
    };
  }
}

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  return Promise.race([promise.then(() => true as const), late]).finally(() => clearTimeout(timer));
}
