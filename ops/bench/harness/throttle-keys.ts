import type { Redis } from 'ioredis';
import { buildScopes, createThrottler, throttleKey } from '../../../src/throttle/index.js';

/**
 * MEMORY USAGE (bytes) of the service's throttle key for `ident` in the anon scope at `rate`, read after each count of
 * admissions in `after` (ascending), the key written by the service's throttler under the prefix `mem:`.
 */
export async function throttleKeyBytes(admin: Redis, rate: string, ident: string, after: number[]) {
  const check = { rule: buildScopes({ anon: rate }).get('anon')!, ident };
  const throttler = createThrottler({ redis: admin, keyPrefix: 'mem:' });
  const bytes: (number | null)[] = [];
  for (let admitted = 1; admitted <= after.at(-1)!; admitted += 1) {
    await throttler.consume([check]);
    if (after.includes(admitted)) bytes.push(await admin.memory('USAGE', throttleKey('mem:', check), 'SAMPLES', 0));
  }
  return bytes;
}
