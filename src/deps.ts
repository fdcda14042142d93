import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { connectDatabase } from '../db/connect.js';
import type { Database } from '../db/database.js';
import { systemClock, type Clock } from './base/clock.js';
import type { Config } from './settings/config.js';
import { appendBatch, isLockWaitOver } from './events/store/append-batch.js';
import { GroupCommitter, type CommandBus } from './events/store/group-commit.js';
import type { TaskCommand } from './events/domain/task.events.js';
import { createLogger } from './base/logger.js';
import { createMetrics, type Metrics } from './base/metrics.js';
import { ReportQueue } from './reports/report-queue.js';
import { createReadCache, publishBeforeCommit, type ReadCache } from './read-cache/create-read-cache.js';
import { ReplicaSet } from './stores/read-replicas.js';
import { closeRedisClient, createRedisClient, type RedisClient } from './stores/redis-client.js';
import { logStoreFailure } from './stores/store-errors.js';
import { createConcurrencyLimiter, type ConcurrencyLimiter } from './throttle/concurrency.js';
import { createThrottler, type Throttler } from './throttle/index.js';
import { LocalShare } from './throttle/local-share.js';
import { LocalSlots } from './throttle/local-slots.js';
import { ThrottleWatch } from './throttle/throttle-watch.js';
import { WorkerCensus } from './throttle/worker-census.js';
import type { LimitPolicy } from './limits/policy.js';
import { startPolicySource, type PolicySource } from './limits/policy-source.js';

/** What every request handler may use, built once per process by its entry point. */
export interface Deps {
  config: Config;
  db: Kysely<Database>;
  /** One Redis or a Redis Cluster, per configuration (docs/scaling.md "Redis Cluster"). */
  redis: RedisClient;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  commands: CommandBus;
  throttler: Throttler;
  /** Requests in progress per client and scope, held in Redis (docs/throttling.md "Concurrency limits"). */
  slots: ConcurrencyLimiter;
  /**
   * What this worker decides alone while Redis is unreachable: its share of each rate and of each limit of requests
   * in progress, by the web workers alive across the deployment that `census` counts through Redis. Present with
   * THROTTLE_FAILURE_MODE=local in a process that serves the API (docs/throttling.md "When Redis is unreachable").
   */
  alone?: { census: WorkerCensus; rates: LocalShare; slots: LocalSlots };
  /** Who the throttle refused: the heaviest clients and distinct counts (docs/throttling.md "Who is throttled"). */
  watch?: ThrottleWatch;
  /**
   * Plans given to users and overrides in force, held in memory (docs/throttling.md "Plans and overrides"); absent
   * in the jobs child, which counts no request.
   */
  limits?: LimitPolicy;
  /** Answers of reads kept while provably current; absent when READ_CACHE_BYTES is 0. */
  readCache?: ReadCache;
  /** Streaming replicas for reads (DATABASE_REPLICA_URLS); absent when none are configured. */
  replicas?: ReplicaSet;
  cursorSecret: string;
  /** Producer side of the reports job queue (connects on first use). */
  reportQueue?: ReportQueue;
  /** Set when the host is stopping (DRAIN_DELAY_MS): /readyz answers 503 while requests are still served. */
  leaving?: boolean;
}

/** How long past DATABASE_STATEMENT_TIMEOUT_MS a query may go unanswered before its connection is given up. */
const ANSWER_GRACE_MS = 1_000;

/** Builds the dependencies of a child process from its configuration; `close()` is safe twice. */
export async function buildDeps(config: Config, role: string): Promise<{ deps: Deps; close(): Promise<void> }> {
  const logger = createLogger(config, role);
  const metrics = createMetrics();
  const db = connectDatabase(
    requireSetting(config.DATABASE_URL, 'DATABASE_URL'),
    config.DATABASE_POOL_SIZE,
    'paceline',
    {
      statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
      connectionTimeoutMs: config.DATABASE_WAIT_MS,
      // A server that stopped answering ends no statement_timeout (docs/architecture.md "Bounded work").
      answerDeadlineMs: config.DATABASE_STATEMENT_TIMEOUT_MS + ANSWER_GRACE_MS,
    },
  );
  const redis = createRedisClient(config, 'requests');
  // Commands fail fast while disconnected, so a child serving before its first connection would
  // let its first requests through uncounted (or answer 503 in closed mode).
  if (!(await untilReady(redis, REDIS_READY_WAIT_MS)))
    logger.debug('Redis not reachable yet; serving under THROTTLE_FAILURE_MODE until it is (the primary says why)');
  const readCache = config.READ_CACHE_BYTES > 0 ? createReadCache(db, redis, config, logger) : undefined;
  const appendAndCount = async (batch: readonly TaskCommand[], lockWaitMs?: number) => {
    const outcomes = await appendBatch(db, batch, readCache && publishBeforeCommit(readCache), lockWaitMs);
    for (const outcome of outcomes)
      for (const event of (outcome.ok && outcome.events) || []) metrics.eventsAppended.inc({ type: event.type });
    return outcomes;
  };
  const commands = new GroupCommitter(
    appendAndCount,
    config.APPEND_BATCH_MAX,
    (size) => metrics.appendBatchSize.observe(size),
    {
      waitMs: config.DATABASE_WAIT_MS,
      isLockWaitOver,
    },
  );
  const deps: Deps = {
    config,
    db,
    redis,
    clock: systemClock,
    logger,
    metrics,
    commands,
    readCache,
    replicas:
      config.DATABASE_REPLICA_URLS.length > 0
        ? new ReplicaSet(config.DATABASE_REPLICA_URLS, config, metrics, logger)
        : undefined,
    throttler: createThrottler({ redis, keyPrefix: config.REDIS_PREFIX, timeoutMs: config.THROTTLE_TIMEOUT_MS }),
    slots: createConcurrencyLimiter({
      redis,
      keyPrefix: config.REDIS_PREFIX,
      expiryMs: config.THROTTLE_CONCURRENCY_EXPIRY_MS,
      timeoutMs: config.THROTTLE_TIMEOUT_MS,
    }),
    // Every process must sign cursors alike; the primary generates one when none is configured.
    cursorSecret: requireSetting(config.CURSOR_SECRET, 'CURSOR_SECRET'),
    reportQueue: new ReportQueue(config, logger),
  };
  if (config.THROTTLE_WATCH === 'on') deps.watch = createWatch(deps);
  // Every role but the jobs child serves the API, and so counts towards the shares of the limits.
  if (config.THROTTLE_FAILURE_MODE === 'local' && role !== 'jobs') deps.alone = decideAlone(deps);
  let policies: PolicySource | undefined;
  if (role !== 'jobs') deps.limits = (policies = await startPolicySource(deps)).policy;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await commands.close();
      policies?.close();
      deps.watch?.close();
      // Before the connection closes: the other workers' shares grow as this one leaves.
      await deps.alone?.census.close();
      await Promise.allSettled([
        db.destroy(),
        deps.replicas?.close(),
        closeRedisClient(redis),
        deps.reportQueue?.close(),
      ]);
    })());
  return { deps, close };
}

function createWatch({ config, redis, metrics, logger, cursorSecret }: Deps): ThrottleWatch {
  const failures = { logged: false };
  return new ThrottleWatch({
    redis,
    keyPrefix: config.REDIS_PREFIX,
    secret: cursorSecret,
    k: config.THROTTLE_TOP_K,
    windowMs: config.THROTTLE_TOP_WINDOW,
    now: () => Date.now(),
    onDistinct: (counts) => {
      failures.logged = false;
      for (const [scope, count] of counts) metrics.throttleDistinctClients.set({ scope }, count);
    },
    // Logged once until a flush succeeds again: the throttle's own burst logger reports the outage.
    onError: (error) => {
      if (!failures.logged) logStoreFailure(logger, error, 'distinct refused clients could not be counted in Redis');
      failures.logged = true;
    },
  });
}

function decideAlone({ config, redis, metrics, logger }: Deps): NonNullable<Deps['alone']> {
  const census = new WorkerCensus(
    redis,
    `${config.REDIS_PREFIX}throttle:workers`,
    config.WEB_CONCURRENCY,
    (workers, roundTripMs) => {
      metrics.throttleWorkers.set(workers);
      // Redis answers this worker in time again: exact again without waiting for a request to find out, so an idle
      // worker's gauge does not say degraded for the rest of the outage's aftermath (docs/throttling.md).
      if (roundTripMs <= config.THROTTLE_TIMEOUT_MS) rates.answered();
    },
  );
  const rates = new LocalShare({ census, logger, metrics });
  census.start();
  return { census, rates, slots: new LocalSlots(census) };
}

function requireSetting(value: string | undefined, name: string): string {
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** How long a new process waits for its first Redis connection before it serves anyway. */
const REDIS_READY_WAIT_MS = 5_000;

/** Resolves true once `redis` is connected and ready, or false after `timeoutMs`. */
function untilReady(redis: RedisClient, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const settle = (ready: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => settle(true);
    const timer = setTimeout(() => settle(false), timeoutMs);
    redis.on('ready', onReady);
  });
}
