import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findFreePort } from '../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../src/embedded/postgres.js';
import { provideServiceRole } from '../../src/embedded/postgres-role.js';
import { isAlive } from '../../src/cluster/processes.js';
import { newRedisPassword, startRedis } from '../../src/embedded/redis.js';
import type { RunningService } from '../../src/embedded/service.js';
import { createMigratedDatabase } from '../helpers/database.js';

export interface TestStores {
  /** The environment every file that uses the stores gets (see test/run.ts). */
  env: Record<string, string>;
  /** Restarts the shared Redis when a file killed it; a no-op otherwise. */
  reviveRedis(): Promise<void>;
  stop(): Promise<void>;
}

/** A scratch directory for the run, deleted by `remove()`. */
export async function makeScratch(): Promise<{ root: string; scratch: string; remove(): Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), 'paceline-test-'));
  // As root PostgreSQL runs as the postgres user, which must be able to enter this directory.
  await chmod(root, 0o755);
  const scratch = join(root, 'scratch');
  await mkdir(scratch, { mode: 0o755 });
  return { root, scratch, remove: () => rm(root, { recursive: true, force: true }) };
}

/** Starts the throwaway PostgreSQL and Redis under `root`; stops what started if either fails. */
export async function startStores(root: string, scratch: string): Promise<TestStores> {
  const began = Date.now();
  const redisOpts = {
    dataDir: join(root, 'redis'),
    port: await findFreePort(),
    persistent: false,
    password: newRedisPassword(),
  };
  const pgOpts = { dataDir: join(root, 'pg'), port: await findFreePort(), persistent: false };
  const [postgres, redis] = await Promise.allSettled([
    startEmbeddedPostgres({ ...pgOpts, database: 'postgres' }),
    startRedis(redisOpts),
  ]);
  if (postgres.status === 'rejected' || redis.status === 'rejected') {
    await Promise.allSettled([postgres, redis].map((s) => (s.status === 'fulfilled' ? s.value.stop() : undefined)));
    throw postgres.status === 'rejected' ? postgres.reason : (redis as PromiseRejectedResult).reason;
  }
  // The service role, as `npm start` sets it up: the files' databases belong to it (test/helpers/database.ts).
  const serviceUrl = await provideServiceRole(postgres.value.url, pgOpts.dataDir).catch(async (error) => {
    await Promise.allSettled([postgres.value.stop(), redis.value.stop()]);
    throw error;
  });
  // Every file's database is a copy of this one (test/helpers/database.ts), which is migrated once.
  const template = `paceline_template_${process.pid}`;
  await createMigratedDatabase(postgres.value.url, template, decodeURIComponent(new URL(serviceUrl).password)).catch(
    async (error) => {
      await Promise.allSettled([postgres.value.stop(), redis.value.stop()]);
      throw error;
    },
  );
  console.log(`# throwaway PostgreSQL and Redis ready in ${((Date.now() - began) / 1000).toFixed(1)} s`);

  let currentRedis: RunningService & { pid: number } = redis.value;
  let reviving: Promise<void> | undefined;
  const env: Record<string, string | undefined> = { ...process.env };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  return {
    env: {
      ...(env as Record<string, string>),
      TEST_DATABASE_URL: postgres.value.url,
      TEST_SERVICE_DATABASE_URL: serviceUrl,
      TEST_TEMPLATE_DATABASE: template,
      TEST_REDIS_URL: redis.value.url,
      TEST_REDIS_PORT: String(redisOpts.port),
      TEST_REDIS_DIR: redisOpts.dataDir,
      TEST_TMP_DIR: scratch,
    },
    // Two files ending together share one restart.
    reviveRedis() {
      if (isAlive(currentRedis.pid)) return reviving ?? Promise.resolve();
      reviving ??= (async () => {
        console.log(`# the shared Redis died during a file: restarting it on port ${redisOpts.port}`);
        currentRedis = await startRedis(redisOpts);
        reviving = undefined;
      })();
      return reviving;
    },
    async stop() {
      await Promise.allSettled([postgres.value.stop(), currentRedis.stop()]);
    },
  };
}
