import { Redis } from 'ioredis';
import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import { connectDatabase } from '../../db/connect.js';
import type { Database } from '../../db/database.js';
import type { Config } from '../settings/config.js';
import type { ClusterNodes } from '../settings/redis-cluster-nodes.js';
import { checkRedis, closeRedisClient, createRedisClient, type RedisClient } from './redis-client.js';
import { redactAddress } from './store-errors.js';
import type { WatchedStore } from './store-watch.js';

/** How long one check of a store may take before it counts as failed. */
const CHECK_TIMEOUT_MS = 2_000;

/** PostgreSQL at `url` (DATABASE_URL), checked with `select 1` on one connection of its own. */
function watchedDatabase(url: string): WatchedStore {
  const db = connectDatabase(url, 1, 'paceline-watch', { connectionTimeoutMs: CHECK_TIMEOUT_MS });
  return {
    name: 'PostgreSQL',
    setting: 'DATABASE_URL',
    address: url,
    check: () => withinTimeout(sql`select 1`.execute(db)),
    close: () => db.destroy(),
  };
}

/**
 * Resolves once PostgreSQL at `url` (DATABASE_URL) answers `select 1` on `db`, and rejects as that
 * query does. A server that takes longer than a check may (one that drops packets rather than
 * refusing them) is said to be waited for, in one line naming DATABASE_URL, rather than leaving
 * the start silent until `giveUpAfterMs` (docs/operations.md "When a store is down").
 */
export async function untilDatabaseAnswers(
  db: Kysely<Database>,
  url: string,
  logger: Logger,
  giveUpAfterMs: number,
): Promise<void> {
  const waiting = setTimeout(
    () =>
      logger.warn(
        { store: 'DATABASE_URL' },
        `waiting for PostgreSQL at DATABASE_URL ${redactAddress(url)}: no answer yet; ` +
          `the start stops if none comes within ${giveUpAfterMs / 1000} s`,
      ),
    CHECK_TIMEOUT_MS,
  );
  try {
    await sql`select 1`.execute(db);
  } finally {
    clearTimeout(waiting);
  }
}

type RedisSettings = Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_PASSWORD' | 'THROTTLE_TIMEOUT_MS'>;

/** Redis (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES), checked as /readyz checks it. */
function watchedRedis(settings: RedisSettings): WatchedStore {
  const client = createRedisClient(settings, 'enqueue');
  const check = () => withinTimeout(settled(client).then(() => checkRedis(client)));
  const cluster = settings.REDIS_CLUSTER_NODES;
  const close = () => closeRedisClient(client);
  if (!cluster) return { name: 'Redis', setting: 'REDIS_URL', address: settings.REDIS_URL, check, close };
  return {
    name: 'Redis Cluster',
    setting: 'REDIS_CLUSTER_NODES',
    address: cluster.nodes.map(nodeAddress).join(','),
    check: () =>
      check().catch(async (error: unknown) => {
        throw (await whyNoNodeAnswers(cluster, settings.REDIS_PASSWORD)) ?? error;
      }),
    close,
  };
}

/**
 * Why none of a cluster's given nodes can be used (refused, a name that does not resolve, a refused
 * password), asked of each on a connection of its own: ioredis' cluster client keeps its nodes'
 * connection errors to itself and says only that it could not read the slots. Undefined when one
 * answers; the cluster's own error then says what is wrong.
 */
async function whyNoNodeAnswers(cluster: ClusterNodes, password: string | undefined): Promise<unknown> {
  const credentials = { username: cluster.username, password: cluster.password ?? password };
  const failures = await Promise.all(cluster.nodes.map((node) => whyNodeFails(node, credentials)));
  return failures.every((failure) => failure !== undefined) ? failures[0] : undefined;
}

async function whyNodeFails(
  node: ClusterNodes['nodes'][number],
  credentials: { username?: string; password?: string },
): Promise<unknown> {
  const probe = new Redis({
    ...node,
    ...credentials,
    lazyConnect: true,
    connectTimeout: CHECK_TIMEOUT_MS,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableReadyCheck: false,
  });
  // A refused AUTH arrives as an error event; the PING after it only says NOAUTH.
  let refused: unknown;
  probe.on('error', (error: unknown) => (refused ??= error));
  try {
    await withinTimeout(probe.connect().then(() => probe.ping()));
    return undefined;
  } catch (error) {
    return refused ?? error;
  } finally {
    probe.disconnect();
  }
}

function nodeAddress({ host, port }: { host: string; port: number }): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
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
