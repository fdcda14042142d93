import type { Cluster, Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.js';
import type { Config } from '../settings/config.js';
import { Errors } from '../base/errors.js';
import { republishHead, type BeforeCommit } from '../events/store/append-batch.js';
import { logStoreFailure } from '../stores/store-errors.js';
import { createHeadChannel } from './head.js';
import { ReadCache } from './read-cache.js';

export { ReadCache } from './read-cache.js';

/** How often at most a process puts a lost head back (each time under the append lock). */
const REPUBLISH_INTERVAL_MS = 1_000;

/**
 * The read cache of one process, with its head channel on `redis`. When the head key is found
 * lost (a flushed or new Redis), the process puts it back from PostgreSQL under the append lock;
 * until then every read goes to PostgreSQL.
 */
export function createReadCache(
  db: Kysely<Database>,
  redis: Redis | Cluster,
  config: Config,
  logger: Logger,
): ReadCache {
  const putHeadBack = () => republishHead(db, (head) => channel.publish(head));
  let republishing: Promise<void> | undefined;
  let lastRepublish = 0;
  const republish = () => {
    if (republishing || Date.now() - lastRepublish < REPUBLISH_INTERVAL_MS) return;
    lastRepublish = Date.now();
    republishing = putHeadBack()
      .then(() => logger.info('read cache: head republished after it was found lost'))
      .catch((error: unknown) =>
        logStoreFailure(logger, error, 'read cache: could not republish the head; reads go to PostgreSQL'),
      )
      .finally(() => (republishing = undefined));
  };
  const keys = readCacheKeys(config.REDIS_PREFIX);
  // After every (re)connection the head is put back from PostgreSQL and the token epoch renewed
  // before this process trusts either: a Redis restored from an older snapshot holds older ones.
  const onReturn = async () => {
    await putHeadBack();
    await channel.rotateTokenEpoch();
  };
  const channel = createHeadChannel(redis, keys, config.THROTTLE_TIMEOUT_MS, republish, onReturn);
  return new ReadCache(channel, config.READ_CACHE_BYTES);
}

/**
 * The head and token-epoch keys under `prefix`. One hash tag: both live in one slot of a Redis
 * Cluster, so one MGET reads them. The CLI sets the epoch too, when it revokes tokens.
 */
export function readCacheKeys(prefix: string): { head: string; tokens: string } {
  return { head: `${prefix}{read}:head`, tokens: `${prefix}{read}:tokens` };
}

/**
 * Publishes a batch's head before it commits. A batch whose head Redis does not confirm is rolled
 * back and answered 503: acknowledged, it could be missing from answers other processes still
 * hold as current.
 */
export function publishBeforeCommit(cache: ReadCache): BeforeCommit {
  return async (head) => {
    try {
      await cache.channel.publish(head);
    } catch {
      throw Errors.unavailable(
        'The change could not be published to the other servers (Redis unreachable), so it was not made. Try again ' +
          'shortly.',
        1,
      );
    }
  };
}
