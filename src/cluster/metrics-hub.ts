import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Config } from '../settings/config.js';
import type { Server } from 'node:http';
import { createMetricsServer, type MetricsLimits } from './metrics-server.js';
import { METRICS_REPLY, METRICS_REQUEST, type MetricsReply } from './metrics-protocol.js';
import type { ChildRole } from './supervisor.js';
import type { WatchedScope } from '../throttle/throttle-watch.js';
import { mergeWatched, type HostTop } from './top-clients-merge.js';
import { createPrimaryMetrics, type PrimaryMetrics } from './primary-metrics.js';

type Snapshot = Array<MetricObjectWithValues<MetricValue<string>>>;
type Exposition = { text: string; contentType: string };

const ASK_TIMEOUT_MS = 2_000;
const REFRESH_MS = 5_000;
const EXIT_REPORT_WAIT_MS = 2_000; // how long an exited child's last report may sit in its channel
const COMPACT_AFTER = 8; // retired snapshots are merged into one once there are this many
const CUMULATIVE = new Set(['counter', 'histogram']);
/**
 * The event-loop lag gauges prom-client averages over a cluster's processes: the host reports its worst child's
 * instead, since an average hides one stuck worker behind idle ones (docs/operations.md "Metrics").
 */
const WORST_CHILD = new Set([
  'nodejs_eventloop_lag_seconds',
  'nodejs_eventloop_lag_mean_seconds',
  'nodejs_eventloop_lag_stddev_seconds',
  'nodejs_eventloop_lag_p50_seconds',
  'nodejs_eventloop_lag_p90_seconds',
  'nodejs_eventloop_lag_p99_seconds',
]);

/**
 * The host's `/metrics`: the sum over every child, each asked over IPC at scrape time (and every
 * 5 s, so a child killed without warning loses at most that much). Counters and histograms of a
 * child that exited stay in the sum from its last report (a draining child sends one on its way
 * out), so the host's counters never go down and a restart neither loses nor doubles counts.
 * Concurrent scrapes share collections: see {@link MetricsHub.collect}.
 */
export class MetricsHub {
  /** The primary's own metrics, added to the children's sum. */
  readonly #own: PrimaryMetrics;
  /** The last report of who every live web child refused. */
  readonly #throttled = new Map<number, WatchedScope[]>();
  /** The collection under way, and the one every scrape that arrived meanwhile waits for. */
  #current: Promise<Exposition> | undefined;
  #next: Promise<Exposition> | undefined;
  /** The last report of every child whose counts are not yet in #retired, live or exiting. */
  readonly #latest = new Map<number, Snapshot>();
  /** Counters and histograms of children that exited; entries are only appended or merged. */
  readonly #retired: Snapshot[] = [];
  readonly #gone = new Set<number>();
  readonly #pending = new Map<number, () => void>();
  #workers: () => Worker[] = () => [];
  #asked = 0;
  #compacting = false;

  constructor(
    private readonly logger: Logger,
    private readonly topK = 10,
    topWindowMs = 300_000,
  ) {
    this.#own = createPrimaryMetrics(topWindowMs);
    cluster.on('message', (worker: Worker, message: MetricsReply) => this.#receive(worker, message));
  }

  /** Tells the hub where to find the live children. */
  attach(list: () => Worker[]): void {
    this.#workers = list;
  }

  /** Counts a child the supervisor restarted after an unexpected exit. */
  countRestart(role: ChildRole): void {
    this.#own.restarts.inc({ role });
  }

  /** Counts a settings reload, applied or refused. */
  countReload(outcome: 'applied' | 'refused'): void {
    this.#own.reloads.inc({ outcome });
  }

  /** The host's heaviest refused clients per scope, real identities included, as of the last report of each child. */
  topClients(): HostTop[] {
    return mergeWatched([...this.#throttled.values()], this.topK);
  }

  /** Moves an exited child's counters and histograms into the retired totals, once its channel has drained. */
  retire(worker: Worker): void {
    const fold = () => {
      clearTimeout(timer);
      if (this.#gone.has(worker.id)) return;
      this.#gone.add(worker.id);
      const last = this.#latest.get(worker.id);
      this.#latest.delete(worker.id);
      // Who a child refused is a gauge: it leaves with the child (its clients are refused elsewhere now).
      this.#throttled.delete(worker.id);
      if (last) this.#retired.push(last.filter((metric) => CUMULATIVE.has(String(metric.type))));
    };
    const timer = setTimeout(fold, EXIT_REPORT_WAIT_MS).unref();
    worker.once('disconnect', fold);
    if (!worker.isConnected()) fold();
  }

  /** Asks every connected child for its metrics; settles when all answered or timed out. */
  async refresh(): Promise<void> {
    await Promise.all(
      this.#workers()
        .filter((w) => w.isConnected())
        .map((w) => this.#ask(w)),
    );
  }

  /**
   * The host's metrics in the Prometheus text format. Scrapes that arrive while a collection is
   * under way share the next one, which starts as soon as it ends: however many scrapes come at
   * once, the children are asked at most twice, and every answer still counts everything that
   * happened before its scrape arrived.
   */
  collect(): Promise<Exposition> {
    if (this.#current === undefined) return this.#startCollection();
    this.#next ??= this.#current
      .catch(() => {})
      .then(() => {
        this.#next = undefined;
        return this.#startCollection();
      });
    return this.#next;
  }

  #startCollection(): Promise<Exposition> {
    const collection = this.#collectNow().finally(() => {
      if (this.#current === collection) this.#current = undefined;
    });
    this.#current = collection;
    return collection;
  }

  async #collectNow(): Promise<Exposition> {
    this.#own.collections.inc();
    await this.refresh();
    await this.#compact();
    this.#publishTopClients();
    const own = (await this.#own.registry.getMetricsAsJSON()) as Snapshot;
    const registry = AggregatorRegistry.aggregate([...this.#latest.values(), ...this.#retired, own]);
    return { text: await registry.metrics(), contentType: registry.contentType };
  }

  /** Only the current top K are series: a client that left it stops being exported (docs/throttling.md "Who is throttled"). */
  #publishTopClients(): void {
    this.#own.topClients.reset();
    for (const { scope, clients } of this.topClients())
      for (const { client, count } of clients) this.#own.topClients.set({ scope, client }, count);
  }

  #receive(worker: Worker, message: MetricsReply): void {
    if (message?.type !== METRICS_REPLY || !Array.isArray(message.metrics)) return;
    if (!this.#gone.has(worker.id)) this.#latest.set(worker.id, worstChildOfLag(message.metrics as Snapshot));
    if (!this.#gone.has(worker.id) && Array.isArray(message.throttled))
      this.#throttled.set(worker.id, message.throttled);
    if (message.id !== null) this.#pending.get(message.id)?.();
  }

  #ask(worker: Worker): Promise<void> {
    const id = ++this.#asked;
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#pending.delete(id);
        resolve();
      };
      const timer = setTimeout(done, ASK_TIMEOUT_MS);
      this.#pending.set(id, done);
      worker.send({ type: METRICS_REQUEST, id }, (error: Error | null) => error && done());
    });
  }

  /** Merges the retired snapshots into one; a concurrent scrape sees either form, both the same sum. */
  async #compact(): Promise<void> {
    if (this.#compacting || this.#retired.length < COMPACT_AFTER) return;
    this.#compacting = true;
    try {
      const count = this.#retired.length;
      const merged = (await AggregatorRegistry.aggregate(this.#retired.slice(0, count)).getMetricsAsJSON()) as Snapshot;
      this.#retired.splice(0, count, merged);
    } finally {
      this.#compacting = false;
    }
  }

  /** Serves GET /metrics on `host:port` with `limits` (see createMetricsServer for what else it answers). */
  async listen(port: number, host: string, limits: MetricsLimits): Promise<Server> {
    const server = createMetricsServer(
      limits,
      () => this.collect(),
      (error) => this.logger.error({ err: error }, 'metrics collection failed'),
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return server;
  }
}

/** Starts the hub on METRICS_HOST:METRICS_PORT with the METRICS_* limits; refreshes the children's reports every 5 s. */
export async function startMetricsHub(config: Config, logger: Logger) {
  const hub = new MetricsHub(logger, config.THROTTLE_TOP_K, config.THROTTLE_TOP_WINDOW);
  const server = await hub.listen(config.METRICS_PORT, config.METRICS_HOST, config);
  const timer = setInterval(() => void hub.refresh(), REFRESH_MS);
  timer.unref();
  return Object.assign(hub, {
    close(): Promise<void> {
      clearInterval(timer);
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

/** A child's report with the lag gauges aggregated by `max` (prom-client's documented `aggregator` field). */
function worstChildOfLag(snapshot: Snapshot): Snapshot {
  return snapshot.map((metric) => (WORST_CHILD.has(metric.name) ? { ...metric, aggregator: 'max' } : metric));
}
