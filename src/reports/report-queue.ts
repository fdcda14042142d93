import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../config.js';

/** The BullMQ queue that runs report aggregations. */
export const REPORTS_QUEUE = 'reports';

/** Job states reported by `paceline_jobs{queue, state}`. */
export const JOB_STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;

const ENQUEUE_TIMEOUT_MS = 2_000;

/** BullMQ's keys live under the service's prefix, `<REDIS_PREFIX>bull:<queue>:…`, so deployments and tests can share a Redis. */
export function bullPrefix(config: Pick<Config, 'REDIS_PREFIX'>): string {
  return `${config.REDIS_PREFIX}bull`;
}

/**
 * Connection options after BullMQ's production guide, each class opening its own connections:
 * a worker waits through a Redis outage (`maxRetriesPerRequest: null`, reconnecting forever with
 * a capped back-off); a producer on the request path fails fast instead (no offline queue).
 */
export function bullConnection(config: Pick<Config, 'REDIS_URL'>, use: 'worker' | 'producer'): ConnectionOptions {
  if (!config.REDIS_URL) throw new Error('REDIS_URL is not set');
  const retryStrategy = (attempt: number) => Math.min(250 * attempt, 5_000);
  return use === 'worker'
    ? { url: config.REDIS_URL, maxRetriesPerRequest: null, retryStrategy }
    : { url: config.REDIS_URL, enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy };
}

/**
 * Every report job: `JOB_ATTEMPTS` attempts with exponential back-off from `JOB_BACKOFF_MS`;
 * completed jobs kept a day (at most 1,000), failed ones a week (at most 10,000) for inspection.
 */
export function reportJobOptions(config: Pick<Config, 'JOB_ATTEMPTS' | 'JOB_BACKOFF_MS'>): JobsOptions {
  return {
    attempts: config.JOB_ATTEMPTS,
    backoff: { type: 'exponential', delay: config.JOB_BACKOFF_MS },
    removeOnComplete: { age: 24 * 3_600, count: 1_000 },
    removeOnFail: { age: 7 * 24 * 3_600, count: 10_000 },
  };
}

/**
 * The producer side of the reports queue, connected on first use. The job id is the report id,
 * so enqueueing a report twice (a retried request, the sweeper) adds one job. `close()` is safe
 * twice.
 */
export class ReportQueue {
  #queue: Queue | undefined;
  #closed = false;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {}

  /** Adds the report's job; rejects after a couple of seconds when Redis does not answer. */
  async enqueue(reportId: string): Promise<void> {
    const queue = this.#open();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the jobs store did not answer within ${ENQUEUE_TIMEOUT_MS} ms`)), ENQUEUE_TIMEOUT_MS);
    });
    try {
      await Promise.race([queue.add('aggregate', { reportId }, { ...reportJobOptions(this.config), jobId: reportId }), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Jobs in each state of `JOB_STATES`. */
  async counts(): Promise<Record<(typeof JOB_STATES)[number], number>> {
    const counts = await this.#open().getJobCounts(...JOB_STATES);
    return Object.fromEntries(JOB_STATES.map((state) => [state, counts[state] ?? 0])) as Record<(typeof JOB_STATES)[number], number>;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const queue = this.#queue;
    this.#queue = undefined;
    await queue?.close();
  }

  #open(): Queue {
    if (this.#closed) throw new Error('report queue is closed');
    if (!this.#queue) {
      this.#queue = new Queue(REPORTS_QUEUE, { connection: bullConnection(this.config, 'producer'), prefix: bullPrefix(this.config) });
      let loggedAt = 0;
      this.#queue.on('error', (error) => {
        // An outage repeats the error on every reconnection attempt; one line per 30 s says enough.
        if (Date.now() - loggedAt < 30_000) return;
        loggedAt = Date.now();
        this.logger.warn({ err: error }, 'report queue: Redis connection error');
      });
    }
    return this.#queue;
  }
}
