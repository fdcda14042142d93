import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { childDrainBudgetMs, type Config } from '../settings/config.js';
import { rereadEnvFile } from '../settings/env-file.js';
import { describeChanges, type ReadSettings } from '../settings/setting-changes.js';
import { firstLineOf } from '../stores/store-errors.js';
import type { MetricsHub } from './metrics-hub.js';
import type { Supervisor } from './supervisor.js';

/** One reload (SIGHUP) as the primary recorded it for `cli reload` (docs/operations.md "Processes and signals"). */
export interface ReloadRecord {
  /** This primary's reloads, counted from 1. */
  seq: number;
  /** `replacing` until every web worker is replaced (`applied`) or a new one exits first (`abandoned`). */
  state: 'replacing' | 'applied' | 'refused' | 'abandoned';
  /** Each setting the reload changes, as describeChanges writes it. */
  changed: string[];
  /** Why it was refused or abandoned. */
  reason?: string;
  /** The web workers it replaces, and the longest that may take (each one's start and drain). */
  web: number;
  withinMs: number;
  startedAt: number;
  endedAt?: number;
}

/** What DATA_DIR/reload-PID.json holds: the last reloads of the primary PID, oldest first. */
interface ReloadFile {
  pid: number;
  reloads: ReloadRecord[];
}

const KEPT = 20;
/** How long a new web worker may take to say it is ready, on top of its predecessor's drain. */
const START_ALLOWANCE_MS = 30_000;

/** Per primary, so that primaries sharing a DATA_DIR (both store URLs given) never write one file. */
function reloadFilePath(config: Pick<Config, 'DATA_DIR'>, pid: number): string {
  return join(resolve(config.DATA_DIR), `reload-${pid}.json`);
}

/** The reloads primary `pid` recorded, oldest first; none while it has recorded none. */
export function readReloads(config: Pick<Config, 'DATA_DIR'>, pid: number): ReloadRecord[] {
  try {
    return (JSON.parse(readFileSync(reloadFilePath(config, pid), 'utf8')) as ReloadFile).reloads;
  } catch {
    return [];
  }
}

/**
 * SIGHUP: settings read again and checked like a start; bad ones leave the workers as they are.
 * Each reload's outcome is logged, and recorded under DATA_DIR (removed when the primary exits)
 * for `cli reload`, which waits for it.
 */
export function reloadOnHangup(parts: {
  config: Config;
  startEnv: Record<string, string | undefined>;
  logger: Logger;
  supervisor: Supervisor;
  stores: Record<string, string>;
  metrics: MetricsHub;
}): void {
  const { logger, supervisor, stores, metrics } = parts;
  let current: ReadSettings = { config: parts.config, env: parts.startEnv };
  const record = recorder(parts.config, logger);
  process.on('SIGHUP', () => {
    const reread = rereadEnvFile(process.env, current.config);
    metrics.countReload(reread.ok ? 'applied' : 'refused');
    const web = current.config.ROLE === 'jobs' ? 0 : current.config.WEB_CONCURRENCY;
    const withinMs = web * (START_ALLOWANCE_MS + childDrainBudgetMs(current.config));
    const started = { changed: [] as string[], web, withinMs, startedAt: Date.now() };
    if (!reread.ok) {
      logger.error(`reload refused, the workers keep their settings: ${reread.reason}`);
      return void record({ ...started, state: 'refused', reason: reread.reason });
    }
    const next = { config: reread.config, env: { ...process.env, ...reread.settings } };
    const changed = describeChanges(current, next);
    current = next;
    supervisor.setEnv({ ...reread.settings, ...stores });
    logger.info({ changed }, 'SIGHUP: settings read again; replacing web workers one at a time');
    const seq = record({ ...started, changed, state: 'replacing' });
    void supervisor.reload('web').then((replaced) => {
      if (replaced) logger.info('web workers replaced');
      const reason = 'a new web worker exited before it was ready; the old ones keep serving (see the log)';
      record({
        ...started,
        changed,
        seq,
        endedAt: Date.now(),
        ...(replaced ? { state: 'applied' } : { state: 'abandoned', reason }),
      });
    });
  });
}

/** Writes a record (a new one, or `seq`'s again) and returns its seq; a failed write is logged, never thrown. */
function recorder(config: Config, logger: Logger) {
  const path = reloadFilePath(config, process.pid);
  const file: ReloadFile = { pid: process.pid, reloads: [] };
  let last = 0;
  process.once('exit', () => rmSync(path, { force: true }));
  return (entry: Omit<ReloadRecord, 'seq'> & { seq?: number }): number => {
    const seq = entry.seq ?? ++last;
    const others = file.reloads.filter((other) => other.seq !== seq);
    file.reloads = [...others, { ...entry, seq }].sort((a, b) => a.seq - b.seq).slice(-KEPT);
    try {
      mkdirSync(resolve(config.DATA_DIR), { recursive: true });
      writeFileSync(`${path}.tmp`, `${JSON.stringify(file)}\n`);
      renameSync(`${path}.tmp`, path);
    } catch (error) {
      logger.warn({ cause: firstLineOf(error) }, 'could not record the reload under DATA_DIR for cli reload');
    }
    return seq;
  };
}
