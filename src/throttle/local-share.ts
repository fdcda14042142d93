import type { Logger } from 'pino';
import type { Metrics } from '../base/metrics.js';
import { LocalLogs } from './local-logs.js';
import type { Check, Decision } from './throttler.js';
import type { WorkerCensus } from './worker-census.js';

/** What a LocalShare works with: the process's census, and logs of its own unless given. */
export interface LocalShareParts {
  census: Pick<WorkerCensus, 'workers' | 'isCounted'>;
  logs?: LocalLogs;
  logger: Pick<Logger, 'warn'>;
  metrics: Pick<Metrics, 'throttleDegraded'>;
  /** This process's clock in ms (default `performance.now()`). */
  now?: () => number;
}

/**
 * THROTTLE_FAILURE_MODE=local in one web worker (docs/throttling.md "When Redis is unreachable"):
 * a check Redis did not answer is decided here by this worker's share of its limit (the limit
 * divided by the workers alive across the deployment, as `census` last counted them), and the
 * first such decision enters the degraded mode: `paceline_throttle_degraded` 1 and one log line.
 * The first answer from Redis leaves it: the local logs are dropped (Redis never saw those
 * admissions: a call answered too late records nothing, see batcher.ts), the gauge goes back to 0,
 * and one line says so.
 */
export class LocalShare {
  #degradedSince: number | undefined;
  #decided = 0;
  readonly #logs: LocalLogs;
  readonly #now: () => number;

  constructor(private readonly parts: LocalShareParts) {
    this.#logs = parts.logs ?? new LocalLogs();
    this.#now = parts.now ?? (() => performance.now());
    parts.metrics.throttleDegraded.set(0);
  }

  /** Whether this worker decides alone now. */
  get isDegraded(): boolean {
    return this.#degradedSince !== undefined;
  }

  /** Decides one request Redis did not answer, as `LocalLogs.consume` does, by this worker's share. */
  consume(checks: ReadonlyArray<Check>): Decision[] {
    const now = this.#now();
    if (this.#degradedSince === undefined) this.#enter(now);
    this.#decided += 1;
    return this.#logs.consume(checks, this.parts.census.workers, now);
  }

  /** Redis answered a check: limits are exact again. */
  answered(): void {
    if (this.#degradedSince === undefined) return;
    const { logger, metrics } = this.parts;
    const degradedS = Math.round((this.#now() - this.#degradedSince) / 1000);
    this.#degradedSince = undefined;
    this.#logs.clear();
    metrics.throttleDegraded.set(0);
    logger.warn(
      { localDecisions: this.#decided, degradedS },
      'throttle store answers again: rate limits are exact again, the local shares are dropped',
    );
  }

  #enter(now: number): void {
    const { census, logger, metrics } = this.parts;
    this.#degradedSince = now;
    this.#decided = 0;
    metrics.throttleDegraded.set(1);
    logger.warn(
      { workers: census.workers, counted: census.isCounted },
      'throttle store unreachable: this worker enforces its share of every rate limit (THROTTLE_FAILURE_MODE=local)',
    );
  }
}
