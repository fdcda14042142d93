import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import hashSlot from 'cluster-key-slot';
import { Cluster, Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { CENSUS_STALE_MS, WorkerCensus } from '../../../src/throttle/worker-census.js';
import { startRedisCluster, type TestRedisCluster } from '../../helpers/redis-cluster.js';

// docs/throttling.md "When Redis is unreachable": the web workers of a deployment counted through
// Redis, in one sorted set each worker records itself in; on one Redis (the test run's) and on a
// real 3-master Redis Cluster, where the census is one key in one slot.

const TMP = process.env.TEST_TMP_DIR;
const REDIS_URL = process.env.TEST_REDIS_URL;
if (!TMP || !REDIS_URL) throw new Error('TEST_TMP_DIR and TEST_REDIS_URL are not set: run tests with `npm test`');

/** Every census records once after all are in: each then reads how many there are. */
async function recordAll(censuses: WorkerCensus[]): Promise<number[]> {
  for (const census of censuses) await census.record();
  for (const census of censuses) await census.record();
  return censuses.map((census) => census.workers);
}

const One = suite('the census of web workers on one Redis');
let redis: Redis;
const key = `test:census:${randomBytes(4).toString('hex')}:throttle:workers`;

One.before(() => {
  redis = new Redis(REDIS_URL);
});

One.after(() => redis?.disconnect());

One('each worker reads how many are alive; one that stops or goes silent is no longer counted', async () => {
  const censuses = [0, 1, 2].map(() => new WorkerCensus(redis, key, 4));
  assert.equal(
    censuses.map((c) => [c.workers, c.isCounted]),
    [
      [4, false],
      [4, false],
      [4, false],
    ],
    'before any count: the fallback',
  );
  assert.equal(await recordAll(censuses), [3, 3, 3]);
  assert.ok(censuses.every((c) => c.isCounted));
  await censuses[2]!.close();
  await censuses[2]!.close();
  assert.equal(await recordAll(censuses.slice(0, 2)), [2, 2], 'a worker that stops takes itself out');
  const [time] = (await redis.time()) as [number | string, number | string];
  await redis.zadd(key, Number(time) * 1000 - CENSUS_STALE_MS - 1_000, 'a worker that went silent');
  assert.equal(await recordAll(censuses.slice(0, 2)), [2, 2], 'one not seen for CENSUS_STALE_MS is not');
  assert.is(await redis.zscore(key, 'a worker that went silent'), null, 'and is forgotten');
  const ttl = await redis.pttl(key);
  assert.ok(ttl > 0 && ttl <= CENSUS_STALE_MS, `the census expires when every worker is gone: ${ttl} ms`);
  await Promise.all(censuses.map((c) => c.close()));
});

One('with Redis unreachable a record resolves and the last count holds', async () => {
  const censuses = [0, 1].map(() => new WorkerCensus(redis, key, 8));
  assert.equal(await recordAll(censuses), [2, 2]);
  const nowhere = new Redis({
    port: await findFreePort(),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  nowhere.on('error', () => {});
  const lost = new WorkerCensus(nowhere, key, 8);
  await lost.record();
  assert.equal([lost.workers, lost.isCounted], [8, false], 'never counted: the fallback');
  await Promise.all([...censuses, lost].map((c) => c.close()));
  nowhere.disconnect();
});

One.run();

const OnCluster = suite('the census of web workers on a Redis Cluster (3 masters)');
let redisCluster: TestRedisCluster | undefined;
let cluster: Cluster;

OnCluster.before(async () => {
  redisCluster = await startRedisCluster(join(TMP, 'redis-cluster-census'), { masters: 3 });
  cluster = new Cluster(
    redisCluster.ports.map((port) => ({ host: '127.0.0.1', port })),
    { redisOptions: redisCluster.credentials },
  );
  await once(cluster, 'ready');
});

OnCluster.after(async () => {
  cluster?.disconnect();
  await redisCluster?.stop();
});

OnCluster('workers count each other through one key, whichever master serves its slot', async () => {
  const clusterKey = 'test:census:throttle:workers';
  const censuses = [0, 1].map(() => new WorkerCensus(cluster, clusterKey, 5));
  assert.equal(await recordAll(censuses), [2, 2]);
  const master = await redisCluster!.masterOf(hashSlot(clusterKey));
  const node = cluster.nodes('master').find((n) => n.options.port === master)!;
  assert.is(await node.zcard(clusterKey), 2, 'one sorted set on the master of its slot');
  await censuses[0]!.close();
  assert.equal(await recordAll(censuses.slice(1)), [1]);
  await censuses[1]!.close();
});

OnCluster.run();
