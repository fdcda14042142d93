import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { runningInstance } from '../cluster/instance-file.js';
import { usesEmbeddedRedis, type Config } from '../settings/config.js';
import { readCacheKeys } from '../read-cache/create-read-cache.js';
import { newEpoch } from '../read-cache/head.js';
import { createRedisClient } from '../stores/redis-client.js';
import { embeddedRedisUrl, REDIS_PASSWORD_FILE } from '../stores/redis-service-user.js';

/** How long the CLI waits for Redis to take the new epoch before it says the servers were not told. */
const TELL_TIMEOUT_MS = 5_000;

/**
 * Tells every web worker on every host that tokens were revoked: gives the token epoch in the
 * service's Redis a new value, so a token any of them remembers is looked up again before its
 * next request is served (docs/architecture.md "Read cache"). With the embedded Redis and no
 * service running on DATA_DIR, no server remembers a token and nothing is sent.
 * @returns what was done, as a line for the operator.
 * @throws Error (one line) when Redis did not take the new epoch within 5 s.
 */
export async function tellServersTokensRevoked(config: Config): Promise<string> {
  try {
    const told = await setInServiceRedis(config, readCacheKeys(config.REDIS_PREFIX).tokens, newEpoch());
    return told
      ? 'every server looks its remembered tokens up again'
      : 'no service runs on DATA_DIR, so no server remembers a token';
  } catch (error) {
    throw new Error(
      `the change is made in the database, but Redis did not take the new token epoch (${(error as Error).message}): ` +
        'a server that remembers one of these tokens may accept it for up to 60 s more; run the command again ' +
        'once Redis answers',
    );
  }
}

/**
 * Sets `key` to `value` in the service's Redis, within 5 s: REDIS_URL or REDIS_CLUSTER_NODES, or the embedded
 * Redis of the service running on DATA_DIR. False when it is the embedded one and no service runs.
 * @throws Error when Redis did not take it in time.
 */
export async function setInServiceRedis(config: Config, key: string, value: string): Promise<boolean> {
  let settings: Config = config;
  if (usesEmbeddedRedis(config)) {
    const port = runningInstance(config)?.ports.EMBEDDED_REDIS_PORT;
    if (port === undefined) return false;
    const password = (await readFile(join(resolve(config.DATA_DIR), REDIS_PASSWORD_FILE), 'utf8')).trim();
    settings = { ...config, REDIS_URL: embeddedRedisUrl(port, password) };
  }
  const redis = createRedisClient(settings, 'jobs');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no answer')), TELL_TIMEOUT_MS);
  });
  try {
    await Promise.race([redis.set(key, value), late]);
    return true;
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}
