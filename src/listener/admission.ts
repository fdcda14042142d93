import type { AdaptiveLimit } from './adaptive-limit.js';

/**
 * A request's class, from first shed to last: 0 docs and schema, 1 anonymous, 2 authenticated
 * reads, 3 authenticated writes. Health probes have none: they are never shed.
 * docs/throttling.md "Past capacity: admission and shedding" argues the order.
 */
export type Level = 0 | 1 | 2 | 3;
export const LEVEL_NAMES = ['docs', 'anonymous', 'read', 'write'] as const;

/**
 * The share of the limit each class may fill: a lower class stops being started while a higher one
 * still is, so shedding starts with the lowest class and the last slots go to writes.
 */
const SHARE: readonly number[] = [0.5, 0.75, 0.9, 1];

/** Why a request was shed: the queue was full, a higher class took its place, or it waited past ADMISSION_QUEUE_MS. */
export const SHED_REASONS = ['full', 'displaced', 'waited'] as const;
export type ShedReason = (typeof SHED_REASONS)[number];

/** A request waiting for its turn: started, shed, or dropped when its client left meanwhile. */
export interface Waiter {
  level: Level;
  queuedAt: number;
  start(): void;
  shed(reason: ShedReason): void;
  /** True once the client closed its connection: the request is dropped with no work and no answer. */
  gone(): boolean;
  /** Called when a waiter leaves the queue, however it left. */
  left?(): void;
}

export interface AdmissionSettings {
  queueSize: number;
  /** CoDel's target: past it, a request of a standing queue is shed. */
  queueMs: number;
}

/**
 * CoDel's interval: a queue the worker has not emptied (by starting what waited, not by shedding it)
 * for this long is standing, and its requests are shed past `queueMs`; before that, a burst may
 * wait up to this long.
 */
const STANDING_AFTER_MS = 1_000;

/**
 * One web worker's admission: at most `limit` requests in progress (each class its SHARE of it),
 * the rest in a short queue per class, highest class first when a slot frees. A full queue sheds
 * the newest of a lower class to make room, else the newcomer. As CoDel does (in the form servers
 * use): while the worker empties its queue now and then, a burst may wait up to STANDING_AFTER_MS;
 * once it has not for that long it is a standing backlog, and a request that waited past `queueMs`
 * is shed rather than served late, until the worker catches up again. A class whose oldest waiter
 * is past `queueMs` is served newest first. One whose client left is dropped before any work.
 */
export class Admission {
  #inFlight = 0;
  readonly #queues: Waiter[][] = [[], [], [], []];
  #queued = 0;
  /** When the worker last caught up: a request started with none waiting, or the queue emptied by starting. */
  #emptyAt: number;
  #sweeper: NodeJS.Timeout | undefined;

  constructor(
    readonly limit: AdaptiveLimit,
    private readonly settings: AdmissionSettings,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#emptyAt = now();
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  get queued(): number {
    return this.#queued;
  }

  /**
   * Starts `waiter` now, queues it, or sheds it, or sheds another waiter in its place: the oldest of the lowest
   * class in a standing backlog at its limit, a lower class's newest in a full queue.
   */
  admit(waiter: Waiter): void {
    if (this.#fits(waiter.level) && this.#queued === 0) {
      this.#emptyAt = this.now();
      return this.#start(waiter);
    }
    // A standing backlog holds no more than may run at once: served newest first, an older waiter would only be
    // shed later, holding its client's connection until then (docs/throttling.md "Past capacity: admission and
    // shedding"), so the oldest of the lowest class at or below the newcomer's goes now instead. A full queue
    // makes room by shedding a lower class's newest.
    const standing = this.#standing();
    if (this.#queued >= (standing ? Math.min(this.settings.queueSize, this.limit.value) : this.settings.queueSize)) {
      const victim = standing ? this.#takeLowest(waiter.level + 1, 'oldest') : this.#takeLowest(waiter.level, 'newest');
      if (!victim) return waiter.shed('full');
      victim.left?.();
      victim.shed(standing ? 'full' : 'displaced');
    }
    this.#queues[waiter.level]!.push(waiter);
    this.#queued += 1;
    this.#drain();
    this.#sweeper ??= setInterval(() => this.#sweep(), Math.max(5, this.settings.queueMs / 4)).unref();
  }

  /**
   * A started request ended after `durationMs`; `inFlightAtStart` as it began. Its slot goes to the queue. Its
   * latency teaches the limit only when it `worked` (Netflix's ignored outcome otherwise): see `didWork` in listener.ts.
   */
  finish(durationMs: number, inFlightAtStart: number, worked = true): void {
    this.#inFlight -= 1;
    if (worked) this.limit.sample(durationMs, inFlightAtStart, this.now());
    this.#drain();
  }

  /** Stops the sweeper; waiters still queued are shed (the worker is stopping). */
  close(): void {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
    for (const queue of this.#queues) for (const waiter of queue.splice(0)) waiter.shed('full');
    this.#queued = 0;
  }

  #fits(level: Level): boolean {
    return this.#inFlight < Math.max(1, Math.floor(this.limit.value * SHARE[level]!));
  }

  #start(waiter: Waiter): void {
    this.#inFlight += 1;
    waiter.start();
  }

  #drain(): void {
    let caughtUp = false;
    for (let level = 3; level >= 0; level -= 1) {
      const queue = this.#queues[level]!;
      while (queue.length > 0 && this.#fits(level as Level)) {
        // Once its oldest has waited past queueMs, a class's queue is not keeping up: the newest goes first, so what
        // is served has hardly waited, and the oldest wait for the sweep's verdict (Facebook's adaptive LIFO).
        const waiter = this.now() - queue[0]!.queuedAt > this.settings.queueMs ? queue.pop()! : queue.shift()!;
        this.#queued -= 1;
        waiter.left?.();
        caughtUp = false;
        if (waiter.gone()) continue;
        if (this.now() - waiter.queuedAt > this.#patience()) waiter.shed('waited');
        else {
          this.#start(waiter);
          caughtUp = this.#queued === 0;
        }
      }
    }
    // Only a queue the worker emptied by starting its requests ends a standing backlog; one emptied by shedding
    // them has not caught up, and would otherwise let the next second's requests wait as a burst's may.
    if (caughtUp) this.#emptyAt = this.now();
    if (this.#queued === 0) this.#stopSweeper();
  }

  /** Whether the worker has not caught up for STANDING_AFTER_MS: its queue is a standing backlog. */
  #standing(): boolean {
    return this.now() - this.#emptyAt > STANDING_AFTER_MS;
  }

  /** How long a queued request may wait now: `queueMs` in a standing queue, STANDING_AFTER_MS in a burst. */
  #patience(): number {
    return this.#standing() ? this.settings.queueMs : Math.max(STANDING_AFTER_MS, this.settings.queueMs);
  }

  /** Sheds the waiters past their patience and drops those whose client left, even while no slot frees. */
  #sweep(): void {
    const oldest = this.now() - this.#patience();
    for (const queue of this.#queues) {
      for (let i = queue.length - 1; i >= 0; i -= 1) {
        const waiter = queue[i]!;
        if (!waiter.gone() && waiter.queuedAt >= oldest) continue;
        queue.splice(i, 1);
        this.#queued -= 1;
        waiter.left?.();
        if (!waiter.gone()) waiter.shed('waited');
      }
    }
    if (this.#queued === 0) this.#stopSweeper();
  }

  #stopSweeper(): void {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  /** Takes a waiter out of the lowest non-empty class under `end`: its newest or its oldest. */
  #takeLowest(end: number, which: 'newest' | 'oldest'): Waiter | undefined {
    for (let level = 0; level < end; level += 1) {
      const queue = this.#queues[level]!;
      if (queue.length > 0) {
        this.#queued -= 1;
        return which === 'newest' ? queue.pop() : queue.shift();
      }
    }
    return undefined;
  }
}
