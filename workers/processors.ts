import type { Deps } from '../src/deps.js';
import { primeRetentionSeries } from '../src/base/metrics.js';
import { JOB_STATES, REPORTS_QUEUE } from '../src/reports/report-queue.js';
import { unfinishedReportIds } from '../src/reports/reports.repository.js';
import { runPeriodically } from './periodic.js';
import { ReadModelFollower } from './read-model.follower.js';
import { startReportsWorker } from './reports.worker.js';
import { sweepRetention } from './retention.js';

/**
 * What a job child runs: the reports worker (BullMQ), the read model follower, a sweeper that
 * enqueues reports recorded while Redis was unreachable (the job id is the report id, so a report
 * already queued is not queued twice), the retention sweep (expired tokens and idempotency
 * records, `paceline_retention_swept_total{table}`), and the `paceline_jobs{queue,state}` gauge.
 * `close()` waits for the active job and the batch in progress.
 */
export async function startProcessors(deps: Deps): Promise<{ close(): Promise<void> }> {
  const { config, db, logger, metrics } = deps;
  const queue = deps.reportQueue;
  let closing = false;
  primeRetentionSeries(metrics);
  const running: Array<{ close(): Promise<void> }> = [
    startReportsWorker(deps),
    new ReadModelFollower(deps).start(),
    runPeriodically(
      'retention sweep',
      config.RETENTION_SWEEP_INTERVAL_MS,
      async () => void (await sweepRetention(deps, () => closing)),
      logger,
    ),
  ];
  if (queue) {
    running.push(
      runPeriodically(
        'report sweeper',
        config.REPORT_SWEEP_INTERVAL_MS,
        async () => {
          const ids = await unfinishedReportIds(
            db,
            new Date(deps.clock.now().getTime() - config.REPORT_SWEEP_INTERVAL_MS),
          );
          for (const id of ids) await queue.enqueue(id);
        },
        logger,
      ),
      runPeriodically(
        'job metrics',
        config.JOB_METRICS_INTERVAL_MS,
        async () => {
          const counts = await queue.counts();
          for (const state of JOB_STATES) metrics.jobs.set({ queue: REPORTS_QUEUE, state }, counts[state]);
        },
        logger,
      ),
    );
  }
  logger.info({ processors: running.length }, 'job processors started');
  return {
    close: async () => {
      closing = true;
      await Promise.all(running.map((p) => p.close()));
    },
  };
}
