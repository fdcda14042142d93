import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { connectDatabase } from '../../db/connect.js';
import { migrateToLatest } from '../../db/migrate.js';
import { childDrainBudgetMs, proxyTrustWarning, usesEmbeddedRedis, type Config } from '../config.js';
import { rereadEnvFile } from '../env-file.js';
import { createLogger } from '../logger.js';
import { provideBackends } from '../stores/backends.js';
import { describeInstance, runningInstance, writeInstanceFile } from './instance-file.js';
import { startMetricsHub } from './metrics-hub.js';
import { Supervisor } from './supervisor.js';

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
  // Signals are handled from the first moment: whatever has started by then is stopped in
  // reverse order, after the step under way finishes, so no embedded store is left running.
  const stops: Array<() => Promise<void>> = [];
  let current: Promise<unknown> = Promise.resolve();
  let stopping = false;
  // Once shutting down, start nothing more: the step never resolves and the process exits.
  const step = <T>(start: () => Promise<T>): Promise<T> => {
    if (stopping) return new Promise<never>(() => {});
    const work = start();
    current = work.catch(() => {});
    return work;
  };
  let holdStores = () => {};
  let announceLeaving = async () => {};
  const shutdown = onceShutdown(logger, config, async () => {
    stopping = true;
    // A store that exits now (the terminal's Ctrl-C reaches it too) is not restarted.
    holdStores();
    for (let seen = null as unknown; seen !== current;) await (seen = current);
    await announceLeaving();
    for (const stop of stops.reverse()) await stop();
  });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  // Checked first, so a start that cannot serve ends before anything else has started. Only a
  // primary that runs embedded stores owns its DATA_DIR; with both URLs given, several may share it.
  const ownsDataDir = !config.DATABASE_URL || usesEmbeddedRedis(config);
  const running = ownsDataDir ? runningInstance(config) : undefined;
  if (running) {
    throw new Error(
      `Paceline is already running on DATA_DIR ${running.dataDir}: ${describeInstance(running)}. ` +
        'Use that one, stop it with `npm run cli -- stop`, or start this one with another DATA_DIR',
    );
  }
  if (config.ROLE !== 'jobs') await step(() => ensureServable('PORT', config.PORT, config.HOST));
  if (config.METRICS_PORT > 0)
    await step(() => ensureServable('METRICS_PORT', config.METRICS_PORT, config.METRICS_HOST));
  if (!config.DATABASE_URL) await step(() => ensureServable('EMBEDDED_PG_PORT', config.EMBEDDED_PG_PORT, '127.0.0.1'));
  if (usesEmbeddedRedis(config))
    await step(() => ensureServable('EMBEDDED_REDIS_PORT', config.EMBEDDED_REDIS_PORT, '127.0.0.1'));
  if (ownsDataDir) {
    const removeInstanceFile = writeInstanceFile(config);
    stops.push(async () => removeInstanceFile());
  }
  const backends = await step(() => provideBackends(config, logger));
  holdStores = backends.hold;
  stops.push(() => backends.stop());
  const migrator = connectDatabase(backends.databaseUrl, 1, 'paceline-migrate');
  try {
    const { applied, newer } = await step(() => migrateToLatest(migrator));
    if (applied.length > 0) logger.info({ applied }, 'migrations applied');
    if (newer.length > 0)
      logger.warn(
        { newer },
        'the database has migrations of a newer release; serving on it (a rolling deploy under way?)',
      );
  } finally {
    await migrator.destroy();
  }

  const metrics = await step(() => startMetricsHub(config, logger));
  stops.push(() => metrics.close());
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
  });
  metrics.attach(() => supervisor.workers());
  if (config.DRAIN_DELAY_MS > 0 && config.ROLE !== 'jobs') {
    announceLeaving = async () => {
      supervisor.announceLeaving();
      logger.info(
        { drainDelayMs: config.DRAIN_DELAY_MS },
        'stopping: /readyz answers 503 while the web workers still serve, then they drain',
      );
      await sleep(config.DRAIN_DELAY_MS);
    };
  }
  stops.push(() => supervisor.stop());
  process.on('SIGHUP', () => {
    // Settings are read again and checked like a start; bad ones leave the workers as they are.
    const reread = rereadEnvFile(process.env, config);
    if (!reread.ok) return logger.error(`reload refused, the workers keep their settings: ${reread.reason}`);
    supervisor.setEnv({ ...reread.settings, ...stores });
    logger.info('SIGHUP: settings read again; replacing web workers one at a time');
    void supervisor.reload('web').then(() => logger.info('web workers replaced'));
  });

  if (stopping) return;
  if (config.ROLE !== 'jobs') await supervisor.start('web', config.WEB_CONCURRENCY);
  if (config.ROLE !== 'web' && config.JOB_CONCURRENCY > 0) await supervisor.start('jobs', config.JOB_CONCURRENCY);
  if (stopping) return;
  const web = config.ROLE === 'jobs' ? 0 : config.WEB_CONCURRENCY;
  logger.info(
    {
      port: web > 0 ? config.PORT : undefined,
      metricsPort: config.METRICS_PORT,
      web,
      jobs: config.ROLE === 'web' ? 0 : config.JOB_CONCURRENCY,
    },
    web > 0 ? readyBanner(config) : 'Paceline job workers are up (ROLE=jobs: this host serves no API)',
  );
}

/** The one line that says the service is ready: where the API and the metrics are, and what to do next. */
export function readyBanner(config: Pick<Config, 'PORT' | 'METRICS_PORT'>): string {
  return (
    `Paceline is up: API http://127.0.0.1:${config.PORT}/api/ , metrics http://127.0.0.1:${config.METRICS_PORT}/metrics ; ` +
    'next, in another terminal: npm run cli -- user:create NAME'
  );
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
      `${setting} ${port} on ${host} cannot be served: ${code === 'EADDRINUSE' ? 'another process is listening on it' : message}`,
    );
  }
  await new Promise((resolve) => probe.close(resolve));
}

function onceShutdown(logger: Logger, config: Config, stopAll: () => Promise<void>) {
  let started = false;
  return (signal: string) => {
    if (started) return;
    started = true;
    logger.info({ signal }, 'shutting down: draining children');
    // Backstop: the children have most of SHUTDOWN_TIMEOUT_MS and the stores the rest; this is for a store that hangs.
    setTimeout(
      () => {
        logger.error('shutdown took too long; exiting');
        process.exit(1);
      },
      config.DRAIN_DELAY_MS + config.SHUTDOWN_TIMEOUT_MS + 20_000,
    ).unref();
    stopAll().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
}
