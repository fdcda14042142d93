import { join } from 'node:path';
import { findFreePort } from '../../src/embedded/ports.js';
import { newRedisPassword, type RedisOptions } from '../../src/embedded/redis.js';

/**
 * Options for a throwaway redis-server of one test file (one it may stop, restart or slow down
 * without touching the shared one), as `npm start` runs it (a password and the service's ACL user):
 * `redis-<label>` under the test run's temporary folder, a free
 * port on 127.0.0.1, nothing written to disk, its log discarded.
 */
export async function privateRedisOptions(label: string): Promise<RedisOptions> {
  const tmp = process.env.TEST_TMP_DIR;
  if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
  return {
    dataDir: join(tmp, `redis-${label}`),
    port: await findFreePort(),
    persistent: false,
    password: newRedisPassword(),
    log: () => {},
  };
}
