import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Cluster, Redis } from 'ioredis';

/** How often a web worker records itself alive and reads the count back. */
const CENSUS_EVERY_MS = 2_000;

/** A worker not seen for this long (four missed records) is no longer counted. */
export const CENSUS_STALE_MS = 4 * CENSUS_EVERY_MS;

const COMMAND = 'pacelineWorkerCensus';

/**
 * KEYS[1] the census (a sorted set: worker → when last seen, ms of Redis's clock); ARGV[1] this
 * worker; ARGV[2] CENSUS_STALE_MS. Records the worker as seen now, forgets the workers not seen
 * since ARGV[2] ago and returns how many are left. Redis's clock, so hosts' clocks need not agree.
 */
const CENSUS_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZADD', KEYS[1], string.format('%.0f', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
`;

type CensusCommand = (key: string, member: string, staleMs: string) => Promise<number>;

/**
 * The web workers alive across a deployment, counted through Redis (docs/throttling.md "When
 * Redis is unreachable"): `start()` records this worker in one sorted set, `key` (one key, so one
 * Redis Cluster slot), every CENSUS_EVERY_MS, reading the count back each time (and handing it to
 * `onCount`, with how long Redis took to answer). `workers` is the last count read, or `fallback` (the host's WEB_CONCURRENCY) before
 * any. A record that fails or hangs is skipped: the last count holds. `close()` takes this worker
 * out; safe twice.
 */
export class WorkerCensus {
  #count: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #recording = false;
  #closing: Promise<void> | undefined;
  readonly #record: CensusCommand;
  readonly #member = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly key: string,
    private readonly fallback: number,
    private readonly onCount: (workers: number, roundTripMs: number) => void = () => {},
  ) {
    redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: CENSUS_SCRIPT });
    this.#record = (redis as unknown as Record<typeof COMMAND, CensusCommand>)[COMMAND].bind(redis);
  }

  /** Workers alive across the deployment as last counted, or the fallback before any count. */
  get workers(): number {
    return this.#count ?? this.fallback;
  }

  /** Whether `workers` is a count read through Redis (not the fallback). */
  get isCounted(): boolean {
    return this.#count !== undefined;
  }

  /** Records this worker now, then every CENSUS_EVERY_MS until `close()`. */
  start(): void {
    if (this.#timer || this.#closing) return;
    void this.record();
    this.#timer = setInterval(() => void this.record(), CENSUS_EVERY_MS);
    this.#timer.unref();
  }

  /** Records this worker once and reads the count; resolves either way (at most one record at a time). */
  async record(): Promise<void> {
    if (this.#recording || this.#closing) return;
    this.#recording = true;
    try {
      const sentAt = performance.now();
      const count = Number(await this.#record(this.key, this.#member, String(CENSUS_STALE_MS)));
      if (count >= 1) this.onCount((this.#count = count), performance.now() - sentAt);
    } catch {
      // Redis unreachable: the last count holds (the throttle reports the outage).
    } finally {
      this.#recording = false;
    }
  }

  /** Stops recording and takes this worker out of the count, so the others' shares grow at once. */
  close(): Promise<void> {
    return (this.#closing ??= (async () => {
      clearInterval(this.#timer);
      await this.redis.zrem(this.key, this.#member).catch(() => {});
    })());
  }
}
