import type { Deps } from '../deps.js';
import { Errors } from '../base/errors.js';
import { firstLineOf } from '../stores/store-errors.js';
import type { Check, Decision } from '../throttle/index.js';
import type { LocalShare } from '../throttle/local-share.js';

/** Seconds a client is told to wait when the throttle store is down and the mode is `closed`. */
export const STORE_DOWN_RETRY_S = 5;

/**
 * What THROTTLE_FAILURE_MODE makes of a check Redis did not answer (docs/throttling.md "When Redis
 * is unreachable"): `local`, this worker's decisions by its share of the limit; `open`, undefined
 * (admitted uncounted); `closed`, a 503. A scope wholly in shadow never refuses: admitted uncounted.
 * @throws AppError 503 in `closed` mode.
 */
export function withoutRedis(
  config: Deps['config'],
  localShare: LocalShare | undefined,
  check: Check,
): Decision[] | undefined {
  if (check.rule.inShadow) return undefined;
  if (localShare) return localShare.consume([check]);
  if (config.THROTTLE_FAILURE_MODE !== 'closed') return undefined;
  throw Errors.unavailable('Rate limiting is temporarily unavailable; try again shortly.', STORE_DOWN_RETRY_S);
}

export type BurstLogger = ReturnType<typeof createBurstLogger>;

/** Logs the first store error of a burst (with `message`) and the recovery, not every failed request. */
export function createBurstLogger({ logger }: Pick<Deps, 'logger'>, message: string) {
  let failing = 0;
  return {
    report(error: unknown) {
      // One line per burst, with the cause and no stack (docs/operations.md "When a store is down").
      if (failing++ === 0) logger.error({ cause: firstLineOf(error) }, message);
    },
    recovered() {
      if (failing > 0) logger.warn({ failedChecks: failing }, 'throttle store recovered');
      failing = 0;
    },
  };
}
