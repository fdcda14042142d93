import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../../db/database.js';
import type { Metrics } from '../base/metrics.js';
import type { Config } from '../settings/config.js';
import type { RedisClient } from '../stores/redis-client.js';
import type { ThrottleWatch } from '../throttle/throttle-watch.js';
import { withTimeout } from '../stores/with-timeout.js';
import { logStoreFailure } from '../stores/store-errors.js';
import { LimitPolicy, type OverrideRecord } from './policy.js';
import { readPolicies } from './overrides.repository.js';

/**
 * How a web worker learns of plans given and overrides set (docs/throttling.md "Plans and overrides"): read from
 * PostgreSQL at start, then again whenever the epoch in Redis moves (the CLI moves it after each change; read every
 * POLL_MS), and once Redis answers again after it did not (a change made meanwhile may not have moved it). No other
 * reads: an idle service asks PostgreSQL nothing for them. A worker that cannot reach Redis or PostgreSQL keeps what
 * it last read; an override still ends at its time, which every request compares.
 */

/** How often a worker reads the epoch: a change applies on every host within this and one read of PostgreSQL. */
const POLL_MS = 250;
/** How long a read of the epoch may take before this poll gives up on it. */
const EPOCH_TIMEOUT_MS = 1_000;

/** The Redis key whose value changes with every change to plans given or overrides. */
export function limitsEpochKey(prefix: string): string {
  return `${prefix}limits:epoch`;
}

export interface PolicySource {
  policy: LimitPolicy;
  close(): void;
}

/** What the source reads with: the child's deps (src/deps.ts), named here so that limits/ stays below them. */
interface SourceDeps {
  config: Config;
  db: Kysely<Database>;
  redis: RedisClient;
  logger: Logger;
  metrics: Metrics;
  watch?: ThrottleWatch | undefined;
}

/** Starts the worker's policy: resolves once the first read is done or has failed (then served from settings alone). */
export async function startPolicySource(deps: SourceDeps): Promise<PolicySource> {
  const { config, db, redis, logger } = deps;
  const policy = new LimitPolicy({ rates: config.THROTTLE_PLANS, concurrency: config.THROTTLE_PLAN_CONCURRENCY });
  const key = limitsEpochKey(config.REDIS_PREFIX);
  let epoch: string | null | undefined;
  let everRead = false;
  /** The epoch could not be read since the last read of PostgreSQL: read it again once it can. */
  let unsure = false;
  let reading = false;
  let failing = false;
  let shown = '';
  const gauges = () => {
    const inForce = policy.inForce(Date.now());
    const text = inForce.map((o) => `${o.id} ${o.until.getTime()}`).join(',');
    if (text === shown) return;
    shown = text;
    deps.metrics.throttleOverrides.reset();
    for (const record of inForce)
      deps.metrics.throttleOverrides.set(labelsOf(deps, record), record.until.getTime() / 1000);
  };
  const read = async () => {
    const { userPlans, overrides } = await readPolicies(db, new Date());
    policy.replace(userPlans, overrides);
    gauges();
  };
  const tick = async () => {
    if (reading) return;
    reading = true;
    try {
      const now = await withTimeout(redis.get(key), EPOCH_TIMEOUT_MS, 'limits epoch read').catch(() => undefined);
      // Redis did not answer: keep what was read, and read again once it does.
      if (now === undefined && everRead) unsure = true;
      else if (!everRead || unsure || now !== epoch) {
        await read();
        everRead = true;
        epoch = now;
        unsure = now === undefined;
        if (failing) logger.info('limit policies read again');
        failing = false;
      }
      gauges();
    } catch (error) {
      if (!failing) logStoreFailure(logger, error, 'limit policies could not be read; keeping the last ones read');
      failing = true;
    } finally {
      reading = false;
    }
  };
  await tick();
  const timer = setInterval(() => void tick(), POLL_MS);
  timer.unref();
  const close = () => clearInterval(timer);
  policy.keptBy(close);
  return { policy, close };
}

function labelsOf({ watch }: Pick<SourceDeps, 'watch'>, record: OverrideRecord) {
  const ident = record.targetKind === 'user' ? `user:${record.userId}` : undefined;
  return {
    override: String(record.id),
    target: record.targetKind,
    client: (ident && watch?.pseudonym(ident)) ?? '',
    scopes: Object.keys(record.rates).sort().join(','),
  };
}
