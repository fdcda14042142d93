import type { Worker } from 'node:cluster';
import { createServer } from 'node:http';
import type { Logger } from 'pino';
import { AggregatorRegistry, Counter, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Config } from '../config.js';
import { METRICS_REPLY, METRICS_REQUEST } from './metrics-reporter.js';
import type { ChildRole } from './supervisor.js';

type Snapshot = Array<MetricObjectWithValues<MetricValue<string>>>;

const ASK_TIMEOUT_MS = 2_000;
const REFRESH_MS = 5_000;

/**
 * The host's `/metrics` on METRICS_PORT: the sum over every child, asked over IPC at scrape time.
 * Counters and histograms of children that have exited are kept (from their last report, which
 * a draining child sends on its way out), so a restart neither loses nor doubles counts.
 */
export async function startMetricsHub(config: Config, logger: Logger) {
  const own = new Registry();
  const restarts = new Counter({
    name: 'paceline_worker_restarts_total',
    help: 'Children that exited unexpectedly and were restarted by the primary, by role.',
    labelNames: ['role'] as const,
    registers: [own],
  });
  let workers: () => Worker[] = () => [];
  const latest = new Map<number, Snapshot>();
  let retired: Snapshot = [];
  let retiring: Promise<void> = Promise.resolve();
  let seq = 0;

  const listen = (worker: Worker) => {
    if ((worker as Worker & { metricsHooked?: boolean }).metricsHooked) return;
    (worker as Worker & { metricsHooked?: boolean }).metricsHooked = true;
    worker.on('message', (m: { type?: string; metrics?: Snapshot }) => {
      if (m?.type === METRICS_REPLY && m.metrics) latest.set(worker.id, m.metrics);
    });
  };
  const ask = (worker: Worker) =>
    new Promise<void>((resolve) => {
      listen(worker);
      const id = ++seq;
      const timer = setTimeout(resolve, ASK_TIMEOUT_MS);
      const onReply = (m: { type?: string; id?: number }) => {
        if (m?.type !== METRICS_REPLY || m.id !== id) return;
        clearTimeout(timer);
        worker.off('message', onReply);
        resolve();
      };
      worker.on('message', onReply);
      try {
        worker.send({ type: METRICS_REQUEST, id });
      } catch {
        clearTimeout(timer);
        resolve();
      }
    });
  const refresh = () => Promise.all(workers().filter((w) => w.isConnected()).map(ask));
  const collect = async () => {
    await Promise.all([refresh(), retiring]);
    const live = workers().map((w) => latest.get(w.id)).filter((s): s is Snapshot => s !== undefined);
    const registry = AggregatorRegistry.aggregate([...live, retired, (await own.getMetricsAsJSON()) as Snapshot]);
    return { text: await registry.metrics(), contentType: registry.contentType };
  };

  const timer = setInterval(() => void refresh(), REFRESH_MS);
  timer.unref();
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not found: metrics are at /metrics\n');
      return;
    }
    collect().then(
      ({ text, contentType }) => res.writeHead(200, { 'Content-Type': contentType }).end(text),
      (error) => {
        logger.error({ err: error }, 'metrics collection failed');
        res.writeHead(500, { 'Content-Type': 'text/plain' }).end('metrics collection failed\n');
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(config.METRICS_PORT, config.METRICS_HOST, resolve));

  return {
    attach(list: () => Worker[]) {
      workers = list;
    },
    countRestart(role: ChildRole) {
      restarts.inc({ role });
    },
    /** Folds an exited child's last counters and histograms into the retired totals. */
    retire(worker: Worker) {
      const last = latest.get(worker.id);
      latest.delete(worker.id);
      if (!last) return;
      const cumulative = last.filter((m) => ['counter', 'histogram'].includes(String(m.type)));
      retiring = retiring.then(async () => {
        retired = (await AggregatorRegistry.aggregate([retired, cumulative]).getMetricsAsJSON()) as Snapshot;
      });
    },
    close(): Promise<void> {
      clearInterval(timer);
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
