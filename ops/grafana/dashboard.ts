/**
 * The Grafana dashboard as code (docs/operations.md "Grafana dashboard"): each panel is what it shows (title,
 * description, unit, queries), and the settings every panel shares are written once below. Run with Node.js 24,
 * which reads this file as it is: `node ops/grafana/dashboard.ts [file]` writes the dashboard's JSON to `file`
 * (or prints it), which Grafana imports as is; `npm run dashboard` writes `ops/grafana/paceline-dashboard.json`,
 * and the compose file's `dashboard` service writes it for Grafana's provisioning. Plain TypeScript importing
 * only Node's own modules, so that a bare `node` image runs it.
 */
import { writeFileSync } from 'node:fs';

const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };

/** One query: its PromQL and its legend. */
type Query = [expr: string, legend: string];

interface PanelBase {
  title: string;
  description: string;
  queries: Query[];
  /** Grid columns of 24 (12: half the width). */
  width?: number;
}

interface Graph extends PanelBase {
  unit: string;
  /** Set on the field defaults beside the unit (min, max, thresholds). */
  field?: Record<string, unknown>;
  /** Set on the lines' style beside the shared one. */
  style?: Record<string, unknown>;
  /** Field overrides: [a refId (`B`) or a series name, its properties]. */
  overrides?: Array<[matcher: string, properties: Record<string, unknown>]>;
}

interface Table extends PanelBase {
  unit: string;
  options: Record<string, unknown>;
  transformations: unknown[];
  /** The query runs once over the dashboard's range (`instant`), not along it. */
  range?: false;
}

/** A panel as Grafana stores it, and its width. */
interface Built {
  width: number;
  panel: Record<string, unknown>;
}

/** A line whose thresholds draw nothing (no red line at Grafana's default of 80), from 0 up. */
const FROM_ZERO = { min: 0, thresholds: { mode: 'absolute', steps: [{ color: 'green', value: null }] } };
const UNDRAWN = { thresholdsStyle: { mode: 'off' } };

/** A table of the biggest counts, largest first, its value column named for what it counts. */
const topTable = {
  options: { showHeader: true, sortBy: [{ displayName: 'Value', desc: true }], cellHeight: 'sm' },
  transformations: [
    { id: 'organize', options: { excludeByName: { Time: true }, renameByName: { Value: '429s in range' } } },
  ],
};

/** The rows, top to bottom, and their panels, left to right (built by `graph` and `table` below). */
const ROWS: Array<[title: string, panels: Built[]]> = [
  [
    'Throttling',
    [
      graph({
        title: 'Throttle decisions per scope: admitted vs throttled (and shadow-refused)',
        description:
          'Throttle checks per second by scope and outcome: allowed (admitted), throttled (answered 429) and store_error (Redis failed or timed out; see the failure mode).',
        unit: 'reqps',
        queries: [
          [
            'sum by (scope, decision) (rate(paceline_throttle_decisions_total{instance=~"$instance"}[$__rate_interval]))',
            '{{scope}} {{decision}}',
          ],
        ],
      }),
      graph({
        title: 'Throttle ratio per scope',
        description:
          "Share of a scope's throttle checks that answered 429. The PacelineThrottleRatioHigh alert fires above 25% for 10 minutes. Throttling is fleet-wide (one Redis), so the ratio is over all selected hosts.",
        unit: 'percentunit',
        style: { thresholdsStyle: { mode: 'line' } },
        field: {
          min: 0,
          max: 1,
          thresholds: {
            mode: 'absolute',
            steps: [
              { color: 'green', value: null },
              { color: 'orange', value: 0.25 },
            ],
          },
        },
        queries: [
          [
            'sum by (scope) (rate(paceline_throttle_decisions_total{instance=~"$instance",decision="throttled"}[$__rate_interval])) / sum by (scope) (rate(paceline_throttle_decisions_total{instance=~"$instance",decision!="shadow_refused"}[$__rate_interval]))',
            '{{scope}}',
          ],
        ],
      }),
      table({
        title: 'Top routes by 429',
        description:
          "Routes (method and route template) with the most 429 responses over the dashboard's time range; routes without any 429 show 0.",
        unit: 'short',
        range: false,
        ...topTable,
        queries: [
          [
            'topk(10, sum by (method, route) (increase(paceline_http_requests_total{instance=~"$instance",status="429"}[$__range])) or sum by (method, route) (increase(paceline_http_requests_total{instance=~"$instance"}[$__range])) * 0)',
            '{{method}} {{route}}',
          ],
        ],
      }),
      graph({
        title: 'Throttle check latency per scope',
        description:
          'p50 and p99 of one throttle check, including the Redis round trip (one atomic Lua script). Checks slower than THROTTLE_TIMEOUT_MS count as store errors.',
        unit: 's',
        queries: [
          [
            'histogram_quantile(0.5, sum by (scope, le) (rate(paceline_throttle_check_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))',
            'p50 {{scope}}',
          ],
          [
            'histogram_quantile(0.99, sum by (scope, le) (rate(paceline_throttle_check_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))',
            'p99 {{scope}}',
          ],
        ],
      }),
      graph({
        title: 'Redis / throttle store errors',
        description:
          'Throttle checks per second that failed because Redis was unreachable or slow (THROTTLE_FAILURE_MODE decides: admit or 503), and readiness probes that answered 503 because PostgreSQL or Redis was down.',
        unit: 'reqps',
        width: 24,
        queries: [
          [
            'sum by (scope) (rate(paceline_throttle_decisions_total{instance=~"$instance",decision="store_error"}[$__rate_interval]))',
            'store errors {{scope}}',
          ],
          [
            'sum(rate(paceline_http_requests_total{instance=~"$instance",route="/readyz",status="503"}[$__rate_interval])) or on() vector(0)',
            'readiness 503s',
          ],
        ],
      }),
    ],
  ],
  [
    'Who is throttled',
    [
      table({
        title: 'Top throttled clients per scope',
        description:
          "The THROTTLE_TOP_K clients with the most refused requests per scope over THROTTLE_TOP_WINDOW (default 5 minutes), summed over the selected hosts. A client is a pseudonym (c- and 16 hex digits: a keyed hash of its address, the same on every host sharing CURSOR_SECRET) or user:<id>. The refused-request log lines carry the same pseudonym; `npm run cli -- throttled` on a host prints the real addresses. Counts are within 1/(10·K) of the scope's refusals.",
        unit: 'short',
        range: false,
        ...topTable,
        queries: [
          ['sort_desc(sum by (scope, client) (paceline_throttle_top_client_refused{instance=~"$instance"}))', ''],
        ],
      }),
      graph({
        title: 'Distinct throttled clients per scope',
        description:
          "Distinct clients refused per scope over THROTTLE_TOP_WINDOW on every host sharing the Redis (a HyperLogLog: about 0.81 % off). Many clients at once is a limit too tight or a distributed flood; one client is the top table's first row.",
        unit: 'short',
        style: UNDRAWN,
        field: FROM_ZERO,
        queries: [['max by (scope) (paceline_throttle_distinct_clients{instance=~"$instance"})', '{{scope}}']],
      }),
      graph({
        title: 'Near-limit ratio per scope',
        description:
          'Share of admitted requests that left their client at or under THROTTLE_NEAR_LIMIT_RATIO (default 20 %) of its budget: the early warning before 429s. A rising line with few 429s says clients are about to meet the limit.',
        unit: 'percentunit',
        style: UNDRAWN,
        field: { ...FROM_ZERO, max: 1 },
        queries: [
          [
            'sum by (scope) (rate(paceline_throttle_near_limit_total{instance=~"$instance"}[$__rate_interval])) / sum by (scope) (rate(paceline_throttle_decisions_total{instance=~"$instance",decision="allowed"}[$__rate_interval]))',
            '{{scope}}',
          ],
        ],
      }),
      graph({
        title: 'Shadow vs enforced refusals',
        description:
          'Refusals per second per scope: throttled (answered 429 by the enforced rule) beside shadow_refused (requests a shadow rule would have refused: counted and logged, never refused). A shadow line far above the enforced one is what a new limit would do.',
        unit: 'reqps',
        style: UNDRAWN,
        field: FROM_ZERO,
        queries: [
          [
            'sum by (scope, decision) (rate(paceline_throttle_decisions_total{instance=~"$instance",decision=~"throttled|shadow_refused"}[$__rate_interval]))',
            '{{scope}} {{decision}}',
          ],
        ],
      }),
      graph({
        title: "Heaviest client against its scope's limit",
        description:
          "The heaviest client's refusals per scope, scaled to the scope's own window (its count over THROTTLE_TOP_WINDOW × the scope's window ÷ THROTTLE_TOP_WINDOW: an average per window), beside the scope's limit (requests admitted per window): both in requests per window of the scope. A client refused as many per window as its limit asks for twice the limit. Settings reloads are marked on every panel (annotation \"Settings reloads\").",
        unit: 'short',
        style: { axisLabel: 'requests per window', ...UNDRAWN },
        field: FROM_ZERO,
        queries: [
          [
            'max by (scope) (sum by (scope, client) (paceline_throttle_top_client_refused{instance=~"$instance"})) * max by (scope) (paceline_throttle_window_seconds{instance=~"$instance"}) / scalar(max(paceline_throttle_top_window_seconds{instance=~"$instance"}))',
            '{{scope}} heaviest client, refused per window',
          ],
          ['max by (scope) (paceline_throttle_limit{instance=~"$instance"})', '{{scope}} limit per window'],
        ],
      }),
      graph({
        title: 'Settings reloads',
        description:
          'Settings reloads (SIGHUP, npm run cli -- reload) per host by outcome: applied, or refused for a bad setting (the workers keep theirs).',
        unit: 'short',
        style: UNDRAWN,
        field: FROM_ZERO,
        queries: [
          [
            'sum by (instance, outcome) (increase(paceline_settings_reloads_total{instance=~"$instance"}[$__rate_interval]))',
            '{{instance}} {{outcome}}',
          ],
        ],
      }),
      graph({
        title: 'Refusals per second by plan',
        description:
          'Refusals by scope and by the policy whose limit refused: the client\'s plan (`default`: the settings) or `override` while one is in force (docs/throttling.md "Plans and overrides").',
        unit: 'reqps',
        queries: [
          [
            'sum by (scope, plan) (rate(paceline_throttle_plan_refusals_total{instance=~"$instance"}[$__rate_interval]))',
            '{{scope}} {{plan}}',
          ],
        ],
      }),
      table({
        title: 'Overrides in force',
        description:
          'Each override of a limit in force and when it ends: its id (npm run cli -- limit:overrides names the client, rates and reason), the kind of client, the who view\'s pseudonym of a user, its scopes (docs/operations.md "Limits per client").',
        unit: 'dateTimeAsIso',
        range: false,
        options: { showHeader: true },
        transformations: [{ id: 'labelsToFields', options: { mode: 'columns' } }],
        queries: [
          [
            'max by (override, target, client, scopes) (paceline_throttle_override_ends_seconds{instance=~"$instance"}) * 1000',
            '',
          ],
        ],
      }),
    ],
  ],
  [
    'HTTP',
    [
      graph({
        title: 'Request rate by status class',
        description: 'Responses per second grouped by status class (2xx, 3xx, 4xx, 5xx), all routes.',
        unit: 'reqps',
        queries: [
          [
            'sum by (class) (label_replace(rate(paceline_http_requests_total{instance=~"$instance"}[$__rate_interval]), "class", "$1", "status", "([1-5]).."))',
            '{{class}}xx',
          ],
        ],
      }),
      graph({
        title: 'Request rate by route',
        description:
          "Responses per second by method and route template (never raw paths); 'unmatched' is every path no route knows.",
        unit: 'reqps',
        queries: [
          [
            'sum by (method, route) (rate(paceline_http_requests_total{instance=~"$instance"}[$__rate_interval]))',
            '{{method}} {{route}}',
          ],
        ],
      }),
      graph({
        title: 'Latency percentiles',
        description:
          'p50, p90 and p99 of the time from receiving a request to sending its response, all routes. The PacelineLatencyP99High alert fires above 500 ms for 10 minutes.',
        unit: 's',
        queries: [0.5, 0.9, 0.99].map((q): Query => [
          `histogram_quantile(${q}, sum by (le) (rate(paceline_http_request_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))`,
          `p${Math.round(q * 100)}`,
        ]),
      }),
      graph({
        title: 'p99 latency by route',
        description: '99th percentile of request duration per method and route template.',
        unit: 's',
        queries: [
          [
            'histogram_quantile(0.99, sum by (method, route, le) (rate(paceline_http_request_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))',
            '{{method}} {{route}}',
          ],
        ],
      }),
      graph({
        title: '5xx ratio',
        description:
          'Share of responses that were server errors. The PacelineHttp5xxRatioHigh alert fires above 1% for 5 minutes on a host.',
        unit: 'percentunit',
        width: 24,
        queries: [
          [
            '(sum(rate(paceline_http_requests_total{instance=~"$instance",status=~"5.."}[$__rate_interval])) or on() vector(0)) / sum(rate(paceline_http_requests_total{instance=~"$instance"}[$__rate_interval]))',
            '5xx ratio',
          ],
        ],
      }),
    ],
  ],
  [
    'Past capacity',
    [
      graph({
        title: 'Requests in progress against the learnt limit',
        description:
          'Requests each host\'s web workers are running now beside the limit they learnt from latency, both summed over the workers: in progress at the limit means requests queue or are shed (docs/throttling.md "Past capacity: admission and shedding").',
        unit: 'short',
        field: { min: 0 },
        overrides: [['B', { 'custom.lineStyle': { fill: 'dash', dash: [10, 10] }, 'custom.fillOpacity': 0 }]],
        queries: [
          ['sum by (instance) (paceline_admission_in_progress{instance=~"$instance"})', '{{instance}} in progress'],
          ['sum by (instance) (paceline_admission_limit{instance=~"$instance"})', '{{instance}} limit'],
        ],
      }),
      graph({
        title: 'Queued requests',
        description:
          "Requests waiting in each host's web worker queues for a slot, at most ADMISSION_QUEUE_SIZE per worker and none for longer than ADMISSION_QUEUE_MS.",
        unit: 'short',
        field: { min: 0 },
        queries: [['sum by (instance) (paceline_admission_queued{instance=~"$instance"})', '{{instance}} queued']],
      }),
      graph({
        title: 'Shed per second by class and reason',
        description:
          'Requests answered 503 by admission control per second, by class (docs first, then anonymous, read, write) and reason (full: no room in the queue, displaced: a higher class took its place, waited: queued past ADMISSION_QUEUE_MS); the PacelineShedding alert fires when a host sheds more than 1% of its requests for 5 minutes.',
        unit: 'reqps',
        field: { min: 0 },
        queries: [
          [
            'sum by (instance, class, reason) (rate(paceline_admission_shed_total{instance=~"$instance"}[$__rate_interval])) or on() vector(0)',
            '{{instance}} {{class}} {{reason}}',
          ],
        ],
      }),
      graph({
        title: 'Queue time p99 by class',
        description:
          "The 99th percentile of the time started requests of each class waited in their worker's queue, 0 while none queue and never past ADMISSION_QUEUE_MS, beyond which a request is shed instead.",
        unit: 's',
        field: { min: 0 },
        queries: [
          [
            'histogram_quantile(0.99, sum by (instance, class, le) (rate(paceline_admission_queue_seconds_bucket{instance=~"$instance"}[$__rate_interval])))',
            '{{instance}} {{class}}',
          ],
        ],
      }),
      graph({
        title: 'Abandoned in the queue per second',
        description:
          'Queued requests dropped per second with no work done because their client closed the connection before their turn came.',
        unit: 'reqps',
        field: { min: 0 },
        queries: [
          [
            'sum by (instance) (rate(paceline_admission_abandoned_total{instance=~"$instance"}[$__rate_interval]))',
            '{{instance}} abandoned',
          ],
        ],
      }),
      graph({
        title: 'Throttle deciding locally (Redis unreachable)',
        description:
          'Web workers of each host that decide throttle checks alone by their share of each limit because Redis does not answer (THROTTLE_FAILURE_MODE=local), and the checks they decided per second (right axis); the PacelineThrottleDegraded alert fires after 2 minutes (docs/throttling.md "When Redis is unreachable").',
        unit: 'short',
        field: { min: 0 },
        overrides: [['B', { unit: 'reqps', 'custom.axisPlacement': 'right' }]],
        queries: [
          [
            'sum by (instance) (paceline_throttle_degraded{instance=~"$instance"})',
            '{{instance}} workers deciding locally',
          ],
          [
            'sum by (instance, decision) (rate(paceline_throttle_local_decisions_total{instance=~"$instance"}[$__rate_interval]))',
            '{{instance}} {{decision}} locally per second',
          ],
        ],
      }),
    ],
  ],
  [
    'Events and jobs',
    [
      graph({
        title: 'Events appended per second',
        description: 'Events appended to the event store per second, by event type.',
        unit: 'ops',
        queries: [
          [
            'sum by (type) (rate(paceline_events_appended_total{instance=~"$instance"}[$__rate_interval])) or on() vector(0)',
            '{{type}}',
          ],
        ],
      }),
      graph({
        title: 'Group-commit batch size',
        description:
          'Commands committed together in one transaction (the append lock is held once per batch): p50, p99 and mean, plus transactions per second on the right axis.',
        unit: 'short',
        overrides: [['transactions/s', { 'custom.axisPlacement': 'right', unit: 'ops' }]],
        queries: [
          ...[0.5, 0.99].map((q): Query => [
            `histogram_quantile(${q}, sum by (le) (rate(paceline_append_batch_size_bucket{instance=~"$instance"}[$__rate_interval])))`,
            `p${Math.round(q * 100)}`,
          ]),
          [
            'sum(rate(paceline_append_batch_size_sum{instance=~"$instance"}[$__rate_interval])) / sum(rate(paceline_append_batch_size_count{instance=~"$instance"}[$__rate_interval]))',
            'mean',
          ],
          ['sum(rate(paceline_append_batch_size_count{instance=~"$instance"}[$__rate_interval]))', 'transactions/s'],
        ],
      }),
      graph({
        title: 'Job queue depth',
        description:
          'Jobs in each BullMQ queue by state, read from Redis (the queue is shared, so this is the max over hosts, not a sum). The PacelineJobQueueBacklog alert fires above 100 waiting jobs for 15 minutes.',
        unit: 'short',
        queries: [
          ['max by (queue, state) (paceline_jobs{instance=~"$instance",state!="completed"})', '{{queue}} {{state}}'],
        ],
      }),
      graph({
        title: 'Worker restarts',
        description:
          'Children the primary restarted after an unexpected exit, by role (a SIGHUP reload is not a restart). The PacelineWorkerRestarting alert fires at more than 2 in 15 minutes.',
        unit: 'short',
        style: { drawStyle: 'bars', fillOpacity: 80 },
        queries: [
          [
            'sum by (role) (increase(paceline_worker_restarts_total{instance=~"$instance"}[$__rate_interval]))',
            '{{role}}',
          ],
        ],
      }),
    ],
  ],
  [
    'Database',
    [
      graph({
        title: 'Database reads by target and reason',
        description:
          'Reads PostgreSQL answered (read-cache misses, the feed), by where they went and why: replica/current when a streaming replica had replayed what the reader must see; primary with no_replica (none configured), head_unknown (Redis could not say which head to compare), lagging (every replica behind), unhealthy (every replica marked down) or error (the replica\'s read failed). docs/scaling.md "PostgreSQL read replicas".',
        unit: 'reqps',
        width: 24,
        queries: [
          [
            'sum by (target, reason) (rate(paceline_db_reads_total{instance=~"$instance"}[$__rate_interval]))',
            '{{target}} {{reason}}',
          ],
        ],
      }),
    ],
  ],
  [
    'Node.js processes',
    [
      graph({
        title: 'CPU per host',
        description:
          'CPU seconds per second used by all workers of a host (Node process metrics, summed over the workers).',
        unit: 'short',
        width: 8,
        queries: [
          [
            'sum by (instance) (rate(process_cpu_seconds_total{instance=~"$instance"}[$__rate_interval]))',
            '{{instance}}',
          ],
        ],
      }),
      graph({
        title: 'Memory per host',
        description: 'Resident memory of all workers of a host.',
        unit: 'bytes',
        width: 8,
        queries: [['sum by (instance) (process_resident_memory_bytes{instance=~"$instance"})', '{{instance}}']],
      }),
      graph({
        title: 'Event loop lag p99',
        description:
          "Each host's worst child (web or job worker) by event-loop lag at p99: the time callbacks wait before they run. The host exports the highest of its children's, not their average, so one stuck worker shows.",
        unit: 's',
        width: 8,
        queries: [['max by (instance) (nodejs_eventloop_lag_p99_seconds{instance=~"$instance"})', '{{instance}}']],
      }),
    ],
  ],
];

const PANEL_HEIGHT = 8;

/** A query as Grafana stores it: refId A, B, …; a table's runs once (instant), in table form. */
function targets(queries: Query[], instant: boolean) {
  return queries.map(([expr, legendFormat], i) => ({
    datasource: DATASOURCE,
    refId: String.fromCharCode(65 + i),
    expr,
    legendFormat,
    ...(instant ? { range: false, instant: true, format: 'table' } : { range: true, instant: false }),
  }));
}

/** A time series: the shared line style and legend, with the panel's own field settings and overrides. */
function graph(panel: Graph): Built {
  const { title, description, unit, field, style, overrides = [], queries, width = 12 } = panel;
  return {
    width,
    panel: {
      type: 'timeseries',
      title,
      description,
      datasource: DATASOURCE,
      targets: targets(queries, false),
      fieldConfig: {
        defaults: {
          unit,
          custom: { drawStyle: 'line', lineWidth: 1, fillOpacity: 10, showPoints: 'never', spanNulls: false, ...style },
          ...field,
        },
        overrides: overrides.map(([matcher, properties]) => ({
          matcher: /^[A-Z]$/.test(matcher)
            ? { id: 'byFrameRefID', options: matcher }
            : { id: 'byName', options: matcher },
          properties: Object.entries(properties).map(([id, value]) => ({ id, value })),
        })),
      },
      options: {
        legend: { displayMode: 'table', placement: 'bottom', showLegend: true, calcs: ['mean', 'max'] },
        tooltip: { mode: 'multi', sort: 'desc' },
      },
    },
  };
}

/** A table of one instant query. */
function table(panel: Table): Built {
  const { title, description, unit, options, transformations, queries, width = 12 } = panel;
  return {
    width,
    panel: {
      type: 'table',
      title,
      description,
      datasource: DATASOURCE,
      targets: targets(queries, true),
      fieldConfig: { defaults: { unit }, overrides: [] },
      options,
      transformations,
    },
  };
}

/** Every panel with its place: rows across the full width, panels left to right under them, wrapping at 24. */
function layout(rows: typeof ROWS) {
  const panels: Array<Record<string, unknown>> = [];
  let [x, y] = [0, 0];
  const place = (w: number, h: number) => {
    if (x + w > 24) [x, y] = [0, y + PANEL_HEIGHT];
    const gridPos = { h, w, x, y };
    x += w;
    return gridPos;
  };
  for (const [title, members] of rows) {
    if (x > 0) [x, y] = [0, y + PANEL_HEIGHT];
    panels.push({ type: 'row', title, collapsed: false, gridPos: place(24, 1), panels: [] });
    [x, y] = [0, y + 1];
    for (const { width, panel } of members) panels.push({ ...panel, gridPos: place(width, PANEL_HEIGHT) });
  }
  return panels.map((panel, i) => ({ id: i + 1, ...panel }));
}

export const dashboard = {
  __inputs: [],
  __requires: [
    { type: 'grafana', id: 'grafana', name: 'Grafana', version: '10.0.0' },
    { type: 'datasource', id: 'prometheus', name: 'Prometheus', version: '1.0.0' },
    { type: 'panel', id: 'timeseries', name: 'Time series', version: '' },
    { type: 'panel', id: 'table', name: 'Table', version: '' },
  ],
  id: null,
  uid: 'paceline-overview',
  title: 'Paceline',
  description:
    "Paceline task API: throttling, HTTP traffic and latency, admission and shedding past capacity, event appends, job queues and worker health. One scrape per host (the primary's METRICS_PORT).",
  tags: ['paceline'],
  timezone: 'browser',
  editable: true,
  graphTooltip: 1,
  schemaVersion: 39,
  version: 1,
  refresh: '30s',
  time: { from: 'now-1h', to: 'now' },
  annotations: {
    list: [
      {
        builtIn: 1,
        datasource: { type: 'grafana', uid: '-- Grafana --' },
        enable: true,
        hide: true,
        iconColor: 'rgba(0, 211, 255, 1)',
        name: 'Annotations & Alerts',
        type: 'dashboard',
      },
      {
        datasource: DATASOURCE,
        enable: true,
        hide: false,
        iconColor: 'rgba(255, 152, 48, 1)',
        name: 'Settings reloads',
        expr: 'sum by (outcome) (increase(paceline_settings_reloads_total{instance=~"$instance"}[1m])) > 0',
        step: '15s',
        titleFormat: 'Settings reload',
        textFormat: '{{outcome}}',
        tagKeys: 'outcome',
      },
    ],
  },
  templating: {
    list: [
      { type: 'datasource', name: 'datasource', label: 'Data source', query: 'prometheus', refresh: 1 },
      {
        type: 'query',
        name: 'instance',
        label: 'Host',
        datasource: DATASOURCE,
        definition: 'label_values(paceline_worker_restarts_total, instance)',
        query: {
          query: 'label_values(paceline_worker_restarts_total, instance)',
          refId: 'PrometheusVariableQueryEditor-VariableQuery',
        },
        includeAll: true,
        allValue: '.*',
        multi: true,
        refresh: 2,
        sort: 1,
      },
    ],
  },
  panels: layout(ROWS),
};

if (import.meta.url === `file://${process.argv[1]}`) {
  const json = `${JSON.stringify(dashboard, null, 2)}\n`;
  const file = process.argv[2];
  if (!file) process.stdout.write(json);
  else {
    writeFileSync(file, json);
    console.log(`wrote ${file}: ${dashboard.panels.length} panels; import it in Grafana as is`);
  }
}
