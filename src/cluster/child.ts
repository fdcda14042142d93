import { childDrainBudgetMs, type Config } from '../settings/config.js';
import { buildDeps, type Deps } from '../deps.js';
import { reportMetricsToPrimary } from './metrics-reporter.js';
import { HANDOFFS_PENDING, HANDOFFS_SETTLED, LEAVING } from './supervisor.js';

/** What a child runs on its deps; `close()` drains it. */
interface Started {
  close(): Promise<void>;
}

interface Role {
  load(): Promise<(deps: Deps) => Promise<Started>>;
  /** Logged when the drain begins. */
  draining: string;
  /**
   * Whether the final metrics wait for the deps to close. A web child's closing deps flush the
   * commands still queued (from a request cut off at the end of the drain), whose appends count.
   */
  reportAfterClosing: boolean;
}

const ROLES = new Map<string, Role>([
  [
    'web',
    {
      load: async () => {
        const [{ serve }, { createApiListener }] = await Promise.all([
          import('../server/server.js'),
          import('../listener/listener.js'),
        ]);
        return (deps) => serve(deps, createApiListener(deps));
      },
      draining: 'draining',
      reportAfterClosing: true,
    },
  ],
  [
    'jobs',
    {
      load: async () => (await import('../../workers/jobs.js')).startJobs,
      draining: 'jobs child draining',
      reportAfterClosing: false,
    },
  ],
]);

/**
 * Runs the child a primary forked, by the role it was given: builds its deps, answers the
 * primary's requests for metrics, starts the role's work and says it is ready. On SIGTERM/SIGINT
 * (or when the primary is gone) it drains that work, sends its final metrics, closes its deps
 * and exits 0, within the child's drain budget: a drain that cannot finish ends in time anyway.
 */
export async function runChild(config: Config, role: string | undefined): Promise<void> {
  const chosen = role === undefined ? undefined : ROLES.get(role);
  if (role === undefined || !chosen) throw new Error(`unknown child role ${JSON.stringify(role)}`);
  const start = await chosen.load();
  const { deps, close } = await buildDeps(config, role);
  const reporter = reportMetricsToPrimary(deps.metrics.registry, deps.watch && (() => deps.watch?.report() ?? []));
  const started = await start(deps);
  process.send?.({ type: 'ready' });
  // The host is stopping after DRAIN_DELAY_MS: readiness says so while requests are still served.
  process.on('message', (message: { type?: string }) => {
    if (message?.type === LEAVING) deps.leaving = true;
  });

  const drain = async () => {
    deps.logger.info(chosen.draining);
    // A drain that cannot finish (Redis gone) ends in time anyway: interrupted jobs are retried.
    const giveUp = setTimeout(
      () => {
        deps.logger.warn(`${role} child could not drain in time; exiting`);
        process.exit(0);
      },
      Math.max(0, childDrainBudgetMs(config) - 250),
    );
    giveUp.unref();
    await started.close();
    await settleHandoffs(1_000);
    if (chosen.reportAfterClosing) {
      await close();
      await reporter.sendFinal();
    } else {
      await reporter.sendFinal();
      await close();
    }
    process.exit(0);
  };
  let stopping: Promise<void> | undefined;
  const stop = () => void (stopping ??= drain());
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
}

/**
 * Waits until no connection the primary accepted can still be on its way to this child. The
 * primary hands each connection over IPC; one sent before it learnt that this child stopped
 * listening is handed back by Node only if this child still reads its channel, and one left
 * unread when it exits stays open in the primary, unanswered, for good. The close notice went out
 * first, so the primary's answer to this later question comes after every such connection
 * (docs/architecture.md "Processes"). Bounded by `timeoutMs`; nothing to wait for without a primary.
 */
function settleHandoffs(timeoutMs: number): Promise<void> {
  if (!process.connected) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      process.off('message', onMessage);
      process.off('disconnect', done);
      resolve();
    };
    const onMessage = (message: { type?: string }) => message?.type === HANDOFFS_SETTLED && done();
    const timer = setTimeout(done, timeoutMs);
    process.on('message', onMessage);
    process.once('disconnect', done);
    process.send!({ type: HANDOFFS_PENDING }, (error: Error | null) => error && done());
  });
}
