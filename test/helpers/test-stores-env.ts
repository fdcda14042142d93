import { randomBytes } from 'node:crypto';

/**
 * The settings that point a cluster at the test stores: `databaseUrl`, the runner's Redis with a
 * fresh key prefix for `label`, and a fixed cursor secret.
 */
export function testStoresEnv(label: string, databaseUrl: string): Record<string, string> {
  const redisUrl = process.env.TEST_REDIS_URL;
  if (!redisUrl) throw new Error('TEST_REDIS_URL is not set: run tests with `npm test`');
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_PREFIX: `test:${label}:${randomBytes(4).toString('hex')}:`,
    CURSOR_SECRET: `${label}-test-secret-0123456789`,
  };
}
