import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { usesEmbeddedRedis, type Config } from '../settings/config.js';
import { isAlive } from './processes.js';

/** What `DATA_DIR/paceline.pid` says about the primary serving that directory. */
export interface Instance {
  pid: number;
  dataDir: string;
  /** Setting name → port, for every port this instance holds (PORT, METRICS_PORT, the embedded stores'). */
  ports: Record<string, number>;
  startedAt: string;
  /** Signals the primary answers beyond the usual ones; `SIGUSR2` ends a primary that does not (`cli throttled`). */
  answers?: string[];
  /** It records each reload's outcome for `cli reload` (reload.ts); a primary of an earlier release does not. */
  recordsReloads?: boolean;
}

const INSTANCE_FILE = 'paceline.pid';

function instanceFilePath(config: Pick<Config, 'DATA_DIR'>): string {
  return join(resolve(config.DATA_DIR), INSTANCE_FILE);
}

/** The ports a primary started with `config` holds, by setting name. */
function instancePorts(config: Config): Record<string, number> {
  const ports: Record<string, number> = {};
  if (config.ROLE !== 'jobs') ports.PORT = config.PORT;
  if (config.METRICS_PORT > 0) ports.METRICS_PORT = config.METRICS_PORT;
  if (!config.DATABASE_URL) ports.EMBEDDED_PG_PORT = config.EMBEDDED_PG_PORT;
  if (usesEmbeddedRedis(config)) ports.EMBEDDED_REDIS_PORT = config.EMBEDDED_REDIS_PORT;
  return ports;
}

/** The running instance recorded under DATA_DIR; undefined when there is none or its primary is gone. */
export function runningInstance(config: Pick<Config, 'DATA_DIR'>): Instance | undefined {
  let instance: Instance;
  try {
    instance = JSON.parse(readFileSync(instanceFilePath(config), 'utf8')) as Instance;
  } catch {
    return undefined;
  }
  if (!Number.isInteger(instance.pid) || instance.pid <= 0 || instance.pid === process.pid || !isAlive(instance.pid))
    return undefined;
  return instance;
}

/** `primary PID 4242 (PORT 8000, METRICS_PORT 9464, …)`. */
export function describeInstance(instance: Instance): string {
  const ports = Object.entries(instance.ports)
    .map(([name, port]) => `${name} ${port}`)
    .join(', ');
  return `primary PID ${instance.pid}${ports ? ` (${ports})` : ''}`;
}

/** Records this process as DATA_DIR's primary; the returned function removes the record (once, if still ours). */
export function writeInstanceFile(config: Config): () => void {
  const path = instanceFilePath(config);
  mkdirSync(resolve(config.DATA_DIR), { recursive: true });
  const instance: Instance = {
    pid: process.pid,
    dataDir: resolve(config.DATA_DIR),
    ports: instancePorts(config),
    startedAt: new Date().toISOString(),
    answers: ['SIGUSR2'],
    recordsReloads: true,
  };
  writeFileSync(path, `${JSON.stringify(instance)}\n`);
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    try {
      if ((JSON.parse(readFileSync(path, 'utf8')) as Instance).pid === process.pid) rmSync(path);
    } catch {
      // Gone already.
    }
  };
  process.once('exit', remove);
  return remove;
}
