import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { withTimeout } from '../stores/with-timeout.js';

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
  /**
   * Publishes `position` (raise only). Throws when Redis does not confirm within the channel's timeout. A
   * call Redis runs after that only raises the head above the log: no kept answer is served until the log
   * reaches it.
   */
  publish(position: number): Promise<void>;
  /**
   * The published head, read by a GET sent after this call (requests of one event-loop turn share
   * it), or null when Redis cannot say: unreachable, slow, or the key is lost.
   */
  read(stillWanted?: () => boolean): Promise<number | null>;
  /**
   * The head and the token epoch together (one MGET): the epoch changes whenever a token is
   * revoked, so a token remembered under another epoch is looked up again. Null where unknown.
   */
  readBoth(): Promise<Published>;
  /** Gives the token epoch a new random value: every remembered token is looked up again. */
  rotateTokenEpoch(): Promise<void>;
  /** Changes whenever the connection drops or returns; an answer computed across a change is not kept. */
  generation(): number;
  /** The highest head this process has read, with no I/O (null: none yet, or not trusted since a reconnection). */
  lastRead(): number | null;
}

export interface Published {
  head: number | null;
  tokens: string | null;
}

const UNKNOWN: Published = { head: null, tokens: null };

/** How long after a failed attempt to put the head back the next one starts. */
const RETRUST_DELAY_MS = 1_000;

/**
 * A head channel over `redis` at `keys` (one hash slot, so one MGET reads both). A read slower than `timeoutMs`
 * answers null, a publication slower than it throws; `onMissing` is told whenever the key is found gone.
 */
export function createHeadChannel(
  redis: Redis | Cluster,
  keys: { head: string; tokens: string },
  timeoutMs: number,
  onMissing: () => void,
  onReturn: () => Promise<void>,
): HeadChannel {
  let generation = 0;
  let highest = -1;
  // Until this process has put the head back after a (re)connection, Redis may hold an older one.
  let trusted = false;
  let pending: Promise<Published> | undefined;
  // A restarted Redis may come back with an older head (persistence) or none: every cached
  // answer validated against the old one is dropped, and nothing started before is kept.
  const bump = () => void (generation += 1);
  redis.on('close', () => {
    trusted = false;
    bump();
  });
  // One attempt at a time, and one more after it if asked meanwhile: each holds a pool connection and
  // waits for the append lock, and a Cluster reports a lost master again at each slot refresh of a
  // failover, so attempts that piled up starved the writes of both (docs/scaling.md "Redis Cluster").
  let regaining = false;
  let again = false;
  const regainTrust = (): void => {
    if (regaining) return void (again = true);
    [regaining, again] = [true, false];
    const at = generation;
    onReturn()
      .then(
        () => void (trusted = at === generation),
        // PostgreSQL or Redis not there yet: try again while the connection is the same one.
        () => void setTimeout(() => at === generation && regainTrust(), RETRUST_DELAY_MS).unref(),
      )
      .finally(() => {
        regaining = false;
        if (again) regainTrust();
      });
  };
  redis.on('ready', () => {
    bump();
    regainTrust();
  });
  // A Cluster stays ready while one node goes: a lost master's replica may take over without the
  // last heads it acknowledged (replication is asynchronous), so distrust until the head is back.
  if (redis.isCluster) {
    redis.on('-node', () => {
      trusted = false;
      bump();
      regainTrust();
    });
  }
  if (redis.status === 'ready') regainTrust();

  const get = async (): Promise<Published> => {
    pending = undefined;
    try {
      if (!trusted) return UNKNOWN;
      const [value, tokens] = await withTimeout(redis.mget(keys.head, keys.tokens), timeoutMs, 'head read');
      if (tokens === null) void redis.set(keys.tokens, newEpoch(), 'NX').catch(() => {});
      if (value === null || value === undefined) {
        onMissing();
        return { head: null, tokens: tokens ?? null };
      }
      const head = Number(value);
      // The head only rises; lower means Redis lost writes (a failover or an old snapshot).
      if (head < highest) bump();
      highest = head;
      return { head, tokens: tokens ?? null };
    } catch {
      return UNKNOWN;
    }
  };
  // Reads asked for ahead say whether they are still wanted when the GET is due: a request
  // answered meanwhile (a 429 refused in process) costs Redis nothing.
  let wanted: Array<() => boolean> = [];
  const due = (): Promise<Published> => {
    const askers = wanted;
    wanted = [];
    if (askers.length > 0 && !askers.some((stillWanted) => stillWanted())) {
      pending = undefined;
      return Promise.resolve(UNKNOWN);
    }
    return get();
  };
  const readBoth = (stillWanted: () => boolean = always) => {
    wanted.push(stillWanted);
    return (pending ??= new Promise((resolve) => setImmediate(() => resolve(due()))));
  };

  return {
    async publish(position) {
      // Under the append lock, which every write of every host waits for: no longer than a read may take, rather
      // than the connection's command timeout (docs/scaling.md "Redis Cluster").
      await withTimeout(redis.eval(RAISE, 1, keys.head, String(position)), timeoutMs, 'head publication');
    },
    read: (stillWanted) => readBoth(stillWanted).then((published) => published.head),
    readBoth: () => readBoth(),
    async rotateTokenEpoch() {
      await redis.set(keys.tokens, newEpoch());
    },
    generation: () => generation,
    lastRead: () => (trusted && highest >= 0 ? highest : null),
  };
}

/** Random, so an epoch never comes back after Redis lost its key. */
export function newEpoch(): string {
  return randomBytes(12).toString('base64url');
}

const always = () => true;
