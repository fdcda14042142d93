import cluster from 'node:cluster';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { connectDatabase } from '../../db/connect.js';
import { migrateToLatest } from '../../db/migrate.js';
import { childDrainBudgetMs, proxyTrustWarning, usesEmbeddedRedis, type Config } from '../settings/config.js';
import { createLogger } from '../base/logger.js';
import { describeStoreError, storeFailureLine } from '../stores/store-errors.js';
import { watchStores } from '../stores/store-watch.js';
import { STORE_WATCH, untilDatabaseAnswers, watchedBackends } from '../stores/watched-stores.js';
import { provideBackends, type Backends } from './backends.js';
import { describeInstance, runningInstance, writeInstanceFile } from './instance-file.js';
import { startMetricsHub, type MetricsHub } from './metrics-hub.js';
import { answerThrottledOnSignal } from './throttled-file.js';
import { reloadOnHangup } from './reload.js';
import { handleShutdown, type Lifecycle } from './shutdown.js';
import { lendListenDescriptors } from './listen-descriptors.js';
import { Supervisor } from './supervisor.js';
import { announceReady, recordListening } from './ready-banner.js';

/**
 * The primary process: provides PostgreSQL and Redis (embedded when no URL is given), migrates
 * under an advisory lock, forks the children, serves the host's metrics, and drains everything
 * on SIGTERM/SIGINT (after DRAIN_DELAY_MS of /readyz 503). SIGHUP replaces the web children one
 * at a time.
 */
export async function runPrimary(config: Config, fileSettings: Record<string, string> = {}): Promise<void> {
  const logger = createLogger(config, 'primary');
  const proxyWarning = proxyTrustWarning(config);
  if (proxyWarning) logger.warn(proxyWarning);
  // Signals are handled from the first moment: whatever has started by then is stopped.
  const life = handleShutdown(logger, config);
  await claimHost(config, life);
  // Before the first fork: the web workers then accept from PORT's one listening socket, which the primary creates
  // and holds for as long as a worker listens, so a worker replaced or lost leaves the connections not yet accepted
  // to the others (docs/throttling.md "Past capacity: admission and shedding").
  if (config.CONNECTION_DOOR === 'shared') cluster.schedulingPolicy = cluster.SCHED_NONE;
  const backends = await life.step(() => provideBackends(config, logger));
  life.holdStores = backends.hold;
  life.stops.push((deadline) => backends.stop(deadline));
  await migrate(backends.databaseUrl, logger, life);
  const metrics = await life.step(() => startMetricsHub(config, logger));
  life.stops.push(() => metrics.close());
  answerThrottledOnSignal(config, logger, metrics);
  const supervisor = superviseChildren(config, logger, { backends, metrics, fileSettings }, life);
  if (life.stopping()) return;
  // Before the children, which take seconds to start without Redis: a store that cannot be used is
  // named at once (docs/operations.md "When a store is down"). Pushed last, so closed first: no
  // store line while the children drain.
  const watching = watchStores(watchedBackends(config, backends), logger, STORE_WATCH);
  life.stops.push(async () => (await watching).close());
  const listening = recordListening();
  if (config.ROLE !== 'jobs') await supervisor.start('web', config.WEB_CONCURRENCY);
  if (config.ROLE !== 'web' && config.JOB_CONCURRENCY > 0) await supervisor.start('jobs', config.JOB_CONCURRENCY);
  if (life.stopping()) return;
  const watch = await life.step(() => watching);
  await announceReady(config, logger, watch, { databaseUrl: backends.databaseUrl, api: listening() });
}

/**
 * Checked first, so a start that cannot serve ends before anything else has started: no other
 * instance on DATA_DIR, every port free. Only a primary that runs embedded stores owns its
 * DATA_DIR; with both URLs given, several may share it.
 */
async function claimHost(config: Config, life: Lifecycle): Promise<void> {
  const ownsDataDir = !config.DATABASE_URL || usesEmbeddedRedis(config);
  const running = ownsDataDir ? runningInstance(config) : undefined;
  if (running) {
    throw new Error(
      `Paceline is already running on DATA_DIR ${running.dataDir}: ${describeInstance(running)}. ` +
        'Use that one, stop it with `npm run cli -- stop`, or start this one with another DATA_DIR',
    );
  }
  const { step } = life;
  // Bound without SO_REUSEPORT, so a port any other process holds (with SO_REUSEPORT too) stops the start here.
  if (config.ROLE !== 'jobs') await step(() => ensureServable('PORT', config.PORT, config.HOST));
  if (config.METRICS_PORT > 0)
    await step(() => ensureServable('METRICS_PORT', config.METRICS_PORT, config.METRICS_HOST));
  if (!config.DATABASE_URL) await step(() => ensureServable('EMBEDDED_PG_PORT', config.EMBEDDED_PG_PORT, '127.0.0.1'));
  if (usesEmbeddedRedis(config))
    await step(() => ensureServable('EMBEDDED_REDIS_PORT', config.EMBEDDED_REDIS_PORT, '127.0.0.1'));
  if (ownsDataDir) {
    const removeInstanceFile = writeInstanceFile(config);
    life.stops.push(async () => removeInstanceFile());
  }
}

/** How long the start waits for PostgreSQL to take its connection before it stops (pg's own default). */
const MIGRATE_CONNECT_TIMEOUT_MS = 10_000;

async function migrate(databaseUrl: string, logger: Logger, life: Lifecycle): Promise<void> {
  const limits = { connectionTimeoutMs: MIGRATE_CONNECT_TIMEOUT_MS };
  const migrator = connectDatabase(databaseUrl, 1, 'paceline-migrate', limits);
  try {
    const { applied, newer } = await life.step(() =>
      untilDatabaseAnswers(migrator, databaseUrl, logger, MIGRATE_CONNECT_TIMEOUT_MS)
        .then(() => migrateToLatest(migrator))
        .catch((error: unknown) => {
          // The start stops here, in one line that names the setting (docs/operations.md "When a store is down").
          throw new Error(storeFailureLine('DATABASE_URL', databaseUrl, describeStoreError(error, 'DATABASE_URL')));
        }),
    );
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
    if (newer.length > 0)
      logger.warn(
        { newer },
        'the database has migrations of a newer release; serving on it (a rolling deploy under way?)',
      );
  } finally {
    await migrator.destroy();
  }
}

/** The supervisor of the children, drained on shutdown and reloaded on SIGHUP; no child started yet. */
function superviseChildren(
  config: Config,
  logger: Logger,
  started: { backends: Backends; metrics: MetricsHub; fileSettings: Record<string, string> },
  life: Lifecycle,
): Supervisor {
  const { backends, metrics, fileSettings } = started;
  // A Redis Cluster's nodes reach the children as the primary got them (environment or ENV_FILE).
  const stores = {
    DATABASE_URL: backends.databaseUrl,
    ...(backends.redisUrl ? { REDIS_URL: backends.redisUrl } : {}),
    CURSOR_SECRET: backends.cursorSecret,
  };
  const supervisor = new Supervisor({
    logger,
    shutdownTimeoutMs: childDrainBudgetMs(config),
    env: { ...fileSettings, ...stores },
    onRestart: (role) => metrics.countRestart(role),
    onExit: (worker) => metrics.retire(worker),
    onFork: (worker, role) => {
      if (role === 'web' && config.CONNECTION_DOOR === 'shared' && config.PORT !== 0)
        lendListenDescriptors(worker, config.PORT);
    },
  });
  metrics.attach(() => supervisor.workers());
  if (config.DRAIN_DELAY_MS > 0 && config.ROLE !== 'jobs') {
    life.announceLeaving = async () => {
      supervisor.announceLeaving();
      logger.info(
        { drainDelayMs: config.DRAIN_DELAY_MS },
        'stopping: /readyz answers 503 while the web workers still serve, then they drain',
      );
      await sleep(config.DRAIN_DELAY_MS);
    };
  }
  life.stops.push(() => supervisor.stop());
  reloadOnHangup({ config, startEnv: { ...process.env, ...fileSettings }, logger, supervisor, stores, metrics });
  return supervisor;
}

/**
 * Fails the start with one line naming the setting when its port cannot be listened on (another
 * process holds it), rather than forking web workers that would each fail to bind and be
 * restarted for ever, or starting stores that would fail later.
 */
async function ensureServable(setting: string, port: number, host: string): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ port, host, exclusive: true }, resolve);
    });
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    throw new Error(
      `${setting} ${port} on ${host} cannot be served: ` +
        `${code === 'EADDRINUSE' ? 'another process is listening on it' : message}`,
    );
  }
  await new Promise((resolve) => probe.close(resolve));
}
