import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { usesEmbeddedRedis, type Config } from '../config.js';
import { startEmbeddedPostgres } from './postgres.js';
import { provideServiceRole } from './postgres-role.js';
import { startRedis } from './redis.js';
import { readOrCreateSecret } from './secret-file.js';
import { findServerAccount } from './server-account.js';
import type { RunningService } from './service.js';

/** Where the service's backing stores are, and what to stop on the way out. */
export interface Backends {
  databaseUrl: string;
  /** Unset when the service uses a Redis Cluster (REDIS_CLUSTER_NODES), which the children read themselves. */
  redisUrl?: string;
  cursorSecret: string;
  /** Embedded stores are no longer restarted: shutdown has begun. */
  hold(): void;
  stop(): Promise<void>;
}

/**
 * Uses `DATABASE_URL` / `REDIS_URL` (or `REDIS_CLUSTER_NODES`) when set; otherwise starts an embedded PostgreSQL and a
 * `redis-server` child with their data under `DATA_DIR`, so `npm start` needs nothing else.
 * The embedded stores run with least privilege (docs/security.md "Least privilege"): the service connects
 * to PostgreSQL as a role that owns the schema but is no superuser, to Redis as a user that may
 * run no admin command, and as root each server runs as its own account (`postgres`,
 * `paceline-redis`). Their passwords, and `CURSOR_SECRET`
 * when unset, are generated once and kept in 0600 files under `DATA_DIR`; none is ever logged.
 */
export async function provideBackends(config: Config, logger: Logger): Promise<Backends> {
  const dataDir = resolve(config.DATA_DIR);
  const started: KeptService[] = [];
  const hold = () => {
    for (const service of started) service.hold();
  };
  const stop = async () => {
    for (const service of started.reverse()) await service.stop().catch(() => {});
  };
  try {
    let databaseUrl = config.DATABASE_URL;
    if (!databaseUrl) {
      logger.info({ port: config.EMBEDDED_PG_PORT }, 'starting embedded PostgreSQL');
      const pgDir = join(dataDir, 'pg');
      const pg = await keepRunning('PostgreSQL', logger, (onUnexpectedExit) =>
        startEmbeddedPostgres({ dataDir: pgDir, port: config.EMBEDDED_PG_PORT, persistent: true, onUnexpectedExit }),
      );
      started.push(pg);
      databaseUrl = await provideServiceRole(pg.url, pgDir, findServerAccount());
    }
    let redisUrl = config.REDIS_URL;
    if (usesEmbeddedRedis(config)) {
      logger.info({ port: config.EMBEDDED_REDIS_PORT }, 'starting embedded Redis');
      const { secret: password } = await readOrCreateSecret(join(dataDir, REDIS_PASSWORD_FILE));
      const redis = await keepRunning('Redis', logger, (onUnexpectedExit) =>
        startRedis({
          dataDir: join(dataDir, 'redis'),
          port: config.EMBEDDED_REDIS_PORT,
          persistent: true,
          password,
          onUnexpectedExit,
        }),
      );
      started.push(redis);
      redisUrl = redis.url;
    }
    const cursorSecret = config.CURSOR_SECRET ?? (await cursorSecretUnderDataDir(dataDir, logger));
    return { databaseUrl, redisUrl, cursorSecret, hold, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The embedded Redis's password, under DATA_DIR (not in Redis's own directory, which its server account may write). */
export const REDIS_PASSWORD_FILE = 'redis-password';

const RESTART_WINDOW_MS = 60_000;
const MAX_RESTART_DELAY_MS = 30_000;

/** A store kept running by {@link keepRunning}. */
export interface KeptService extends RunningService {
  /** No more restarts from now on (shutdown has begun; the store may exit with the terminal's Ctrl-C). */
  hold(): void;
}

/**
 * Starts an embedded store and starts it again, on the same port and data, whenever it exits
 * on its own (killed, crashed): after 0.5 s, doubling with each exit in the last minute up to
 * 30 s, and again after a failed start. One restart at a time. The children's clients reconnect
 * by themselves, so the service recovers without a restart (and, meanwhile, answers as it does
 * with an external store that is down). `stop()` ends it for good: a pending restart is
 * cancelled, one under way is stopped once started.
 */
export async function keepRunning(
  name: string,
  logger: Logger,
  start: (onUnexpectedExit: (how: string) => void) => Promise<RunningService>,
): Promise<KeptService> {
  let held = false;
  let running = false; // a first start that fails is the caller's error, not a restart
  let restartPending = false;
  let exits: number[] = [];
  let restarting: Promise<void> = Promise.resolve();
  const cancel = new AbortController();
  // Each instance reports its exit once, whether through its exit hook or its failed start.
  const startInstance = () => {
    let reported = false;
    return start((how) => {
      if (reported) return;
      reported = true;
      restart(how);
    });
  };
  const restart = (how: string) => {
    if (held || !running || restartPending) return;
    restartPending = true;
    const now = Date.now();
    exits = [...exits.filter((at) => now - at < RESTART_WINDOW_MS), now];
    const delay = Math.min(MAX_RESTART_DELAY_MS, 500 * 2 ** (exits.length - 1));
    logger.error(
      { store: name, exit: how, exitsLastMinute: exits.length, restartInMs: delay },
      `embedded ${name} exited unexpectedly; restarting it`,
    );
    restarting = (async () => {
      try {
        await sleep(delay, undefined, { signal: cancel.signal });
      } catch {
        return; // held meanwhile
      }
      let started: RunningService;
      try {
        started = await startInstance();
      } catch (error) {
        restartPending = false;
        logger.error({ err: error, store: name }, `embedded ${name} could not be restarted`);
        restart('start failed');
        return;
      }
      restartPending = false;
      if (held) return void (await started.stop());
      current = started;
      logger.warn({ store: name }, `embedded ${name} restarted`);
    })();
  };
  const hold = () => {
    held = true;
    cancel.abort();
  };
  let current = await startInstance();
  running = true;
  return {
    url: current.url,
    hold,
    async stop() {
      hold();
      await restarting;
      await current.stop();
    },
  };
}

async function cursorSecretUnderDataDir(dataDir: string, logger: Logger): Promise<string> {
  const file = join(dataDir, 'cursor-secret');
  const { secret, created } = await readOrCreateSecret(file);
  if (created)
    logger.warn(
      { file },
      'CURSOR_SECRET unset: generated one; set the same CURSOR_SECRET on every host behind one load balancer',
    );
  return secret;
}
