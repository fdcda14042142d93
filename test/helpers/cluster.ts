import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { findFreePort } from '../../src/stores/ports.js';

export interface RunningCluster {
  base: string;
  metricsBase: string;
  port: number;
  metricsPort: number;
  child: ChildProcess;
  /** Everything the tree printed so far (stdout and stderr). */
  output(): string;
  /** Sends `signal` to the primary and resolves with its exit code (null if killed). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
}

/**
 * Starts the real entry point (`src/main.ts`, node:cluster primary and its children) with `env`
 * on free ports and waits until `/readyz` answers 200 through the shared socket. With `viaNpm`
 * it is started as a user does, by `npm start`, and `child` is the npm process.
 */
export async function startCluster(env: Record<string, string>, readyTimeoutMs = 60_000, viaNpm = false): Promise<RunningCluster> {
  const port = Number(env.PORT ?? (await findFreePort()));
  const metricsPort = Number(env.METRICS_PORT ?? (await findFreePort()));
  const [command, args] = viaNpm ? ['npm', ['start', '--silent']] : [process.execPath, ['--import', 'tsx', 'src/main.ts']];
  const child = spawn(command, args, {
    env: { ...process.env, LOG_LEVEL: 'warn', JOB_CONCURRENCY: '0', ...env, PORT: String(port), METRICS_PORT: String(metricsPort), METRICS_HOST: '127.0.0.1', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const base = `http://127.0.0.1:${port}`;
  const exited = once(child, 'exit');
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`cluster exited during start (code ${child.exitCode}):\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`cluster not ready after ${readyTimeoutMs} ms:\n${output}`);
    }
    const ready = await fetch(`${base}/readyz`).then((r) => r.status === 200, () => false);
    if (ready) break;
    await sleep(200);
  }
  return {
    base,
    metricsBase: `http://127.0.0.1:${metricsPort}`,
    port,
    metricsPort,
    child,
    output: () => output,
    async stop(signal = 'SIGTERM', timeoutMs = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const [code] = await exited;
      clearTimeout(timer);
      return code as number | null;
    },
  };
}

/**
 * The settings that point a cluster at the test stores: `databaseUrl`, the runner's Redis with a
 * fresh key prefix for `label`, and a fixed cursor secret.
 */
export function testStoresEnv(label: string, databaseUrl: string): Record<string, string> {
  const redisUrl = process.env.TEST_REDIS_URL;
  if (!redisUrl) throw new Error('TEST_REDIS_URL is not set: run tests with `npm test`');
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_PREFIX: `test:${label}:${randomBytes(4).toString('hex')}:`,
    CURSOR_SECRET: `${label}-test-secret-0123456789`,
  };
}
