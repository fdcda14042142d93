/**
 * Reading the settings: loadConfig checks the environment against the settings table
 * (config-schema.ts) and the rules between settings, and returns the frozen Config; below it, the
 * values derived from a Config (usesEmbeddedRedis, proxyTrustWarning, childDrainBudgetMs).
 */
import type { z } from 'zod';
import { SECRET_KEYS, settingsSchema } from './config-schema.js';

type Parsed = z.output<typeof settingsSchema>;

/** Every setting Paceline reads, validated once at start. */
export type Config = Readonly<Parsed>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Reads the configuration from an environment map. Empty strings count as unset, so
 * `PORT= npm start` uses the default. A bad value throws a ConfigError whose message is one
 * line naming the variable, its value and what was expected.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(
    Object.keys(settingsSchema.shape)
      .filter((key) => env[key] !== undefined && env[key] !== '')
      .map((key) => [key, env[key]]),
  );
  const result = settingsSchema.safeParse(present);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const key = String(issue.path[0]);
    // The line lands in logs: never echo a value that may carry a credential.
    const shown = SECRET_KEYS.has(key) ? ' (value not shown)' : `=${JSON.stringify(env[key] ?? '')}`;
    throw new ConfigError(`invalid ${key}${shown}: ${issue.message}`);
  }
  const config = result.data;
  if (config.REDIS_URL && config.REDIS_CLUSTER_NODES) {
    throw new ConfigError(
      'invalid REDIS_CLUSTER_NODES (value not shown): set REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (a Redis ' +
        'Cluster), not both',
    );
  }
  // The first {…} of a key is its hash tag: one in the prefix would put every key in one slot.
  if (config.REDIS_CLUSTER_NODES && /[{}]/.test(config.REDIS_PREFIX)) {
    throw new ConfigError(
      `invalid REDIS_PREFIX=${JSON.stringify(config.REDIS_PREFIX)}: must not contain { or } with REDIS_CLUSTER_NODES ` +
        `(it would put every key in one hash slot)`,
    );
  }
  const both = config.THROTTLE_SHADOW_SCOPES.find((scope) => Object.hasOwn(config.THROTTLE_SHADOW_RATES, scope));
  if (both !== undefined) {
    throw new ConfigError(
      `invalid THROTTLE_SHADOW_RATES=${JSON.stringify(env.THROTTLE_SHADOW_RATES)}: the ${both} scope runs wholly in ` +
        'shadow (THROTTLE_SHADOW_SCOPES), with its own rate; give it no shadow rate',
    );
  }
  const inShadow = Object.keys(config.THROTTLE_CONCURRENCY).find((s) => config.THROTTLE_SHADOW_SCOPES.includes(s));
  if (inShadow !== undefined) {
    throw new ConfigError(
      `invalid THROTTLE_CONCURRENCY=${JSON.stringify(env.THROTTLE_CONCURRENCY)}: the ${inShadow} scope runs ` +
        'wholly in shadow (THROTTLE_SHADOW_SCOPES), which never refuses; give it no concurrency limit',
    );
  }
  checkRulesBetweenSettings(config);
  // A replica may answer only what the published head proves current, and only the read cache publishes it.
  if (config.DATABASE_REPLICA_URLS.length > 0 && config.READ_CACHE_BYTES === 0) {
    throw new ConfigError(
      'invalid DATABASE_REPLICA_URLS (value not shown): replicas need the head the read cache publishes; set ' +
        'READ_CACHE_BYTES above 0',
    );
  }
  return Object.freeze(config);
}

/**
 * Settings that cannot all hold are refused, one line naming the setting that breaks the rule
 * (docs/configuration.md "Rules between settings"). Each applies at start and on a reload.
 */
function checkRulesBetweenSettings(config: Parsed): void {
  const refuse = (key: keyof Parsed, rule: string) => {
    throw new ConfigError(`invalid ${key}=${JSON.stringify(String(config[key]))}: ${rule}`);
  };
  if (config.PAGE_SIZE > config.MAX_PAGE_SIZE)
    refuse('PAGE_SIZE', `must not exceed MAX_PAGE_SIZE (${config.MAX_PAGE_SIZE})`);
  if (config.ADMISSION_LIMIT_MIN > config.ADMISSION_LIMIT_MAX)
    refuse('ADMISSION_LIMIT_MIN', `must not exceed ADMISSION_LIMIT_MAX (${config.ADMISSION_LIMIT_MAX})`);
  // A request whose body is still arriving must not stop counting before the server gives up on it.
  const limited = Object.keys(config.THROTTLE_CONCURRENCY).length > 0;
  if (limited && config.THROTTLE_CONCURRENCY_EXPIRY_MS < config.HTTP_REQUEST_TIMEOUT_MS)
    refuse(
      'THROTTLE_CONCURRENCY_EXPIRY_MS',
      `must not be below HTTP_REQUEST_TIMEOUT_MS (${config.HTTP_REQUEST_TIMEOUT_MS}) ` +
        'while THROTTLE_CONCURRENCY is set',
    );
  // A plan's requests in progress belong to a plan of rates: a name only there is a typo, not a plan.
  const undeclared = Object.keys(config.THROTTLE_PLAN_CONCURRENCY).find(
    (plan) => !Object.hasOwn(config.THROTTLE_PLANS, plan),
  );
  if (undeclared !== undefined)
    throw new ConfigError(
      `invalid THROTTLE_PLAN_CONCURRENCY: it names plan "${undeclared}", which THROTTLE_PLANS does not declare`,
    );
  // Node refuses a server whose headers may take longer than the whole request.
  if (config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS)
    refuse('HTTP_HEADERS_TIMEOUT_MS', `must not exceed HTTP_REQUEST_TIMEOUT_MS (${config.HTTP_REQUEST_TIMEOUT_MS})`);
  // A stop gives a child this long to finish its requests: a statement allowed longer would be cut by it.
  const drainMs = childDrainBudgetMs(config);
  if (config.DATABASE_STATEMENT_TIMEOUT_MS >= drainMs)
    refuse(
      'DATABASE_STATEMENT_TIMEOUT_MS',
      `must be below the ${drainMs} ms a stop gives a worker to drain (SHUTDOWN_TIMEOUT_MS ` +
        `${config.SHUTDOWN_TIMEOUT_MS} less what the primary keeps); raise SHUTDOWN_TIMEOUT_MS or lower this`,
    );
  // Two servers of one host cannot listen on one port.
  const ports: Array<[keyof Parsed, number]> = [
    ['PORT', config.ROLE === 'jobs' ? 0 : config.PORT],
    ['METRICS_PORT', config.METRICS_PORT],
    ['EMBEDDED_PG_PORT', config.DATABASE_URL ? 0 : config.EMBEDDED_PG_PORT],
    ['EMBEDDED_REDIS_PORT', usesEmbeddedRedis(config) ? config.EMBEDDED_REDIS_PORT : 0],
  ];
  ports.forEach(([key, port], index) => {
    const taken = ports.slice(0, index).find(([, other]) => port > 0 && other === port);
    if (taken) refuse(key, `${taken[0]} uses port ${port} already`);
  });
}

/** True when the primary runs its own `redis-server`: neither REDIS_URL nor REDIS_CLUSTER_NODES is set. */
export function usesEmbeddedRedis(config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'>): boolean {
  return !config.REDIS_URL && !config.REDIS_CLUSTER_NODES;
}

/**
 * The warning a start logs when forwarded headers are believed from any peer: proxies are
 * trusted (TRUST_PROXY_HOPS > 0) but TRUSTED_PROXIES does not say which.
 */
export function proxyTrustWarning(
  config: Pick<Config, 'ROLE' | 'TRUST_PROXY_HOPS' | 'TRUSTED_PROXIES'>,
): string | undefined {
  if (config.ROLE === 'jobs' || config.TRUST_PROXY_HOPS === 0 || config.TRUSTED_PROXIES !== undefined) return undefined;
  return (
    `TRUST_PROXY_HOPS=${config.TRUST_PROXY_HOPS} without TRUSTED_PROXIES: X-Forwarded-For, -Proto and -Host are ` +
    `believed from any peer, ` +
    'so a client that reaches the port directly chooses its own address; set TRUSTED_PROXIES to your proxies'
  );
}

/**
 * How long a draining child may take before the primary kills it: SHUTDOWN_TIMEOUT_MS less what
 * the primary keeps for itself afterwards (stopping the embedded stores), so the whole tree exits
 * within SHUTDOWN_TIMEOUT_MS.
 */
export function childDrainBudgetMs(config: Pick<Config, 'SHUTDOWN_TIMEOUT_MS'>): number {
  return config.SHUTDOWN_TIMEOUT_MS - Math.min(2_500, Math.floor(config.SHUTDOWN_TIMEOUT_MS / 4));
}
