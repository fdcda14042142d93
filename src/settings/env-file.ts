import { existsSync, readFileSync } from 'node:fs';
import { parseEnv } from 'node:util';
import { ConfigError, loadConfig, type Config } from './config.js';

/**
 * The settings of `ENV_FILE` (default `.env` when it exists) that the environment does not set
 * itself: the environment a process was started with wins, as with any `.env` loader. Read at
 * start and again by a reload, so the file is where settings that change without a restart live.
 * @throws ConfigError when a named `ENV_FILE` cannot be read.
 */
export function readEnvFile(env: NodeJS.ProcessEnv): Record<string, string> {
  const path = env.ENV_FILE || '.env';
  if (!env.ENV_FILE && !existsSync(path)) return {};
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(
      `cannot read ENV_FILE ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  const settings: Record<string, string> = {};
  for (const [key, value] of Object.entries(parseEnv(text)))
    if (value !== undefined && (env[key] === undefined || env[key] === '')) settings[key] = value;
  return settings;
}

/** What the primary itself set up at start: a reload cannot change these, a restart must. */
const SET_AT_START = [
  'ROLE',
  'HOST',
  'PORT',
  'METRICS_HOST',
  'METRICS_PORT',
  'WEB_CONCURRENCY',
  'JOB_CONCURRENCY',
  'DATA_DIR',
  'DATABASE_URL',
  'REDIS_URL',
  'REDIS_CLUSTER_NODES',
  'REDIS_PASSWORD',
  'EMBEDDED_PG_PORT',
  'EMBEDDED_REDIS_PORT',
  'CURSOR_SECRET',
  'SHUTDOWN_TIMEOUT_MS',
  'DRAIN_DELAY_MS',
  // Every worker must publish and validate the same head (docs/architecture.md, "Read cache").
  'REDIS_PREFIX',
] as const satisfies ReadonlyArray<keyof Config>;

export type Reread = { ok: true; settings: Record<string, string>; config: Config } | { ok: false; reason: string };

/**
 * The env file read again and validated like a start: its settings when the workers may take
 * them, or why not (a bad value, or a change of something only a restart changes), in one line.
 */
export function rereadEnvFile(env: NodeJS.ProcessEnv, current: Config): Reread {
  try {
    const settings = readEnvFile(env);
    const config = loadConfig({ ...env, ...settings });
    // Compared as JSON: a parsed setting (REDIS_CLUSTER_NODES) is a new object on every read.
    const changed: string[] = SET_AT_START.filter(
      (key) => JSON.stringify(config[key]) !== JSON.stringify(current[key]),
    );
    // A worker without the read cache would write without publishing the head beside workers with it.
    if (config.READ_CACHE_BYTES > 0 !== current.READ_CACHE_BYTES > 0) changed.push('READ_CACHE_BYTES (on or off)');
    if (changed.length > 0)
      return {
        ok: false,
        reason: `${changed.join(', ')} changed: only a restart applies ${changed.length > 1 ? 'them' : 'it'}`,
      };
    return { ok: true, settings, config };
  } catch (error) {
    return { ok: false, reason: (error as Error).message.split('\n')[0]! };
  }
}
