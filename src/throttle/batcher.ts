import hashSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import { batches, callArguments, type Pending } from './batches.js';
import { createRedisClock, type LinkEstimate, type RedisClock } from './redis-clock.js';
import { answer, clockOf, isExpired } from './reply.js';

/**
 * Rounds of script calls a process has waiting for Redis at once (a round is one call, or one
 * per MAX_BATCH requests or hash slot); later requests queue and go together in the next round
 * when a call answers or times out. Idle, a request is sent at once; under load, the calls grow.
 */
const MAX_IN_FLIGHT = 2;

/**
 * How long a call sent after its requests' deadline (this process lagging) is still waited for:
 * this many of the quickest round trips seen, at least LATE_SEND_GRACE_MS, at most the timeout.
 */
const LATE_SEND_ROUND_TRIPS = 4;
const LATE_SEND_GRACE_MS = 50;

/** The script as an ioredis command: the keys' count, the keys, then the arguments; the reply as bytes. */
export type RingCommand = (numKeys: number, ...keysThenArgs: string[]) => Promise<Buffer>;

/** One script call under way. */
interface Call {
  batch: Pending[];
  /** When the oldest of its requests asked. */
  since: number;
  clock: RedisClock | undefined;
  link: LinkEstimate | undefined;
  sentAt: number;
  /** When this process stops waiting for the reply. */
  giveUpAt: number;
  settled: boolean;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Queues requests and decides them in rounds of script calls (see `createThrottler`): the
 * requests queued in one turn of the event loop go together, one call per hash slot and
 * MAX_BATCH requests, with at most MAX_IN_FLIGHT rounds waiting for Redis; with `timeoutMs`,
 * each call carries its deadline and is given up on when it passes.
 */
export class Batcher {
  private queue: Pending[] = [];
  private inFlight = 0;
  // One per server: the masters of a Redis Cluster need not agree on the time.
  private readonly clocks = new Map<string, RedisClock>();
  private scheduled = false;
  /** When the oldest queued request asked: the deadline of its call counts from then. */
  private queuedSince = 0;
  /** When a call last went unanswered past its deadline. */
  private lastExpiry = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly run: RingCommand,
    private readonly timeoutMs: number | undefined,
  ) {}

  /** Queues one request for the next round. */
  push(request: Pending): void {
    if (this.queue.length === 0) this.queuedSince = performance.now();
    this.queue.push(request);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.inFlight >= MAX_IN_FLIGHT) return;
    this.scheduled = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.inFlight >= MAX_IN_FLIGHT) return;
    const pending = this.queue;
    this.queue = [];
    for (const batch of batches(pending, this.redis.isCluster)) this.decide(batch, this.queuedSince);
  };

  private clockFor(batch: Pending[]): RedisClock {
    const server = this.redis.isCluster
      ? ((this.redis as Cluster).slots[hashSlot(batch[0]?.keys[0] as string)]?.[0] ?? '')
      : '';
    let clock = this.clocks.get(server);
    if (!clock) this.clocks.set(server, (clock = createRedisClock()));
    return clock;
  }

  /** Sends one batch as one script call, unless calls before it went unanswered past its deadline. */
  private decide(batch: Pending[], since: number, retried = false): void {
    const { keys, ruleList, layout, checkCount, costs } = callArguments(batch);
    const { timeoutMs } = this;
    if (timeoutMs !== undefined && this.lastExpiry >= since && performance.now() >= since + timeoutMs) {
      // Queued behind calls that got no answer in time: refused unsent, so a Redis that comes back
      // later does not record admissions for requests already answered under THROTTLE_FAILURE_MODE.
      // (A deadline passed only through this process's own lag is still sent and judged as usual.)
      rejectAll(batch, unanswered(timeoutMs));
      return;
    }
    const call = this.start(batch, since);
    this.inFlight++;
    // The latest moment, in Redis's clock, at which the call may start for its reply to be back
    // by giveUpAt: started later, it records nothing, so a request answered under
    // THROTTLE_FAILURE_MODE (a 503 in `closed`) is not counted once Redis catches up.
    const { link, giveUpAt } = call;
    const deadline = link === undefined ? 0 : Math.ceil((giveUpAt + link.offsetMs - link.roundTripMs) * 1000);
    // (the peek flag and costs only when some check costs more than 1: the unweighted call is unchanged)
    const args = costs === '' ? [ruleList, layout, String(deadline)] : [ruleList, layout, String(deadline), '0', costs];
    this.run(keys.length, ...keys, ...args).then(
      (reply) => this.settle(call, () => this.received(call, checkCount, reply, retried)),
      (error: unknown) => this.settle(call, () => rejectAll(batch, error as Error)),
    );
  }

  /** A call about to be sent: when this process stops waiting for it, with a timer for then. */
  private start(batch: Pending[], since: number): Call {
    const { timeoutMs } = this;
    const clock = timeoutMs === undefined ? undefined : this.clockFor(batch);
    const link = clock?.estimate();
    const sentAt = performance.now();
    // When this process stops waiting: the deadline, or, for a call this process's own lag sent
    // late, a few round trips after sending (only the store's slowness counts against a check).
    const grace = Math.min(
      timeoutMs ?? 0,
      Math.max(LATE_SEND_GRACE_MS, LATE_SEND_ROUND_TRIPS * (link?.roundTripMs ?? 0)),
    );
    const giveUpAt = timeoutMs === undefined ? Number.POSITIVE_INFINITY : Math.max(since + timeoutMs, sentAt + grace);
    const call: Call = { batch, since, clock, link, sentAt, giveUpAt, settled: false, timer: undefined };
    if (timeoutMs !== undefined) {
      const expire = () =>
        this.settle(call, () => {
          this.lastExpiry = performance.now();
          rejectAll(batch, unanswered(timeoutMs));
        });
      call.timer = setTimeout(() => setImmediate(expire), Math.max(0, giveUpAt - sentAt));
    }
    return call;
  }

  /** Ends a call once (reply, failure or expiry, whichever comes first) and lets the queue go on. */
  private settle(call: Call, finish: () => void): void {
    if (call.settled) return;
    call.settled = true;
    clearTimeout(call.timer);
    this.inFlight--;
    finish();
    this.schedule();
  }

  /** Answers a call's requests from its reply, or sends the batch again if Redis's clock has stepped forward. */
  private received(call: Call, checkCount: number, reply: Buffer, retried: boolean): void {
    const { batch, clock, link, sentAt, giveUpAt } = call;
    try {
      const redisNowMs = clockOf(reply, checkCount) / 1000;
      const readAt = performance.now();
      if (!isExpired(reply)) {
        clock?.sample(sentAt, redisNowMs, readAt);
        answer(batch, checkCount, reply, sentAt);
      } else if (!retried && readAt < giveUpAt - (link?.roundTripMs ?? 0)) {
        // Expired by Redis's clock, yet back with time for another round trip by ours: Redis's
        // clock has stepped forward since the estimate. Learnt afresh, the batch (recorded
        // nowhere) goes again.
        clock?.reset(sentAt, redisNowMs, readAt);
        this.decide(batch, call.since, true);
      } else {
        this.lastExpiry = readAt;
        rejectAll(batch, unanswered(this.timeoutMs ?? 0));
      }
    } catch (error) {
      // A reply not of the script's shape; requests already answered keep their answer.
      rejectAll(batch, error as Error);
    }
  }
}

const unanswered = (timeoutMs: number) => new Error(`throttle store did not answer within ${timeoutMs} ms`);

function rejectAll(batch: Pending[], error: Error): void {
  for (const request of batch) request.reject(error);
}
