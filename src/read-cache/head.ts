import type { Cluster, Redis } from 'ioredis';

/**
 * The event store's head position as published in Redis: the validator of every cached read
 * (docs/architecture.md, "Read cache"). A write publishes its batch's last position before it
 * commits; a read compares it with the head its cached answer was computed at.
 */

/** Raises the head to ARGV[1] unless it is already at or above it; a lost key is set. */
const RAISE = `local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
local next = tonumber(ARGV[1])
if next > current then redis.call('SET', KEYS[1], ARGV[1]) return next end
return current`;

export interface HeadChannel {
  /** Publishes `position` (raise only). Throws when Redis does not confirm within its timeout. */
  publish(position: number): Promise<void>;
  /**
   * The published head, read by a GET sent after this call (requests of one event-loop turn share
   * it), or null when Redis cannot say: unreachable, slow, or the key is lost.
   */
  read(): Promise<number | null>;
  /** Changes whenever the connection drops or returns; an answer computed across a change is not kept. */
  generation(): number;
}

/**
 * A head channel over `redis` at `key`. A read slower than `readTimeoutMs` answers null; `onMissing`
 * is told whenever the key is found gone.
 */
export function createHeadChannel(redis: Redis | Cluster, key: string, readTimeoutMs: number, onMissing: () => void): HeadChannel {
  let generation = 0;
  let highest = -1;
  let pending: Promise<number | null> | undefined;
  // A restarted Redis may come back with an older head (persistence) or none: every cached
  // answer validated against the old one is dropped, and nothing started before is kept.
  const bump = () => void (generation += 1);
  redis.on('close', bump);
  redis.on('ready', bump);

  const get = async (): Promise<number | null> => {
    pending = undefined;
    try {
      const value = await withTimeout(redis.get(key), readTimeoutMs);
      if (value === null) {
        onMissing();
        return null;
      }
      const head = Number(value);
      // The head only rises; lower means Redis lost writes (a failover or an old snapshot).
      if (head < highest) bump();
      highest = head;
      return head;
    } catch {
      return null;
    }
  };

  return {
    async publish(position) {
      await redis.eval(RAISE, 1, key, String(position));
    },
    read() {
      pending ??= new Promise((resolve) => setImmediate(() => resolve(get())));
      return pending;
    },
    generation: () => generation,
  };
}

/** `promise`, or a rejection after `ms`: a slow Redis is as good as none for a read. */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('head read timed out')), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
