import type { Cluster, Redis } from 'ioredis';
import { WINDOW_SLOTS } from './top-clients.js';

/** Identities buffered per scope between flushes at most; a flood of more new clients in a second is undercounted. */
const DISTINCT_BUFFER_MAX = 50_000;
/** How often the buffered identities go to Redis: one command per process per flush, none when idle. */
const DISTINCT_FLUSH_MS = 1_000;

/** How long after its last refusal a process reads the count every second, to see other hosts' refusals of the same flood. */
const DISTINCT_FOLLOW_MS = 10_000;

// Per scope: PFADD this slot's new identities (the first key), keep the slot for the window, and
// count the union of the window's slots. KEYS: WINDOW_SLOTS per scope, newest first. ARGV: the
// slots' lifetime (ms), then per scope the number of identities and the identities.
const SCRIPT = `
local ttl = ARGV[1]
local slots = ${WINDOW_SLOTS}
local at = 2
local counts = {}
for scope = 0, (#KEYS / slots) - 1 do
  local n = tonumber(ARGV[at])
  local key = KEYS[scope * slots + 1]
  for first = 1, n, 1000 do
    redis.call('PFADD', key, unpack(ARGV, at + first, at + math.min(n, first + 999)))
  end
  if n > 0 then redis.call('PEXPIRE', key, ttl) end
  at = at + n + 1
  counts[#counts + 1] = redis.call('PFCOUNT', unpack(KEYS, scope * slots + 1, scope * slots + slots))
end
return counts
`;

/**
 * Distinct refused clients per scope, cluster-wide (docs/throttling.md "How many"): each process
 * buffers the identities it refused and, at most once a second, adds them in one script call to
 * HyperLogLogs in Redis shared by every host (one per scope and fifth of the window) and reads
 * back the count over the window, about 0.81 % off; with nothing to add it reads again each second
 * for 10 s, then once a slot begins, while a count is above 0. A refusal itself sends nothing to Redis.
 */
export class DistinctRefused {
  readonly #pending = new Map<string, Set<string>>();
  /** The last count read per scope; a scope stays read until its count falls back to 0. */
  readonly #counts = new Map<string, number>();
  readonly #slotMs: number;
  #timer: NodeJS.Timeout | undefined;
  #flushing = false;
  #closed = false;
  #lastAddAt = -Infinity;

  constructor(
    private readonly deps: {
      redis: Redis | Cluster;
      keyPrefix: string;
      windowMs: number;
      now: () => number;
      onCounts: (counts: ReadonlyMap<string, number>) => void;
      onError: (error: unknown) => void;
    },
  ) {
    this.#slotMs = Math.max(1, Math.ceil(deps.windowMs / WINDOW_SLOTS));
  }

  /** Notes a refused identity of `scope`, for the next flush. */
  add(scope: string, ident: string): void {
    let pending = this.#pending.get(scope);
    if (!pending) this.#pending.set(scope, (pending = new Set()));
    if (pending.size < DISTINCT_BUFFER_MAX) pending.add(ident);
    this.#lastAddAt = this.deps.now();
    this.#arm(DISTINCT_FLUSH_MS);
  }

  /** Sends the buffered identities and reads the counts back: one command, or none when there is nothing to say. */
  async flush(): Promise<void> {
    this.#timer = undefined;
    const scopes = new Set([...this.#pending.keys(), ...[...this.#counts].filter(([, n]) => n > 0).map(([s]) => s)]);
    if (scopes.size === 0) return;
    if (this.#flushing) return this.#arm(DISTINCT_FLUSH_MS);
    this.#flushing = true;
    const slot = Math.floor(this.deps.now() / this.#slotMs);
    const keys: string[] = [];
    const args: string[] = [String(this.#slotMs * (WINDOW_SLOTS + 1))];
    for (const scope of scopes) {
      for (let back = 0; back < WINDOW_SLOTS; back++)
        keys.push(`${this.deps.keyPrefix}throttle:distinct:{distinct}:${scope}:${slot - back}`);
      const idents = [...(this.#pending.get(scope) ?? [])];
      args.push(String(idents.length), ...idents);
    }
    this.#pending.clear();
    try {
      const counts = (await this.deps.redis.eval(SCRIPT, keys.length, ...keys, ...args)) as number[];
      [...scopes].forEach((scope, i) => this.#counts.set(scope, Number(counts[i] ?? 0)));
      this.deps.onCounts(this.#counts);
    } catch (error) {
      this.deps.onError(error);
    } finally {
      this.#flushing = false;
    }
    // Other hosts' refusals reach this count only by reading: every second for a while after this
    // process's own, then once a slot begins (counts fall only as slots expire) while any is above 0.
    if ([...this.#counts.values()].some((n) => n > 0)) {
      const now = this.deps.now();
      const recent = now - this.#lastAddAt < DISTINCT_FOLLOW_MS;
      this.#arm(recent ? DISTINCT_FLUSH_MS : Math.max(DISTINCT_FLUSH_MS, this.#slotMs - (now % this.#slotMs) + 1));
    }
  }

  /** Stops flushing for good (what is buffered is dropped); safe twice. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(delayMs: number): void {
    if (this.#closed || this.#timer) return;
    // Unref'd: a pending flush never keeps a stopping process alive.
    this.#timer = setTimeout(() => void this.flush(), delayMs).unref();
  }
}
