import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { connectDatabase } from '../../db/connect.js';
import type { Config } from '../settings/config.js';
import { announce } from '../base/logger.js';
import type { StoreWatch } from '../stores/store-watch.js';

// What the primary says once it serves: where the API listens and who can reach it, the first user's hint, and
// what a store that is not there changes (the degraded banner). Split from primary.ts, which runs the start.

/** Where the API listens: the host it asked for and the port it got (PORT=0 lets the system choose). */
export type Listening = { host: string; port: number };

/** The address the first web child reports listening on, once it does (node:cluster's `listening` event). */
export function recordListening(): () => Listening | undefined {
  let first: Listening | undefined;
  cluster.on('listening', (_worker, address) => (first ??= { host: address.address, port: address.port }));
  return () => first;
}

/**
 * The banner, when the children are ready: plain lines on a terminal, one log line otherwise
 * (docs/operations.md "Logs"). It names the address the API is bound to, and suggests creating a
 * user only while there is none.
 */
export async function announceReady(
  config: Config,
  logger: Logger,
  watch: StoreWatch,
  started: { databaseUrl: string; api: Listening | undefined },
): Promise<void> {
  const web = config.ROLE === 'jobs' ? 0 : config.WEB_CONCURRENCY;
  const api = started.api ?? { host: config.HOST, port: config.PORT };
  const failing = watch.failing().map((store) => store.name);
  if (failing.length > 0) return announce(logger, 'warn', { web }, [degradedBanner(config, api, failing)]);
  const fields = {
    host: web > 0 ? api.host : undefined,
    port: web > 0 ? api.port : undefined,
    metricsPort: config.METRICS_PORT,
    web,
    jobs: config.ROLE === 'web' ? 0 : config.JOB_CONCURRENCY,
  };
  if (web === 0)
    return announce(logger, 'info', fields, ['Paceline job workers are up (ROLE=jobs: this host serves no API)']);
  announce(logger, 'info', fields, readyBanner(config, api, await anyUserExists(started.databaseUrl)));
}

/**
 * The lines that say the service is ready: where the API is bound, its docs page and the metrics
 * are, and, when `usersExist` is false, what to do next.
 */
export function readyBanner(
  config: Pick<Config, 'METRICS_HOST' | 'METRICS_PORT'>,
  api: Listening,
  usersExist: boolean | undefined,
): string[] {
  const metrics = { host: config.METRICS_HOST, port: config.METRICS_PORT };
  const lines = [
    `Paceline is up: API ${baseUrl(api)}/api/ (${describeListening(api)}), docs ${baseUrl(api)}/api/docs/, ` +
      `metrics ${baseUrl(metrics)}/metrics`,
  ];
  if (usersExist === false) lines.push('next, in another terminal: npm run cli -- user:create NAME');
  return lines;
}

/** Whether the users table has a row: one row read on a connection of its own; undefined when it cannot be told. */
async function anyUserExists(databaseUrl: string): Promise<boolean | undefined> {
  const limits = { connectionTimeoutMs: 2_000, statementTimeoutMs: 2_000, answerDeadlineMs: 2_000 };
  const db = connectDatabase(databaseUrl, 1, 'paceline-banner', limits);
  try {
    return (await db.selectFrom('users').select('id').limit(1).executeTakeFirst()) !== undefined;
  } catch {
    return undefined;
  } finally {
    await db.destroy();
  }
}

/** The addresses that mean every interface, and the loopback one a URL reaches them through. */
const UNSPECIFIED: ReadonlyMap<string, string> = new Map([
  ['0.0.0.0', '127.0.0.1'],
  ['::', '::1'],
]);
const LOOPBACK = /^(127\.|::1$|localhost$)/;

/** `http://host:port`, through loopback when bound to every interface; IPv6 addresses in brackets. */
function baseUrl({ host, port }: Listening): string {
  const reachable = UNSPECIFIED.get(host) ?? host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

/** `listening on 0.0.0.0:8000, every interface`: the bound address, and who can reach it. */
function describeListening({ host, port }: Listening): string {
  const reach = UNSPECIFIED.has(host) ? ', every interface' : LOOPBACK.test(host) ? ', this machine only' : '';
  return `listening on ${host.includes(':') ? `[${host}]` : host}:${port}${reach}`;
}

/** What the throttle does without Redis, by THROTTLE_FAILURE_MODE (docs/throttling.md "When Redis is unreachable"). */
const THROTTLE_WITHOUT_REDIS: Readonly<Record<Config['THROTTLE_FAILURE_MODE'], string>> = {
  local: 'each web worker enforces its share of every rate limit (THROTTLE_FAILURE_MODE=local)',
  open: 'rate limits are not counted (THROTTLE_FAILURE_MODE=open admits every request)',
  closed: 'throttled requests are answered 503 (THROTTLE_FAILURE_MODE=closed)',
};

/**
 * The ready line when a store failed its first check: the service serves anyway (it recovers by
 * itself when the store returns), and says what that means (docs/operations.md "When a store is down").
 */
export function degradedBanner(
  config: Pick<Config, 'THROTTLE_FAILURE_MODE' | 'READ_CACHE_BYTES'>,
  api: Listening,
  down: readonly string[],
): string {
  const meaning: string[] = [];
  if (down.some((name) => name.startsWith('Redis'))) {
    meaning.push(
      THROTTLE_WITHOUT_REDIS[config.THROTTLE_FAILURE_MODE],
      config.READ_CACHE_BYTES > 0
        ? 'writes are refused 503 (the read cache cannot be kept current), reads come from PostgreSQL'
        : 'writes are accepted',
      'reports are recorded and queued once it is back',
    );
  }
  if (down.includes('PostgreSQL')) meaning.push('every read and write is answered 503');
  return (
    `Paceline is up WITHOUT ${down.join(' and ')} (see the line above): ${meaning.join('; ')}; ` +
    `/readyz answers 503 until it is back, API ${baseUrl(api)}/api/ (${describeListening(api)})`
  );
}
