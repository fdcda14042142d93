import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../db/connect.js';
import { createUser } from '../../src/auth/users.repository.js';
import { findFreePort } from '../../src/embedded/ports.js';
import { startCluster, type Launch } from './cluster.js';
import { startHaproxy } from './haproxy.js';
import { createTestDatabase } from './database.js';
import { startRedisCluster } from './redis-cluster.js';
import { testStoresEnv } from './test-stores-env.js';
import type { VerifyRun } from './verify.js';

// docs/verify.md: verify run against Paceline itself, where every check must hold. The user rate is short
// (60 per 3 s) so that the limits check sees several windows in seconds.

const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
export const scratch = join(tmp, `verify-paceline-${randomBytes(3).toString('hex')}`);
const CHECKS = ['limits', 'cursor', 'ryw', 'idempotency', 'feed'];
export const VERIFY_ARGS = [
  '--user',
  'walker:walker-pass-123',
  '--user',
  'pusher:pusher-pass-123',
  '--walk-seconds',
  '8',
];
export const VERIFY_SETTINGS = {
  THROTTLE_USER: '60/3s',
  THROTTLE_TIMEOUT_MS: '5000',
  DATABASE_POOL_SIZE: '4',
  ACCESS_LOG: 'off',
};

/** A test database with verify's two users. */
export async function databaseWithUsers(label: string) {
  const database = await createTestDatabase(label);
  const db = connectDatabase(database.url, 1);
  for (const name of ['walker', 'pusher']) {
    const made = await createUser(db, name, `${name}-pass-123`);
    if (!made.ok) throw new Error(`could not create ${name}`);
  }
  await db.destroy();
  return database;
}

export function assertAllHold(run: VerifyRun): void {
  assert.is(run.code, 0, run.output);
  assert.equal(
    run.report.checks.map((c) => [c.name, c.verdict]),
    CHECKS.map((name) => [name, 'holds']),
    run.output,
  );
}

/** A Paceline deployment verify runs against: where to send, and how to stop it (its database dropped). */
export interface VerifyDeployment {
  base: string;
  stop(): Promise<void>;
}

/**
 * Two Paceline hosts (one web worker each) behind HAProxy, on the test stores' PostgreSQL and Redis, with verify's
 * users and settings (`extra` over them). Shared by test/cluster/verify/balanced.test.ts and `npm run bench:verify`.
 */
export async function startBalanced(extra: Record<string, string> = {}, launch?: Launch): Promise<VerifyDeployment> {
  await mkdir(scratch, { recursive: true });
  const database = await databaseWithUsers('verify-balanced');
  const shared = {
    ...testStoresEnv('verify-balanced', database.url),
    ...VERIFY_SETTINGS,
    WEB_CONCURRENCY: '1',
    ...extra,
  };
  const started = await Promise.allSettled(
    ['h1', 'h2'].map(async (name) =>
      startCluster({ ...shared, PORT: String(await findFreePort()), DATA_DIR: join(scratch, name) }, 180_000, launch),
    ),
  );
  const hosts = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const stopHosts = async () => {
    await Promise.allSettled(hosts.map((host) => host.stop()));
    await database.drop();
  };
  // A start that fails leaves nothing behind, as startOnRedisCluster's does.
  const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) {
    await stopHosts();
    throw failed.reason;
  }
  const balancer = await startHaproxy(
    scratch,
    hosts.map((host, i) => ({ name: `host${i + 1}`, address: `127.0.0.1:${host.port}` })),
  ).catch(async (error: unknown) => {
    await stopHosts();
    throw error;
  });
  const stop = async () => {
    await balancer.stop();
    await stopHosts();
  };
  return { base: balancer.base, stop };
}

/**
 * One Paceline host (two web workers) on a Redis Cluster of three masters, on the test stores' PostgreSQL, with
 * verify's users and settings (`extra` over them). Shared by test/cluster/verify/redis-cluster.test.ts and
 * `npm run bench:verify`.
 */
export async function startOnRedisCluster(
  extra: Record<string, string> = {},
  launch?: Launch,
): Promise<VerifyDeployment> {
  const [cluster, database] = await Promise.all([
    startRedisCluster(join(scratch, 'redis-cluster'), { masters: 3 }),
    databaseWithUsers('verify-clustered'),
  ]);
  const env = {
    ...testStoresEnv('verify-clustered', database.url),
    ...VERIFY_SETTINGS,
    REDIS_URL: '',
    REDIS_CLUSTER_NODES: cluster.seeds,
    WEB_CONCURRENCY: '2',
    DATA_DIR: join(scratch, 'clustered'),
    ...extra,
  };
  const host = await startCluster(env, 180_000, launch).catch(async (error: unknown) => {
    await Promise.allSettled([cluster.stop(), database.drop()]);
    throw error;
  });
  const stop = async () => {
    await host.stop();
    await cluster.stop();
    await database.drop();
  };
  return { base: host.base, stop };
}
