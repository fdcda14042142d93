/**
 * The metrics every child records (createMetrics), with the series primed at zero for the
 * retention sweep and the `method` label's values; the throttle's own series helpers are in
 * src/edge/throttle-series.ts. The primary's own are in cluster/primary-metrics.ts.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { policyMetrics } from './policy-metrics.js';

const GAUGES_NAMED_TOTAL = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** Every metric Paceline records, defined in one place. Labels never carry client data. */
export function createMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  // Gauges named like counters fail `promtool check metrics`; nodejs_active_{handles,requests,
  // resources}{type} carry the same counts by type.
  for (const name of GAUGES_NAMED_TOTAL) registry.removeSingleMetric(name);
  const registers = [registry];
  return {
    registry,
    throttleDecisions: new Counter({
      name: 'paceline_throttle_decisions_total',
      help:
        'Throttle checks by scope and outcome: allowed, throttled (answered 429) or store_error (Redis failed or ' +
        'timed out); shadow_refused counts the allowed ones a shadow rule would have refused.',
      labelNames: ['scope', 'decision'] as const,
      registers,
    }),
    throttleCheckDuration: new Histogram({
      name: 'paceline_throttle_check_duration_seconds',
      help:
        'Time one throttle check took, including the Redis round trip (none for a refusal answered in process ' +
        'from an earlier one).',
      labelNames: ['scope'] as const,
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      registers,
    }),
    throttleNearLimit: new Counter({
      name: 'paceline_throttle_near_limit_total',
      help:
        'Admissions that left their client at or under THROTTLE_NEAR_LIMIT_RATIO (default 0.2) of its budget, by ' +
        'scope: the warning before 429s.',
      labelNames: ['scope'] as const,
      registers,
    }),
    throttleLimit: new Gauge({
      name: 'paceline_throttle_limit',
      help: "Each scope's configured limit: requests a client may make per window.",
      labelNames: ['scope'] as const,
      aggregator: 'max',
      registers,
    }),
    ...policyMetrics(registers),
    throttleWindow: new Gauge({
      name: 'paceline_throttle_window_seconds',
      help: "Each scope's configured window, in seconds.",
      labelNames: ['scope'] as const,
      aggregator: 'max',
      registers,
    }),
    throttleDegraded: new Gauge({
      name: 'paceline_throttle_degraded',
      help:
        '1 while this web worker decides throttle checks alone, by its share of each limit, because Redis does ' +
        "not answer (THROTTLE_FAILURE_MODE=local); else 0. A host's value is how many of its workers do.",
      registers,
    }),
    throttleLocalDecisions: new Counter({
      name: 'paceline_throttle_local_decisions_total',
      help:
        'Throttle checks Redis did not answer that this worker decided alone by its share of the limit ' +
        '(THROTTLE_FAILURE_MODE=local), by scope and outcome: allowed or throttled (answered 429).',
      labelNames: ['scope', 'decision'] as const,
      registers,
    }),
    throttleWorkers: new Gauge({
      name: 'paceline_throttle_workers',
      help:
        'Web workers alive across the deployment as last counted through Redis (THROTTLE_FAILURE_MODE=local): ' +
        'while Redis is unreachable each worker enforces a limit divided by it. 0 until counted.',
      // Every worker reads the same count: the host reports it once.
      aggregator: 'max',
      registers,
    }),
    throttleDistinctClients: new Gauge({
      name: 'paceline_throttle_distinct_clients',
      help:
        'Distinct clients refused in each scope over THROTTLE_TOP_WINDOW, on every host sharing this Redis ' +
        '(a HyperLogLog: about 0.81 % off).',
      labelNames: ['scope'] as const,
      // Every process reads the same cluster-wide count: the host reports it once.
      aggregator: 'max',
      registers,
    }),
    httpRequests: new Counter({
      name: 'paceline_http_requests_total',
      help: HTTP_REQUESTS_HELP,
      labelNames: ['method', 'route', 'status'] as const,
      registers,
    }),
    admissionInProgress: new Gauge({
      name: 'paceline_admission_in_progress',
      help: 'Requests this web worker has started and not finished (ADMISSION_CONTROL); a host sums its workers.',
      registers,
    }),
    admissionLimit: new Gauge({
      name: 'paceline_admission_limit',
      help: "The requests a web worker lets run at once, learnt from their latency (Gradient2); a host's sum.",
      registers,
    }),
    admissionQueued: new Gauge({
      name: 'paceline_admission_queued',
      help: 'Requests waiting for a web worker to start them; a host sums its workers.',
      registers,
    }),
    admissionQueueSeconds: new Histogram({
      name: 'paceline_admission_queue_seconds',
      help: 'Time a started request waited in its worker queue, by class (docs, anonymous, read, write).',
      labelNames: ['class'] as const,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
    admissionShed: new Counter({
      name: 'paceline_admission_shed_total',
      help:
        'Requests answered 503 by admission control, by class and reason: full (no room in the queue), ' +
        'displaced (a higher class took its place), waited (queued past ADMISSION_QUEUE_MS).',
      labelNames: ['class', 'reason'] as const,
      registers,
    }),
    admissionAbandoned: new Counter({
      name: 'paceline_admission_abandoned_total',
      help: 'Queued requests dropped with no work because their client closed the connection meanwhile.',
      registers,
    }),
    keptDeferred: new Counter({
      name: 'paceline_kept_connections_deferred_total',
      help:
        'Kept connections left for a later turn of the event loop, past 64 requests read in one turn (newcomers ' +
        'are read in the next; docs/throttling.md "Past capacity: newcomers take turns").',
      registers,
    }),
    admissionMemory: new Counter({
      name: 'paceline_admission_memory_total',
      help:
        'Requests started at once, without a slot, because they need no PostgreSQL (a kept list or the own budget ' +
        'for a client known without it, a throttle refusal): not held behind requests that do.',
      registers,
    }),
    httpDuration: new Histogram({
      name: 'paceline_http_request_duration_seconds',
      help: HTTP_DURATION_HELP,
      labelNames: ['method', 'route'] as const,
      buckets: HTTP_DURATION_BUCKETS,
      registers,
    }),
    eventsAppended: new Counter({
      name: 'paceline_events_appended_total',
      help: 'Events appended to the event store, by event type.',
      labelNames: ['type'] as const,
      registers,
    }),
    appendBatchSize: new Histogram({
      name: 'paceline_append_batch_size',
      help: 'Commands committed together in one group-commit transaction.',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers,
    }),
    dbReads: new Counter({
      name: 'paceline_db_reads_total',
      help:
        'Reads answered from PostgreSQL (read-cache misses, the feed), by target (replica or primary) and reason: ' +
        'current (a replica had replayed the published head), no_replica, head_unknown (Redis could not say), ' +
        'lagging, unhealthy (every replica recently failed) or error.',
      labelNames: ['target', 'reason'] as const,
      registers,
    }),
    retentionSwept: new Counter({
      name: 'paceline_retention_swept_total',
      help:
        'Rows the retention sweep of the job child deleted, by table: expired tokens and idempotency records past ' +
        'their TTL.',
      labelNames: ['table'] as const,
      registers,
    }),
    loginHashesInFlight: new Gauge({
      name: 'paceline_login_hashes_in_flight',
      help: 'Password hashes of logins (real and decoy) running now; at most LOGIN_HASH_CONCURRENCY per web worker.',
      registers,
    }),
    loginHashesPeak: new Gauge({
      name: 'paceline_login_hashes_in_flight_peak',
      help: 'The most password hashes one web worker has run at once since it started.',
      aggregator: 'max',
      registers,
    }),
    loginHashesWaiting: new Gauge({
      name: 'paceline_login_hashes_waiting',
      help: 'Logins waiting for a password hashing slot.',
      registers,
    }),
    loginHashSeconds: new Counter({
      name: 'paceline_login_hash_seconds_total',
      help: 'Time spent hashing passwords of logins; its rate is the cores logins keep busy.',
      registers,
    }),
    loginHashRefused: new Counter({
      name: 'paceline_login_hash_refused_total',
      help: 'Logins answered 503 because no hashing slot came free within LOGIN_HASH_WAIT_MS.',
      registers,
    }),
    jobs: new Gauge({
      name: 'paceline_jobs',
      help: 'Jobs in each BullMQ queue by state (waiting, active, delayed, failed, completed), as read from Redis.',
      labelNames: ['queue', 'state'] as const,
      // Every job child reads the same shared queue: the host reports it once, not once per child.
      aggregator: 'max',
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The tables `paceline_retention_swept_total` counts. */
export const RETENTION_TABLES = ['tokens', 'idempotency_keys'] as const;

/**
 * Creates every table's `paceline_retention_swept_total` series at zero, so it reads 0 before the first sweep deletes
 * anything.
 */
export function primeRetentionSeries(metrics: Metrics): void {
  for (const table of RETENTION_TABLES) metrics.retentionSwept.inc({ table }, 0);
}

const METHOD_LABELS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** The `method` label: the standard methods as sent, anything else as `_OTHER`. */
export function methodLabel(method: string): string {
  return METHOD_LABELS.has(method) ? method : '_OTHER';
}

/** The request series' texts and buckets. */
const HTTP_REQUESTS_HELP =
  'HTTP requests answered, by method, route template ("unmatched" when no route matched the path) and status code.';
const HTTP_DURATION_HELP = 'Time from receiving a request to sending its response, by method and route template.';
const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
