import type { TokenCheck } from '../auth/tokens.js';
import type { User } from '../auth/users.repository.js';
import type { HeadChannel } from './head.js';

/** What PostgreSQL says of a token: live with its owner and expiry, or why not. */
export type TokenLookup = () => Promise<TokenCheck>;

interface Remembered {
  user: User;
  expiresAt: number;
  epoch: string;
  rememberedAt: number;
  /** The Redis connection it was remembered on: a Redis restored from a snapshot brings old epochs back. */
  generation: number;
}

/** Tokens remembered per worker at most; the oldest go first. */
const MAX_TOKENS = 10_000;
/** A remembered token is looked up again after this, whatever the epoch says. */
const MAX_AGE_MS = 60_000;

/**
 * Bearer tokens remembered per worker so an authenticated read needs no PostgreSQL
 * (docs/architecture.md, "Read cache"). A logout revokes the token in PostgreSQL and then gives
 * the token epoch in Redis a new random value; a token remembered under another epoch, or with
 * the epoch unknown, is looked up again before the request goes on.
 */
export class TokenCache {
  readonly #tokens = new Map<string, Remembered>();

  constructor(private readonly channel: HeadChannel) {}

  /**
   * The user of a token remembered and not expired, to identify the client at once (for the
   * throttle), with `confirm` to await before anything is served: 'live', or when the epoch moved
   * and PostgreSQL no longer accepts the token, why. Undefined when nothing is remembered.
   */
  recall(
    tokenHash: string,
    now: Date,
    lookup: TokenLookup,
  ): { user: User; confirm: Promise<TokenCheck['state']> } | undefined {
    const entry = this.#usable(tokenHash, now);
    if (!entry) return undefined;
    const confirm = this.channel.readBoth().then(async ({ tokens }) => {
      if (tokens !== null && tokens === entry.epoch) return 'live';
      const found = await this.resolve(tokenHash, lookup, tokens);
      return found.state !== 'live' || found.user.id === entry.user.id ? found.state : 'unknown';
    });
    // A request refused before it awaits the confirmation (a 429) must not leave it unhandled.
    confirm.catch(() => {});
    return { user: entry.user, confirm };
  }

  /**
   * The user of a token `recall` would find, with no I/O: the listener's guess that a request needs no PostgreSQL to
   * know its client (its epoch is still confirmed when the request runs).
   */
  knows(tokenHash: string, now: Date): User | undefined {
    return this.#usable(tokenHash, now)?.user;
  }

  #usable(tokenHash: string, now: Date): Remembered | undefined {
    const entry = this.#tokens.get(tokenHash);
    const usable =
      entry !== undefined &&
      entry.generation === this.channel.generation() &&
      entry.expiresAt > now.getTime() &&
      Date.now() - entry.rememberedAt <= MAX_AGE_MS;
    return usable ? entry : undefined;
  }

  /** Looks the token up in PostgreSQL, after reading the epoch, and remembers it under that epoch. */
  async lookUp(tokenHash: string, lookup: TokenLookup): Promise<TokenCheck> {
    const { tokens } = await this.channel.readBoth();
    return this.resolve(tokenHash, lookup, tokens);
  }

  private async resolve(tokenHash: string, lookup: TokenLookup, epoch: string | null): Promise<TokenCheck> {
    const generation = this.channel.generation();
    const found = await lookup();
    this.#tokens.delete(tokenHash);
    if (found.state !== 'live' || epoch === null || generation !== this.channel.generation()) return found;
    this.#tokens.set(tokenHash, {
      user: found.user,
      expiresAt: found.expiresAt.getTime(),
      epoch,
      rememberedAt: Date.now(),
      generation,
    });
    if (this.#tokens.size > MAX_TOKENS) this.#tokens.delete(this.#tokens.keys().next().value as string);
    return found;
  }
}
