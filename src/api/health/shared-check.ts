import type { Clock } from '../../base/clock.js';

/**
 * Shares one run of `check` among every caller within `maxAgeMs` of its start: callers while it
 * runs wait for it, callers after it ends get its answer until it is `maxAgeMs` old, and the
 * first caller after that starts the next run. However many probes arrive, `check` runs at most
 * once per `maxAgeMs` in this process, and an answer is never older than `maxAgeMs` plus the run
 * that replaces it (docs/operations.md "Health checks"). `maxAgeMs` 0 runs it for every caller.
 */
export function shareCheck<T>(check: () => Promise<T>, maxAgeMs: number, clock: Clock): () => Promise<T> {
  let latest: { startedAt: number; answer: Promise<T> } | undefined;
  return () => {
    const now = clock.now().getTime();
    if (latest === undefined || now - latest.startedAt >= maxAgeMs) {
      latest = { startedAt: now, answer: check() };
    }
    return latest.answer;
  };
}
