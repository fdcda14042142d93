import { ByteLru } from './lru.js';
import type { HeadChannel } from './head.js';
import { TokenCache } from './token-cache.js';

/** An answer as kept: the bytes sent, its entity tag, and the head of the snapshot it was read from. */
export interface CachedAnswer {
  head: number;
  body: Buffer;
  etag: string;
  bytes: number;
  generation: number;
}

/** What a read computes on a miss: the snapshot's head, the body to send and its tag. */
export interface FreshAnswer {
  head: number;
  body: Buffer;
  etag: string;
}

/** Per-entry overhead beyond the body and key: the object, the Map slot, the tag. */
const ENTRY_OVERHEAD_BYTES = 160;

/**
 * Answers to reads, kept per process in a byte-bounded LRU and served only while they are
 * provably current (docs/architecture.md, "Read cache"): an answer read from a snapshot whose
 * head is at or above the published head reflects every acknowledged write, because a write
 * publishes its position before it commits and is acknowledged only after.
 */
export class ReadCache {
  readonly #lru: ByteLru<CachedAnswer>;
  readonly #inflight = new Map<string, { generation: number; answer: Promise<FreshAnswer> }>();
  /** Bearer tokens, remembered under the same channel's token epoch. */
  readonly tokens: TokenCache;

  constructor(
    readonly channel: HeadChannel,
    budgetBytes: number,
  ) {
    this.#lru = new ByteLru(budgetBytes);
    this.tokens = new TokenCache(channel);
  }

  /** The kept answer for `key` if it is current for `published` (null: unknown, never current). */
  lookup(key: string, published: number | null): CachedAnswer | undefined {
    if (published === null) return undefined;
    const entry = this.#lru.get(key);
    if (!entry) return undefined;
    if (entry.generation === this.channel.generation() && entry.head >= published) return entry;
    this.#lru.delete(key);
    return undefined;
  }

  /**
   * Whether an answer kept for `key` is current as of the last head this process read: a guess with no I/O, for
   * admission's class of a request (src/listener/classify.ts); the read itself checks the published head.
   */
  holds(key: string): boolean {
    const published = this.channel.lastRead();
    const entry = published === null ? undefined : this.#lru.peek(key);
    return entry !== undefined && entry.generation === this.channel.generation() && entry.head >= published!;
  }

  /**
   * Computes the answer for `key`, sharing a computation already under way for it when that one
   * turns out current for `published`, and keeps it unless the Redis connection changed meanwhile.
   */
  async fill(key: string, published: number | null, compute: () => Promise<FreshAnswer>): Promise<FreshAnswer> {
    const generation = this.channel.generation();
    const shared = this.#inflight.get(key);
    // Only a computation started on this same Redis connection: one from before may predate a
    // head that Redis has since lost.
    if (shared && shared.generation === generation && published !== null) {
      const answer = await shared.answer.catch(() => undefined);
      if (answer && answer.head >= published) return answer;
    }
    const computing = { generation, answer: compute() };
    this.#inflight.set(key, computing);
    try {
      const answer = await computing.answer;
      if (generation === this.channel.generation()) {
        this.#lru.set(key, {
          ...answer,
          generation,
          bytes: answer.body.length + key.length * 2 + ENTRY_OVERHEAD_BYTES,
        });
      }
      return answer;
    } finally {
      if (this.#inflight.get(key) === computing) this.#inflight.delete(key);
    }
  }

  get stats(): { entries: number; bytes: number } {
    return { entries: this.#lru.size, bytes: this.#lru.bytes };
  }
}
