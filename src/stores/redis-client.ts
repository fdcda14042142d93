import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../settings/config.js';

/** One Redis (`REDIS_URL`) or a Redis Cluster (`REDIS_CLUSTER_NODES`): every caller takes either. */
export type RedisClient = Redis | Cluster;

/**
 * What a connection is for:
 * - `requests`: the throttle and the read cache of a serving process. Commands fail fast while
 *   disconnected instead of queueing (the throttle has its own failure mode); reconnects forever.
 * - `jobs`: a BullMQ worker, after BullMQ's production guide: waits through an outage
 *   (`maxRetriesPerRequest: null`), reconnecting forever with a capped back-off.
 * - `enqueue`: a BullMQ producer on the request path: fails fast (no offline queue).
 */
export type RedisUse = 'requests' | 'jobs' | 'enqueue';

type RedisSettings = Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_PASSWORD' | 'THROTTLE_TIMEOUT_MS'> &
  Partial<Pick<Config, 'REDIS_AUTO_PIPELINING'>>;

/**
 * A new connection for `use`: a `Cluster` when REDIS_CLUSTER_NODES is set, otherwise a `Redis`
 * on REDIS_URL. REDIS_PASSWORD fills in when the address carries no password. Its `error` events
 * are swallowed: each caller reports the failures of its own commands.
 * @throws Error when neither address is set (the primary sets REDIS_URL for its children).
 */
export function createRedisClient(config: RedisSettings, use: RedisUse): RedisClient {
  const { retryStrategy, ...options } = optionsFor(config, use);
  let client: RedisClient;
  const cluster = config.REDIS_CLUSTER_NODES;
  if (cluster) {
    const password = cluster.password ?? config.REDIS_PASSWORD;
    client = new Cluster(
      cluster.nodes.map((node) => ({ ...node })),
      {
        // Before the first slot map, and whenever every node is gone, commands queue or fail as for one Redis.
        enableOfflineQueue: options.enableOfflineQueue ?? true,
        enableAutoPipelining: options.enableAutoPipelining ?? false,
        clusterRetryStrategy: retryStrategy,
        redisOptions: {
          ...options,
          ...(cluster.username ? { username: cluster.username } : {}),
          ...(password ? { password } : {}),
        },
      },
    );
  } else {
    if (!config.REDIS_URL) throw new Error('REDIS_URL is not set');
    const password = new URL(config.REDIS_URL).password === '' ? config.REDIS_PASSWORD : undefined;
    client = new Redis(config.REDIS_URL, { ...options, retryStrategy, ...(password ? { password } : {}) });
  }
  // Reported where a command failed, as one line (docs/operations.md "When a store is down"); the
  // connection's own last error is kept, since a command on a connection that is down only says so.
  client.on('error', (error: unknown) => connectionErrors.set(client, error));
  client.on('ready', () => connectionErrors.delete(client));
  return client;
}

const connectionErrors = new WeakMap<RedisClient, unknown>();

/**
 * Closes a client for good: QUIT while connected; while Redis is unreachable QUIT is refused, and disconnect()
 * stops the reconnecting. A `Redis` disconnected while it waits to reconnect still holds the commands it had sent
 * before the connection dropped (kept to be sent again), each with its `commandTimeout` timer, which would hold the
 * process that long: ioredis rejects them only on a close event, and none is to come. They are rejected here.
 */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  try {
    await client.quit();
  } catch {
    client.disconnect();
    if (client instanceof Redis && client.status === 'reconnecting')
      (client as unknown as { flushQueue(error: Error): void }).flushQueue(new Error('Connection is closed.'));
  }
}

function optionsFor(
  config: RedisSettings,
  use: RedisUse,
): RedisOptions & { retryStrategy: (attempt: number) => number } {
  switch (use) {
    case 'requests':
      return {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        commandTimeout: Math.max(config.THROTTLE_TIMEOUT_MS * 10, 1000),
        enableAutoPipelining: config.REDIS_AUTO_PIPELINING === 'on',
        retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
      };
    case 'jobs':
      return { maxRetriesPerRequest: null, retryStrategy: (attempt) => Math.min(250 * attempt, 5_000) };
    case 'enqueue':
      return {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        retryStrategy: (attempt) => Math.min(250 * attempt, 5_000),
      };
  }
}

/**
 * Readiness of Redis: one Redis answers PING; a cluster must say `cluster_state:ok` (every slot
 * served) and every master this client knows must answer PING.
 * @throws Error (rejects) naming what failed: the connection's last error (refused, NOAUTH, TLS)
 * when it is down, rather than the command's "Stream isn't writeable".
 */
export async function checkRedis(client: RedisClient): Promise<void> {
  try {
    await pingAll(client);
  } catch (error) {
    throw connectionErrors.get(client) ?? error;
  }
}

async function pingAll(client: RedisClient): Promise<void> {
  if (!(client instanceof Cluster)) return void (await client.ping());
  const info = String(await client.cluster('INFO'));
  if (!info.includes('cluster_state:ok'))
    throw new Error(`the cluster is not serving every slot: ${/cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown'}`);
  const masters = client.nodes('master');
  if (masters.length === 0) throw new Error('no master known yet');
  await Promise.all(masters.map((node) => node.ping()));
}
