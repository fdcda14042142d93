import { sql } from 'kysely';
import { connectDatabase } from '../../db/connect.js';
import type { Config } from '../config.js';
import { checkRedis, createRedisClient, type RedisClient } from './redis-client.js';
import type { WatchedStore } from './store-watch.js';

/** How long one check of a store may take before it counts as failed. */
const CHECK_TIMEOUT_MS = 2_000;

/** PostgreSQL at `url` (DATABASE_URL), checked with `select 1` on one connection of its own. */
export function watchedDatabase(url: string): WatchedStore {
  const db = connectDatabase(url, 1, 'paceline-watch', { connectionTimeoutMs: CHECK_TIMEOUT_MS });
  return {
    name: 'PostgreSQL',
    setting: 'DATABASE_URL',
    address: url,
    check: () => withinTimeout(sql`select 1`.execute(db)),
    close: () => db.destroy(),
  };
}

type RedisSettings = Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_PASSWORD' | 'THROTTLE_TIMEOUT_MS'>;

/** Redis (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES), checked as /readyz checks it. */
export function watchedRedis(settings: RedisSettings): WatchedStore {
  const client = createRedisClient(settings, 'enqueue');
  const cluster = settings.REDIS_CLUSTER_NODES !== undefined;
  return {
    name: cluster ? 'Redis Cluster' : 'Redis',
    setting: cluster ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL',
    address: cluster ? undefined : settings.REDIS_URL,
    check: () => withinTimeout(settled(client).then(() => checkRedis(client))),
    close: async () => void (await client.quit().catch(() => client.disconnect())),
  };
}

/** Resolves once a connection under way is up or has failed: its first error is the reason to report. */
function settled(client: RedisClient): Promise<void> {
  if (client.status === 'ready' || !['connecting', 'connect', 'wait'].includes(client.status)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      client.off('ready', done);
      client.off('error', done);
      resolve();
    };
    client.once('ready', done);
    client.once('error', done);
  });
}

async function withinTimeout(check: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms (timed out)`)),
      CHECK_TIMEOUT_MS,
    );
  });
  try {
    await Promise.race([check, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * How often the primary checks its stores (every 30 s, every 5 s while one is down), and how often
 * a store that stays down is logged again.
 */
export const STORE_WATCH = { checkEveryMs: 30_000, recheckEveryMs: 5_000, repeatEveryMs: 300_000 } as const;

/** The stores the service was given (embedded or not), as the primary watches them. */
export function watchedBackends(config: RedisSettings, backends: { databaseUrl: string; redisUrl?: string }) {
  return [
    watchedDatabase(backends.databaseUrl),
    watchedRedis({ ...config, ...(backends.redisUrl ? { REDIS_URL: backends.redisUrl } : {}) }),
  ];
}
