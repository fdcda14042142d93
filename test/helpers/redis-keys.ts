import type { Redis } from 'ioredis';

/**
 * The keys matching `pattern`, by SCAN: the service's Redis user may not run KEYS (docs/security.md "Least
 * privilege"), and the tests use the same user. Bounded: at most 10,000 SCAN calls.
 */
export async function keysMatching(redis: Redis, pattern: string): Promise<string[]> {
  const found = new Set<string>();
  let cursor = '0';
  for (let calls = 0; calls < 10_000; calls++) {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    for (const key of keys) found.add(key);
    cursor = next;
    if (cursor === '0') return [...found];
  }
  throw new Error(`SCAN of ${pattern} did not finish in 10,000 calls`);
}
