import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { usesEmbeddedRedis, type Config } from '../config.js';
import { startEmbeddedPostgres } from './postgres.js';
import { startRedis } from './redis.js';
import type { RunningService } from './service.js';

/** Where the service's backing stores are, and what to stop on the way out. */
export interface Backends {
  databaseUrl: string;
  /** Unset when the service uses a Redis Cluster (REDIS_CLUSTER_NODES), which the children read themselves. */
  redisUrl?: string;
  cursorSecret: string;
  /** Embedded stores are no longer restarted: shutdown has begun. */
  hold(): void;
  stop(): Promise<void>;
}

/**
 * Uses `DATABASE_URL` / `REDIS_URL` (or `REDIS_CLUSTER_NODES`) when set; otherwise starts an embedded PostgreSQL and a
 * `redis-server` child with their data under `DATA_DIR`, so `npm start` needs nothing else.
 * `CURSOR_SECRET`, when unset, is generated once and kept under `DATA_DIR`.
 */
export async function provideBackends(config: Config, logger: Logger): Promise<Backends> {
  const dataDir = resolve(config.DATA_DIR);
  const started: KeptService[] = [];
  const hold = () => {
    for (const service of started) service.hold();
  };
  const stop = async () => {
    for (const service of started.reverse()) await service.stop().catch(() => {});
  };
  try {
    let databaseUrl = config.DATABASE_URL;
    if (!databaseUrl) {
      logger.info({ port: config.EMBEDDED_PG_PORT }, 'starting embedded PostgreSQL');
      const pg = await keepRunning('PostgreSQL', logger, (onUnexpectedExit) =>
        startEmbeddedPostgres({ dataDir: join(dataDir, 'pg'), port: config.EMBEDDED_PG_PORT, persistent: true, onUnexpectedExit }),
      );
      started.push(pg);
      databaseUrl = pg.url;
    }
    let redisUrl = config.REDIS_URL;
    if (usesEmbeddedRedis(config)) {
      logger.info({ port: config.EMBEDDED_REDIS_PORT }, 'starting embedded Redis');
      const redis = await keepRunning('Redis', logger, (onUnexpectedExit) =>
        startRedis({ dataDir: join(dataDir, 'redis'), port: config.EMBEDDED_REDIS_PORT, persistent: true, onUnexpectedExit }),
      );
      started.push(redis);
      redisUrl = redis.url;
    }
    const cursorSecret = config.CURSOR_SECRET ?? (await readOrCreateSecret(dataDir, logger));
    return { databaseUrl, redisUrl, cursorSecret, hold, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

const RESTART_WINDOW_MS = 60_000;
const MAX_RESTART_DELAY_MS = 30_000;

/** A store kept running by {@link keepRunning}. */
export interface KeptService extends RunningService {
  /** No more restarts from now on (shutdown has begun; the store may exit with the terminal's Ctrl-C). */
  hold(): void;
}

/**
 * Starts an embedded store and starts it again, on the same port and data, whenever it exits
 * on its own (killed, crashed): after 0.5 s, doubling with each exit in the last minute up to
 * 30 s, and again after a failed start. One restart at a time. The children's clients reconnect
 * by themselves, so the service recovers without a restart (and, meanwhile, answers as it does
 * with an external store that is down). `stop()` ends it for good: a pending restart is
 * cancelled, one under way is stopped once started.
 */
export async function keepRunning(
  name: string,
  logger: Logger,
  start: (onUnexpectedExit: (how: string) => void) => Promise<RunningService>,
): Promise<KeptService> {
  let held = false;
  let running = false; // a first start that fails is the caller's error, not a restart
  let restartPending = false;
  let exits: number[] = [];
  let restarting: Promise<void> = Promise.resolve();
  const cancel = new AbortController();
  // Each instance reports its exit once, whether through its exit hook or its failed start.
  const startInstance = () => {
    let reported = false;
    return start((how) => {
      if (reported) return;
      reported = true;
      restart(how);
    });
  };
  const restart = (how: string) => {
    if (held || !running || restartPending) return;
    restartPending = true;
    const now = Date.now();
    exits = [...exits.filter((at) => now - at < RESTART_WINDOW_MS), now];
    const delay = Math.min(MAX_RESTART_DELAY_MS, 500 * 2 ** (exits.length - 1));
    logger.error({ store: name, exit: how, exitsLastMinute: exits.length, restartInMs: delay }, `embedded ${name} exited unexpectedly; restarting it`);
    restarting = (async () => {
      try {
        await sleep(delay, undefined, { signal: cancel.signal });
      } catch {
        return; // held meanwhile
      }
      let started: RunningService;
      try {
        started = await startInstance();
      } catch (error) {
        restartPending = false;
        logger.error({ err: error, store: name }, `embedded ${name} could not be restarted`);
        restart('start failed');
        return;
      }
      restartPending = false;
      if (held) return void (await started.stop());
      current = started;
      logger.warn({ store: name }, `embedded ${name} restarted`);
    })();
  };
  const hold = () => {
    held = true;
    cancel.abort();
  };
  let current = await startInstance();
  running = true;
  return {
    url: current.url,
    hold,
    async stop() {
      hold();
      await restarting;
      await current.stop();
    },
  };
}

async function readOrCreateSecret(dataDir: string, logger: Logger): Promise<string> {
  const file = join(dataDir, 'cursor-secret');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  await writeFile(file, `${secret}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
  logger.warn({ file }, 'CURSOR_SECRET unset: generated one; set the same CURSOR_SECRET on every host behind one load balancer');
  return secret;
}
