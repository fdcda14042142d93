import { childDrainBudgetMs, type Config } from '../src/config.js';
import { reportMetricsToPrimary } from '../src/cluster/metrics-reporter.js';
import { buildDeps } from '../src/deps.js';
import { startProcessors } from './processors.js';

/**
 * A job child: runs the BullMQ processors. On SIGTERM/SIGINT it lets active jobs finish (BullMQ's
 * graceful close), reports its final metrics, closes its connections and exits 0.
 */
export async function runJobsChild(config: Config): Promise<void> {
  const { deps, close } = await buildDeps(config, 'jobs');
  const reporter = reportMetricsToPrimary(deps.metrics.registry);
  const processors = await startProcessors(deps);
  process.send?.({ type: 'ready' });

  let stopping: Promise<void> | undefined;
  const stop = () =>
    void (stopping ??= (async () => {
      deps.logger.info('jobs child draining');
      // A drain that cannot finish (Redis gone) ends in time anyway: interrupted jobs are retried.
      const giveUp = setTimeout(() => {
        deps.logger.warn('jobs child could not drain in time; exiting');
        process.exit(0);
      }, Math.max(0, childDrainBudgetMs(config) - 250));
      giveUp.unref();
      await processors.close();
      await reporter.sendFinal();
      await close();
      process.exit(0);
    })());
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
}
