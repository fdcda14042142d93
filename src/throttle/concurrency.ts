import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import type { ScopeName } from './scopes.js';

/** The admission script (Redis 7 Lua), whose header states its KEYS, ARGV and reply. */
const SCRIPT = readFileSync(new URL('./concurrency.lua', import.meta.url), 'utf8');
const COMMAND = 'pacelineConcurrencyAcquire';

type AcquireCommand = (key: string, id: string, limit: string, expiryMs: string) => Promise<[number, number]>;

/** What a scope's concurrency limit is called in RateLimit fields, metrics and logs: `user:concurrent`. */
const CONCURRENT_SUFFIX = ':concurrent';

/** The name of `scope`'s concurrency limit, e.g. `user:concurrent`. */
export function concurrentScope(scope: ScopeName): string {
  return `${scope}${CONCURRENT_SUFFIX}`;
}

/** One request asking for a slot: its client (`ip:…`, `user:…`), the scope counting it and the scope's limit. */
export interface SlotRequest {
  scope: ScopeName;
  ident: string;
  limit: number;
}

/** The answer to a SlotRequest. */
export interface Slot {
  /** The request may run: it holds one of its client's slots until `release`. */
  admitted: boolean;
  limit: number;
  /** Requests the client may still start in the scope while this one runs (0 when refused). */
  remaining: number;
  /** Decided by this worker alone by its share of the limit, Redis not answering (local-slots.ts). */
  degraded?: true;
  /** Gives the slot back; resolves (never rejects) once done or given up on; safe twice. */
  release(): Promise<void>;
}

/** Requests in progress per client and scope, shared by every process and host through Redis. */
export interface ConcurrencyLimiter {
  /**
   * Admits the request iff fewer than `limit` of its client's requests in the scope are in progress
   * (entries younger than the expiry bound), in one atomic script call, recording it if so.
   * Rejects when Redis fails or is slower than the timeout; nothing is then held (see `undo`).
   */
  acquire(request: SlotRequest): Promise<Slot>;
}

/** What an unadmitted request gives back: nothing. */
export const NOTHING_HELD = (): Promise<void> => Promise.resolve();

/**
 * Creates a limiter over `redis` (docs/throttling.md "Concurrency limits"). An entry counts at most
 * `expiryMs` after its admission (in Redis's clock), so the entries of a process that died stop
 * counting on their own. `timeoutMs` bounds each acquire and each release: a release not answered
 * in time still runs when Redis does, and until then the entry counts, at most `expiryMs`.
 */
export function createConcurrencyLimiter(deps: {
  redis: Redis | Cluster;
  keyPrefix: string;
  expiryMs: number;
  timeoutMs: number;
}): ConcurrencyLimiter {
  const { redis, keyPrefix, expiryMs, timeoutMs } = deps;
  redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: SCRIPT });
  const run = (redis as unknown as Record<typeof COMMAND, AcquireCommand>)[COMMAND].bind(redis);
  // Request ids: this process's random tag and a counter, unique across processes and hosts.
  const tag = randomBytes(6).toString('hex');
  let sequence = 0;
  return {
    async acquire({ scope, ident, limit }) {
      const key = concurrencyKey(keyPrefix, scope, ident);
      const id = `${tag}:${(sequence += 1).toString(36)}`;
      // Sent after the acquire on the same connection, so it runs after it even when Redis runs it late.
      const undo = () => withTimeout(redis.zrem(key, id), timeoutMs).then(NOTHING_HELD, NOTHING_HELD);
      let reply: [number, number];
      try {
        reply = await withTimeout(run(key, id, String(limit), String(expiryMs)), timeoutMs);
      } catch (error) {
        void undo();
        throw error;
      }
      if (Number(reply[0]) !== 1) return { admitted: false, limit, remaining: 0, release: NOTHING_HELD };
      let released: Promise<void> | undefined;
      return { admitted: true, limit, remaining: limit - Number(reply[1]), release: () => (released ??= undo()) };
    },
  };
}

/**
 * The Redis key of one client's requests in progress in one scope,
 * `${keyPrefix}throttle:concurrent:{<ident>}:<scope>`: the braces put it in the Redis Cluster slot
 * of the client's rate logs. @throws Error if the ident contains a brace.
 */
export function concurrencyKey(keyPrefix: string, scope: ScopeName, ident: string): string {
  if (ident.includes('{') || ident.includes('}')) throw new Error(`throttle ident must not contain braces: ${ident}`);
  return `${keyPrefix}throttle:concurrent:{${ident}}:${scope}`;
}

/** `promise`, or a rejection once `ms` have passed without its answer. */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`concurrency store did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
