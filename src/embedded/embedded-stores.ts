import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { usesEmbeddedRedis, type Config } from '../settings/config.js';
import { readOrCreateSecret } from '../settings/secret-file.js';
import { REDIS_PASSWORD_FILE } from '../stores/redis-service-user.js';
import { keepRunning, type KeptService } from './keep-running.js';
import { startEmbeddedPostgres } from './postgres.js';
import { provideServiceRole } from './postgres-role.js';
import { startRedis } from './redis.js';
import { findServerAccount } from './server-account.js';

/** The stores' addresses once the embedded ones run, and what to stop on the way out. */
export interface EmbeddedStores {
  /** The embedded PostgreSQL's service role, or DATABASE_URL when that is set. */
  databaseUrl: string;
  /** The embedded Redis's, or REDIS_URL; unset with a Redis Cluster (REDIS_CLUSTER_NODES). */
  redisUrl?: string;
  /** Embedded stores are no longer restarted: shutdown has begun. */
  hold(): void;
  stop(deadline?: number): Promise<void>;
}

/**
 * Starts an embedded PostgreSQL when `DATABASE_URL` is unset and a `redis-server` child when
 * neither `REDIS_URL` nor `REDIS_CLUSTER_NODES` is, with their data under `DATA_DIR`, so `npm start`
 * needs nothing else; the store given by its setting is used as it is.
 * The embedded stores run with least privilege (docs/security.md "Least privilege"): the service connects
 * to PostgreSQL as a role that owns the schema but is no superuser, to Redis as a user that may
 * run no admin command, and as root each server runs as its own account (`postgres`,
 * `paceline-redis`). Their passwords are generated once and kept in 0600 files under `DATA_DIR`;
 * none is ever logged. On a failed start, whatever did start is stopped.
 */
export async function startEmbeddedStores(config: Config, logger: Logger): Promise<EmbeddedStores> {
  const dataDir = resolve(config.DATA_DIR);
  const started: KeptService[] = [];
  const hold = () => {
    for (const service of started) service.hold();
  };
  // Side by side: neither needs the other to stop, and each has all the time left before the deadline.
  const stop = async (deadline?: number) => {
    await Promise.all(started.map((service) => service.stop(deadline).catch(() => {})));
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
    return { databaseUrl, redisUrl, hold, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
