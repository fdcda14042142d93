import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { usesEmbeddedRedis, type Config } from '../settings/config.js';
import { readOrCreateSecret } from '../settings/secret-file.js';

/** Where the service's backing stores are, and what to stop on the way out. */
export interface Backends {
  databaseUrl: string;
  /** Unset when the service uses a Redis Cluster (REDIS_CLUSTER_NODES), which the children read themselves. */
  redisUrl?: string;
  cursorSecret: string;
  /** Embedded stores are no longer restarted: shutdown has begun. */
  hold(): void;
  /** Stops the embedded stores; one still shutting down at `deadline` (ms since the epoch) is ended at once. */
  stop(deadline?: number): Promise<void>;
}

/**
 * Uses `DATABASE_URL` / `REDIS_URL` (or `REDIS_CLUSTER_NODES`) when set; otherwise starts the
 * embedded PostgreSQL and Redis (src/embedded/, loaded only then: a primary given both URLs never
 * loads it). `CURSOR_SECRET`, when unset, is generated once and kept in a 0600 file under
 * `DATA_DIR`; it is never logged.
 */
export async function provideBackends(config: Config, logger: Logger): Promise<Backends> {
  const stores =
    config.DATABASE_URL && !usesEmbeddedRedis(config)
      ? { databaseUrl: config.DATABASE_URL, redisUrl: config.REDIS_URL, hold: () => {}, stop: async () => {} }
      : await (await import('../embedded/embedded-stores.js')).startEmbeddedStores(config, logger);
  try {
    const cursorSecret = config.CURSOR_SECRET ?? (await cursorSecretUnderDataDir(resolve(config.DATA_DIR), logger));
    return { ...stores, cursorSecret };
  } catch (error) {
    await stores.stop();
    throw error;
  }
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
