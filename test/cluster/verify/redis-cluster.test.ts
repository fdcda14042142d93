import { join } from 'node:path';
import { suite } from 'uvu';
import { startCluster, type RunningCluster } from '../../fixtures/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { startRedisCluster, type TestRedisCluster } from '../../helpers/redis-cluster.js';
import {
  assertAllHold,
  databaseWithUsers,
  scratch,
  VERIFY_ARGS,
  VERIFY_SETTINGS,
} from '../../helpers/verify-paceline.js';
import { runVerify } from '../../helpers/verify.js';

// docs/verify.md: one Paceline host (two workers) on a Redis Cluster of three masters.

const clustered = suite('verify against Paceline on a Redis Cluster');
let redisCluster: TestRedisCluster | undefined;
let host: RunningCluster | undefined;
let dropClusteredDatabase = async () => {};

clustered.before(async () => {
  const [cluster, database] = await Promise.all([
    startRedisCluster(join(scratch, 'redis-cluster'), { masters: 3 }),
    databaseWithUsers('verify-clustered'),
  ]);
  redisCluster = cluster;
  dropClusteredDatabase = database.drop;
  const env = {
    ...testStoresEnv('verify-clustered', database.url),
    ...VERIFY_SETTINGS,
    REDIS_URL: '',
    REDIS_CLUSTER_NODES: cluster.seeds,
    WEB_CONCURRENCY: '2',
    DATA_DIR: join(scratch, 'clustered'),
  };
  host = await startCluster(env, 180_000);
});

clustered.after(async () => {
  await host?.stop();
  await redisCluster?.stop();
  await dropClusteredDatabase();
});

clustered('every check holds', async () => {
  assertAllHold(await runVerify(host!.base, VERIFY_ARGS, join(scratch, 'report-clustered')));
});

clustered.run();
