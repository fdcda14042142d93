import { Queue, type JobsOptions } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../settings/config.js';
import { closeRedisClient, createRedisClient, type RedisClient } from '../stores/redis-client.js';
import { logStoreFailure } from '../stores/store-errors.js';

/** The BullMQ queue that runs report aggregations. */
export const REPORTS_QUEUE = 'reports';

/** Job states reported by `paceline_jobs{queue, state}`. */
export const JOB_STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;

const ENQUEUE_TIMEOUT_MS = 2_000;

/**
 * BullMQ's keys: `<REDIS_PREFIX>{bull}:<queue>:…`. Under the service's prefix, so deployments and
 * tests can share a Redis; the hash tag `{bull}` keeps every key of a queue in one Redis Cluster
 * slot, as BullMQ's scripts need (used on one Redis too, so both behave alike).
 */
export function bullPrefix(config: Pick<Config, 'REDIS_PREFIX'>): string {
  return `${config.REDIS_PREFIX}{bull}`;
}

/**
 * Every report job: `JOB_ATTEMPTS` attempts with exponential back-off from `JOB_BACKOFF_MS`;
 * completed jobs kept a day (at most 1,000), failed ones a week (at most 10,000) for inspection.
 */
function reportJobOptions(config: Pick<Config, 'JOB_ATTEMPTS' | 'JOB_BACKOFF_MS'>): JobsOptions {
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
  #connection: RedisClient | undefined;
  #closed = false;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
  ) {}

  /** Adds the report's job; rejects after a couple of seconds when Redis does not answer. */
  async enqueue(reportId: string): Promise<void> {
    const queue = this.#open();
    await answered(queue.add('aggregate', { reportId }, { ...reportJobOptions(this.config), jobId: reportId }));
  }

  /**
   * Jobs in each state of `JOB_STATES`; rejects like `enqueue` when Redis does not answer (BullMQ
   * would wait for the connection for ever, and hold up a drain).
   */
  async counts(): Promise<Record<(typeof JOB_STATES)[number], number>> {
    const counts = await answered(this.#open().getJobCounts(...JOB_STATES));
    return Object.fromEntries(JOB_STATES.map((state) => [state, counts[state] ?? 0])) as Record<
      (typeof JOB_STATES)[number],
      number
    >;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const [queue, connection] = [this.#queue, this.#connection];
    this.#queue = undefined;
    this.#connection = undefined;
    await queue?.close().catch(() => {});
    // BullMQ leaves a connection it did not open to its owner.
    if (connection) await closeRedisClient(connection);
  }

  #open(): Queue {
    if (this.#closed) throw new Error('report queue is closed');
    if (!this.#queue) {
      this.#connection = createRedisClient(this.config, 'enqueue');
      this.#queue = new Queue(REPORTS_QUEUE, { connection: this.#connection, prefix: bullPrefix(this.config) });
      // An outage repeats the error on every reconnection attempt; the primary reports it once.
      this.#queue.on('error', (error) => logStoreFailure(this.logger, error, 'report queue: Redis connection error'));
    }
    return this.#queue;
  }
}

async function answered<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the jobs store did not answer within ${ENQUEUE_TIMEOUT_MS} ms`)),
      ENQUEUE_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
