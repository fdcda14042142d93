/**
 * The settings table: every variable Paceline reads, with its value type, bounds and default, and
 * which of them may carry a credential (their values are never echoed in an error). config.ts
 * reads the environment through it; the value types come from config-values.ts.
 */
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import {
  clusterNodes,
  duration,
  integer,
  metricsAuth,
  proxyList,
  rate,
  scopeLimits,
  scopeNames,
  ratio,
  redisUrl,
  scopeRates,
  secret,
  shadowRates,
  urlList,
} from './config-values.js';
import { planLimits, plans } from './plan-values.js';
import { scopeCosts } from './scope-costs.js';

/** Every setting by its variable's name: its value type, its bounds and its default (none: optional). */
export const settingsSchema = z.object({
  ROLE: z.enum(['all', 'web', 'jobs']).default('all'),
  // Loopback by default, as development servers bind: nothing else on the network reaches a laptop's
  // `npm start`. Hosts that others reach set 0.0.0.0 (the image, ops/deploy, docs/configuration.md "Configuration").
  HOST: z.string().default('127.0.0.1'),
  PORT: integer(0, 65535).default(8000),
  METRICS_PORT: integer(0, 65535).default(9464),
  // Loopback by default: the metrics are the host's alone (docs/configuration.md "Metrics");
  // containers and pods that are scraped from outside set 0.0.0.0 (ops/docker-compose.yml, ops/k8s).
  METRICS_HOST: z.string().default('127.0.0.1'),
  // `bearer:<token>` or `basic:<user>:<password>`, as Prometheus' `authorization` or `basic_auth`
  // sends it; unset, /metrics answers anyone who reaches METRICS_HOST.
  METRICS_AUTH: metricsAuth.optional(),
  // The metrics server's limits: a scrape's whole request within this time (else 408), and open connections.
  METRICS_HEADERS_TIMEOUT_MS: integer(1, 600_000).default(5_000),
  METRICS_MAX_CONNECTIONS: integer(1, 100_000).default(64),
  WEB_CONCURRENCY: integer(1, 256).default(availableParallelism()),
  JOB_CONCURRENCY: integer(0, 64).default(1),
  SHUTDOWN_TIMEOUT_MS: integer(100).default(10_000),
  // Before a stop drains: how long web workers answer /readyz 503 while still serving, so load
  // balancers take the host out before it stops accepting (docs/architecture.md "Processes").
  DRAIN_DELAY_MS: integer(0, 600_000).default(0),
  DATABASE_URL: z.string().url().optional(),
  DATABASE_POOL_SIZE: integer(1, 500).default(10),
  // Bounded work per request: the longest one statement of a serving process may run (pg's
  // statement_timeout; migrations and the CLI have none), and the longest a request waits for a
  // pool connection or for its command's turn at the append lock before it is answered 503.
  DATABASE_STATEMENT_TIMEOUT_MS: integer(1, 3_600_000).default(5_000),
  DATABASE_WAIT_MS: integer(1, 3_600_000).default(5_000),
  // Streaming replicas that answer reads once they have replayed what the reader must see
  // (docs/architecture.md "Read replicas"), and the longest a read waits for one of their
  // connections before the primary answers it.
  DATABASE_REPLICA_URLS: urlList.default([]),
  DATABASE_REPLICA_WAIT_MS: integer(1, 3_600_000).default(500),
  REDIS_URL: redisUrl.optional(),
  // A Redis Cluster instead of one Redis (docs/scaling.md "Redis Cluster"): `host:port,host:port` or
  // `redis-cluster://[user:password@]host:port,…`; mutually exclusive with REDIS_URL.
  REDIS_CLUSTER_NODES: clusterNodes.optional(),
  // Used when REDIS_URL or REDIS_CLUSTER_NODES carries no password of its own.
  REDIS_PASSWORD: z.string().optional(),
  REDIS_PREFIX: z.string().default('paceline:'),
  // ioredis's auto-pipelining on the requests' connection (docs/benchmarks.md "Redis auto-pipelining").
  REDIS_AUTO_PIPELINING: z.enum(['on', 'off']).default('off'),
  DATA_DIR: z.string().default('.data'),
  EMBEDDED_PG_PORT: integer(1, 65535).default(54329),
  EMBEDDED_REDIS_PORT: integer(1, 65535).default(63799),
  PAGE_SIZE: integer(1, 1000).default(10),
  MAX_PAGE_SIZE: integer(1, 10_000).default(100),
  CURSOR_SECRET: secret.optional(),
  THROTTLE_ENABLED: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  THROTTLE_ANON: rate.default('20/min'),
  THROTTLE_USER: rate.default('100/min'),
  THROTTLE_TOKEN_OBTAIN: rate.default('5/min'),
  THROTTLE_REPORTS: rate.default('10/hour'),
  // Login attempts per submitted username, from any address (docs/security.md "Password guessing").
  THROTTLE_LOGIN: rate.default('10/15min'),
  // Rates of scopes declared by routes (`guard({ scope, rate })`), overriding their defaults:
  // `exports=5/min,search=30/min`.
  THROTTLE_RATES: scopeRates.default({}),
  // Rates tried beside the enforced ones, never refusing (`anon=10/min,user=50/min`), and scopes
  // whose own rate runs wholly so (`reports`): docs/throttling.md "Shadow rules".
  THROTTLE_SHADOW_RATES: shadowRates.default({}),
  THROTTLE_SHADOW_SCOPES: scopeNames.default([]),
  // What one request of the routes naming a scope costs in its units (`reports=5`), overriding the route's own:
  // docs/throttling.md "Cost: requests that weigh more".
  THROTTLE_COSTS: scopeCosts.default({}),
  THROTTLE_TIMEOUT_MS: integer(1, 60_000).default(250),
  // Redis unreachable: each web worker enforces its share of every limit (local), admits (open) or
  // answers 503 (closed): docs/throttling.md "When Redis is unreachable".
  THROTTLE_FAILURE_MODE: z.enum(['local', 'open', 'closed']).default('local'),
  // Requests one client may have in progress per scope (`user=4,exports=1`), and the longest an entry
  // counts, so a killed worker's stop counting: docs/throttling.md "Concurrency limits".
  THROTTLE_CONCURRENCY: scopeLimits.default({}),
  // Plans of limits a user may be given (docs/throttling.md "Plans and overrides"): their rates and their
  // requests in progress by scope, `partner: user=1000/min, reports=100/hour; free: user=50/min`.
  THROTTLE_PLANS: plans.default({}),
  THROTTLE_PLAN_CONCURRENCY: planLimits.default({}),
  THROTTLE_CONCURRENCY_EXPIRY_MS: integer(100, 3_600_000).default(60_000),
  // Who is throttled (docs/throttling.md "Who is throttled"): the heaviest refused clients per
  // scope exported, over what window, and the share of its budget at or under which an admission
  // counts as near the limit. THROTTLE_WATCH=off keeps none of it: no top clients, no distinct
  // count, no near-limit counter, no pseudonym in refusal log lines.
  THROTTLE_WATCH: z.enum(['on', 'off']).default('on'),
  THROTTLE_TOP_K: integer(1, 100).default(10),
  THROTTLE_TOP_WINDOW: duration.pipe(z.number().min(10_000, 'expected at least 10s')).default(300_000),
  THROTTLE_NEAR_LIMIT_RATIO: ratio.default(0.2),
  TRUST_PROXY_HOPS: integer(0, 16).default(0),
  // The peers whose X-Forwarded-* headers count (addresses and CIDRs); unset: any peer's do.
  TRUSTED_PROXIES: proxyList.optional(),
  ANON_IPV6_PREFIX: integer(1, 128).default(64),
  // Login attempts from IPv6 are counted per this prefix: one subscriber's whole delegation
  // (often a /56 or /48), not each of its /64s (docs/security.md "Login CPU budget").
  LOGIN_IPV6_PREFIX: integer(1, 128).default(56),
  // Password hashes (real and decoy) run at once per web worker, and the longest a login waits
  // for one before it is answered 503 with Retry-After.
  LOGIN_HASH_CONCURRENCY: integer(1, 64).default(2),
  LOGIN_HASH_WAIT_MS: integer(1, 60_000).default(1_000),
  TOKEN_TTL: duration.default(24 * 3_600_000),
  // HTTP server limits per web worker: time to receive a request's headers, time to receive the
  // whole request, and open connections (more are refused at accept).
  HTTP_HEADERS_TIMEOUT_MS: integer(1, 3_600_000).default(10_000),
  HTTP_REQUEST_TIMEOUT_MS: integer(1, 3_600_000).default(30_000),
  HTTP_MAX_CONNECTIONS: integer(1, 1_000_000).default(10_000),
  BODY_LIMIT_BYTES: integer(1, 100 * 1024 * 1024).default(64 * 1024),
  // How long /readyz answers from one check of PostgreSQL and Redis, per web worker.
  READY_CHECK_MS: integer(0, 60_000).default(1_000),
  // Per web worker; 0 turns the read cache off (and with it the head published by every write).
  READ_CACHE_BYTES: integer(0, 64 * 1024 * 1024 * 1024).default(64 * 1024 * 1024),
  APPEND_BATCH_MAX: integer(1, 10_000).default(256),
  // Admission control per web worker (docs/throttling.md "Past capacity: admission and shedding").
  ADMISSION_CONTROL: z.enum(['on', 'off']).default('on'),
  ADMISSION_QUEUE_MS: integer(1, 60_000).default(100),
  ADMISSION_QUEUE_SIZE: integer(0, 100_000).default(1_024),
  ADMISSION_LIMIT_MIN: integer(1, 100_000).default(4),
  ADMISSION_LIMIT_MAX: integer(1, 100_000).default(256),
  // How the web workers take connections on PORT: every one accepting from one socket the primary holds, or
  // node:cluster's round robin (docs/throttling.md "Past capacity: admission and shedding"). `reuseport` is
  // measured by the overload bench only and goes with it.
  CONNECTION_DOOR: z.enum(['shared', 'cluster', 'reuseport']).default('shared'),
  // Jobs (BullMQ): retries with exponential back-off; a job whose lock is not renewed within
  // JOB_LOCK_DURATION_MS (its worker died) is found by the stalled check and run again.
  JOB_ATTEMPTS: integer(1, 100).default(3),
  JOB_BACKOFF_MS: integer(0, 3_600_000).default(1_000),
  JOB_LOCK_DURATION_MS: integer(1_000, 3_600_000).default(30_000),
  JOB_STALLED_INTERVAL_MS: integer(1_000, 3_600_000).default(30_000),
  JOB_METRICS_INTERVAL_MS: integer(100, 3_600_000).default(5_000),
  // Reports: longest date range, events read per batch, a pause between batches (0; tests raise
  // it to make a job slow enough to interrupt), and how often pending reports are re-enqueued.
  REPORT_MAX_DAYS: integer(1, 36_600).default(366),
  REPORT_BATCH_SIZE: integer(1, 1_000_000).default(10_000),
  REPORT_BATCH_DELAY_MS: integer(0, 60_000).default(0),
  REPORT_SWEEP_INTERVAL_MS: integer(100, 3_600_000).default(30_000),
  // The job child's retention sweep: how often it deletes expired tokens and idempotency records
  // past their TTL, and the rows per delete (it repeats until a batch comes back short).
  RETENTION_SWEEP_INTERVAL_MS: integer(100, 86_400_000).default(60_000),
  RETENTION_BATCH_SIZE: integer(1, 100_000).default(1_000),
  // The per-owner task counts read model: events applied per transaction, idle poll interval.
  READ_MODEL_BATCH: integer(1, 100_000).default(1_000),
  READ_MODEL_POLL_MS: integer(10, 60_000).default(500),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Which requests get an access log line: all, errors (4xx and 5xx only) or off.
  ACCESS_LOG: z.enum(['all', 'errors', 'off']).default('all'),
});

/** The settings whose values may carry a credential: a refusal names them without their value. */
export const SECRET_KEYS: ReadonlySet<string> = new Set([
  'DATABASE_URL',
  'DATABASE_REPLICA_URLS',
  'REDIS_URL',
  'REDIS_CLUSTER_NODES',
  'REDIS_PASSWORD',
  'CURSOR_SECRET',
  'METRICS_AUTH',
]);
