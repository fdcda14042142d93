import { Worker, type Job } from 'bullmq';
import type { Deps } from '../src/deps.js';
import { childDrainBudgetMs } from '../src/settings/config.js';
import { aggregateReport } from '../src/reports/aggregate.js';
import { bullPrefix, REPORTS_QUEUE } from '../src/reports/report-queue.js';
import { closeRedisClient, createRedisClient } from '../src/stores/redis-client.js';
import { logStoreFailure } from '../src/stores/store-errors.js';
import { completeReport, recordReportFailure, startReport } from '../src/reports/reports.repository.js';

interface ReportJob {
  reportId: string;
}

/**
 * The reports processor: one job at a time per child (an aggregation is heavy; run more
 * children to run more at once). A job whose worker dies mid-run loses its lock and is moved back
 * to waiting by the stalled check, then runs again from the start; the result is written once,
 * so a retried report still ends `done` with one result. A failed attempt is retried with
 * back-off; after the last one the report is `failed` with the error and the job stays in the
 * failed set for inspection.
 */
export function startReportsWorker(deps: Deps): { close(): Promise<void> } {
  const { config, db, logger } = deps;
  // BullMQ opens its blocking connection as a duplicate of this one and closes only that.
  const connection = createRedisClient(config, 'jobs');
  const worker = new Worker<ReportJob>(REPORTS_QUEUE, (job, _token, signal) => runReport(deps, job, signal), {
    connection,
    prefix: bullPrefix(config),
    concurrency: 1,
    lockDuration: config.JOB_LOCK_DURATION_MS,
    stalledInterval: config.JOB_STALLED_INTERVAL_MS,
    maxStalledCount: 1,
  });
  // Repeats on every reconnection attempt during an outage, which the primary reports once.
  worker.on('error', (error) => logStoreFailure(logger, error, 'reports worker: Redis error'));
  worker.on('failed', (job, error) => {
    if (!job) return;
    // A job failed by the stalled check (its worker died too often) fails with UnrecoverableError
    // without reaching the processor, whatever its attempts: that is final too.
    const final = error.name === 'UnrecoverableError' || job.attemptsMade >= (job.opts.attempts ?? 1);
    logger.warn({ err: error, reportId: job.data.reportId, attempt: job.attemptsMade, final }, 'report attempt failed');
    // Also covers a job failed by the stalled check, which never reaches the processor's catch.
    if (final) void recordReportFailure(db, job.data.reportId, error.message, true).catch(() => {});
  });
  worker.on('stalled', (jobId) =>
    logger.warn({ reportId: jobId }, 'report job stalled (its worker died); it will run again'),
  );
  return {
    // Graceful: the active report may finish; one still running shortly before the shutdown
    // deadline is interrupted (an attempt, retried later) rather than killed with its child.
    async close() {
      const deadline = setTimeout(
        () => worker.cancelAllJobs('the jobs child is shutting down'),
        Math.max(0, childDrainBudgetMs(config) - 2_000),
      );
      try {
        // With Redis down there is nothing to hand back: waiting would only wait for the deadline.
        await worker.close(connection.status !== 'ready');
      } finally {
        clearTimeout(deadline);
        await closeRedisClient(connection);
      }
    },
  };
}

async function runReport(deps: Deps, job: Job<ReportJob>, signal?: AbortSignal): Promise<{ status: string }> {
  const { config, db, logger } = deps;
  const { reportId } = job.data;
  const params = await startReport(db, reportId);
  if (!params) return { status: 'already finished' };
  const began = Date.now();
  try {
    const result = await aggregateReport(db, params, {
      batchSize: config.REPORT_BATCH_SIZE,
      pauseMs: config.REPORT_BATCH_DELAY_MS,
      onBatch: (position, upTo) => {
        if (signal?.aborted) throw new Error(`report interrupted: ${String(signal.reason ?? 'cancelled')}`);
        return job.updateProgress(upTo === 0 ? 100 : Math.floor((position / upTo) * 100));
      },
    });
    await completeReport(db, reportId, result);
    logger.info({ reportId, ms: Date.now() - began, events: result.as_of_position }, 'report done');
    return { status: 'done' };
  } catch (error) {
    const final = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    await recordReportFailure(db, reportId, error instanceof Error ? error.message : String(error), final);
    throw error;
  }
}
