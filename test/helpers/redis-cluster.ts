import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { findFreePorts } from '../../src/embedded/ports.js';
import { isAlive } from '../../src/cluster/processes.js';
import { newRedisPassword, OPERATOR_USER, startRedis } from '../../src/embedded/redis.js';
import { SERVICE_USER } from '../../src/stores/redis-service-user.js';

/** One node of a cluster as `CLUSTER NODES` describes it. */
export interface ClusterNode {
  id: string;
  port: number;
  role: 'master' | 'replica';
  /** Marked failed (or suspected) by the node asked. */
  failed: boolean;
  /** A replica's master id. */
  masterId?: string;
  /** A master's slot ranges, inclusive. */
  slots: Array<[number, number]>;
}

export interface TestRedisCluster {
  /** Every node's port, in start order (the first `masters` were created as masters). */
  ports: number[];
  /**
   * `redis-cluster://paceline:<password>@127.0.0.1:<port>,…` of the masters at creation: a
   * REDIS_CLUSTER_NODES value with the service user's credentials.
   */
  seeds: string;
  /** What a direct client needs to AUTH as the service user (`redisOptions` of an ioredis Cluster). */
  credentials: { username: string; password: string };
  /** The operator's admin user, for a test's inspection (KEYS, CLUSTER commands), never for the service. */
  adminCredentials: { username: string; password: string };
  /** The nodes as a live node sees them. */
  topology(): Promise<ClusterNode[]>;
  /** The port of the master serving `slot` now, as a live node sees it. */
  masterOf(slot: number): Promise<number>;
  /** SIGKILLs the node on `port` (its own process, by PID). */
  kill(port: number): void;
  /** Resolves once every live node says `cluster_state:ok` and `ready` holds for the topology. */
  waitUntil(ready: (nodes: ClusterNode[]) => boolean, timeoutMs: number): Promise<ClusterNode[]>;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** `cluster-node-timeout`: how long a master may be silent before its replica takes over. */
  nodeTimeoutMs?: number;
}

const READY_TIMEOUT_MS = 60_000;

/**
 * Starts a Redis Cluster of `redis-server` processes on 127.0.0.1 (free ports, data under
 * `dataDir`), each as `npm start` runs its Redis (a password, the service's ACL user, `default`
 * off), plus the operator's user (`operatorPassword`), which creates the cluster, inspects it and carries
 * replication (the service user may run no cluster or replication command), created with
 * `redis-cli --cluster create`, and waits until every slot is served and every replica is in sync. `stop()` ends every node it started, whatever `kill` did.
 */
export async function startRedisCluster(dataDir: string, options: RedisClusterOptions = {}): Promise<TestRedisCluster> {
  // A node's port or bus port may be one a node of another file's cluster had until it was killed: that cluster's
  // nodes then reach this one over the bus (which has no password) and it knows other nodes before it is created.
  // Fresh ports, another time.
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startRedisClusterOnce(join(dataDir, `attempt-${attempt}`), options);
    } catch (error) {
      const foreign = /is not empty/.test(String((error as { stdout?: string }).stdout ?? ''));
      if (!foreign || attempt === 3) throw error;
    }
  }
}

async function startRedisClusterOnce(dataDir: string, options: RedisClusterOptions): Promise<TestRedisCluster> {
  const { masters = 3, replicasPerMaster = 0, nodeTimeoutMs = 3_000 } = options;
  const nodes = masters * (1 + replicasPerMaster);
  // Each node's cluster bus gets a free port of its own: the default, port + 10000, may be taken.
  const chosen = await findFreePorts(nodes * 2);
  const ports = chosen.slice(0, nodes);
  const busPorts = chosen.slice(nodes);
  const credentials = { username: SERVICE_USER, password: newRedisPassword() };
  const admin = { username: OPERATOR_USER, password: newRedisPassword() };
  const started = await Promise.allSettled(
    ports.map((port, i) =>
      startRedis({
        dataDir: join(dataDir, `node-${port}`),
        port,
        persistent: false,
        password: credentials.password,
        operatorPassword: admin.password,
        log: () => {},
        onUnexpectedExit: () => {},
        extraArgs: [
          '--cluster-enabled',
          'yes',
          '--cluster-port',
          String(busPorts[i]),
          '--cluster-config-file',
          `nodes-${port}.conf`,
          '--cluster-node-timeout',
          String(nodeTimeoutMs),
        ],
      }),
    ),
  );
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    // Nodes that did start are not left behind.
    await Promise.allSettled(
      started.map((result) => (result.status === 'fulfilled' ? result.value.stop() : undefined)),
    );
    throw failed.reason;
  }
  const servers = started.map(
    (result) => (result as PromiseFulfilledResult<Awaited<ReturnType<typeof startRedis>>>).value,
  );
  const pids = new Map(ports.map((port, i) => [port, servers[i]!.pid]));
  const stop = async () => void (await Promise.allSettled(servers.map((server) => server.stop())));
  try {
    const addresses = ports.map((port) => `127.0.0.1:${port}`);
    await promisify(execFile)(
      'redis-cli',
      [
        '--user',
        admin.username,
        '--cluster',
        'create',
        ...addresses,
        '--cluster-replicas',
        String(replicasPerMaster),
        '--cluster-yes',
      ],
      // The password goes in the environment redis-cli reads, not in arguments `ps` shows.
      {
        timeout: READY_TIMEOUT_MS,
        env: { ...process.env, REDISCLI_AUTH: admin.password },
      },
    );
    const live = () => ports.filter((port) => isAlive(pids.get(port)!));
    const ask = <T>(port: number, work: (redis: Redis) => Promise<T>) => askNode(port, admin, work);
    const topology = () => readTopology(live(), ask);
    const waitUntil = async (ready: (nodes: ClusterNode[]) => boolean, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const states = await Promise.all(
          live().map((port) => ask(port, (redis) => redis.cluster('INFO')).catch(() => '')),
        );
        const nodes = await topology().catch(() => []);
        if (states.every((info) => String(info).includes('cluster_state:ok')) && nodes.length > 0 && ready(nodes))
          return nodes;
        if (Date.now() > deadline)
          throw new Error(`the Redis Cluster did not settle within ${timeoutMs} ms: ${JSON.stringify(nodes)}`);
        await sleep(100);
      }
    };
    await waitUntil((nodes) => nodes.filter((node) => node.role === 'master').length === masters, READY_TIMEOUT_MS);
    await waitForReplicas(ports.slice(masters), ask);
    const userinfo = `${credentials.username}:${encodeURIComponent(credentials.password)}`;
    return {
      ports,
      seeds: `redis-cluster://${userinfo}@${addresses.slice(0, masters).join(',')}`,
      credentials,
      adminCredentials: admin,
      topology,
      async masterOf(slot) {
        const owner = (await topology()).find(
          (node) => node.role === 'master' && !node.failed && node.slots.some(([a, b]) => a <= slot && slot <= b),
        );
        if (!owner) throw new Error(`no master serves slot ${slot}`);
        return owner.port;
      },
      kill: (port) => void process.kill(pids.get(port)!, 'SIGKILL'),
      waitUntil,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

type Ask = <T>(port: number, work: (redis: Redis) => Promise<T>) => Promise<T>;

/** Runs `work` on a short-lived connection to one node, as `credentials`' user. */
async function askNode<T>(
  port: number,
  credentials: { username: string; password: string },
  work: (redis: Redis) => Promise<T>,
): Promise<T> {
  const redis = new Redis(port, '127.0.0.1', {
    ...credentials,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2_000,
    lazyConnect: true,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await work(redis);
  } finally {
    redis.disconnect();
  }
}

async function readTopology(livePorts: number[], ask: Ask): Promise<ClusterNode[]> {
  for (const port of livePorts) {
    const text = await ask(port, (redis) => redis.cluster('NODES')).catch(() => undefined);
    if (text !== undefined) return parseClusterNodes(String(text));
  }
  throw new Error('no live node answered CLUSTER NODES');
}

/** Parses `CLUSTER NODES`: `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>…`. */
function parseClusterNodes(text: string): ClusterNode[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id, address, flags, master, , , , , ...slots] = line.trim().split(' ');
      const flagList = flags!.split(',');
      return {
        id: id!,
        port: Number(/:(\d+)@/.exec(address!)?.[1]),
        role: flagList.includes('master') ? 'master' : 'replica',
        failed: flagList.includes('fail') || flagList.includes('fail?'),
        ...(master !== '-' ? { masterId: master } : {}),
        slots: slots
          .filter((slot) => !slot.startsWith('['))
          .map((slot) => {
            const [a, b] = slot.split('-').map(Number);
            return [a!, b ?? a!] as [number, number];
          }),
      };
    });
}

async function waitForReplicas(replicaPorts: number[], ask: Ask): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (const port of replicaPorts) {
    for (;;) {
      const info = String(await ask(port, (redis) => redis.info('replication')).catch(() => ''));
      if (info.includes('master_link_status:up')) break;
      if (Date.now() > deadline) throw new Error(`replica on port ${port} never synced: ${info}`);
      await sleep(100);
    }
  }
}
