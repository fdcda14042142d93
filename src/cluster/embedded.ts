import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { startEmbeddedPostgres } from '../../ops/embedded/postgres.js';
import { startRedis } from '../../ops/embedded/redis.js';
import type { RunningService } from '../../ops/embedded/service.js';
import type { Config } from '../config.js';

/** Where the service's backing stores are, and what to stop on the way out. */
export interface Backends {
  databaseUrl: string;
  redisUrl: string;
  cursorSecret: string;
  stop(): Promise<void>;
}

/**
 * Uses `DATABASE_URL` / `REDIS_URL` when set; otherwise starts an embedded PostgreSQL and a
 * `redis-server` child with their data under `DATA_DIR`, so `npm start` needs nothing else.
 * `CURSOR_SECRET`, when unset, is generated once and kept under `DATA_DIR`.
 */
export async function provideBackends(config: Config, logger: Logger): Promise<Backends> {
  const dataDir = resolve(config.DATA_DIR);
  const started: RunningService[] = [];
  const stop = async () => {
    for (const service of started.reverse()) await service.stop().catch(() => {});
  };
  try {
    let databaseUrl = config.DATABASE_URL;
    if (!databaseUrl) {
      logger.info({ port: config.EMBEDDED_PG_PORT }, 'starting embedded PostgreSQL');
      const pg = await startEmbeddedPostgres({ dataDir: join(dataDir, 'pg'), port: config.EMBEDDED_PG_PORT, persistent: true });
      started.push(pg);
      databaseUrl = pg.url;
    }
    let redisUrl = config.REDIS_URL;
    if (!redisUrl) {
      logger.info({ port: config.EMBEDDED_REDIS_PORT }, 'starting embedded Redis');
      const redis = await startRedis({ dataDir: join(dataDir, 'redis'), port: config.EMBEDDED_REDIS_PORT, persistent: true });
      started.push(redis);
      redisUrl = redis.url;
    }
    const cursorSecret = config.CURSOR_SECRET ?? (await readOrCreateSecret(dataDir, logger));
    return { databaseUrl, redisUrl, cursorSecret, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function readOrCreateSecret(dataDir: string, logger: Logger): Promise<string> {
  const file = join(dataDir, 'cursor-secret');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  await writeFile(file, `${secret}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
  logger.warn({ file }, 'CURSOR_SECRET unset: generated one; set the same CURSOR_SECRET on every host behind one load balancer');
  return secret;
}
