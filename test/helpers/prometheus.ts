import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findFreePort } from '../../src/embedded/ports.js';
import { stopChild } from './stop-child.js';

/** True when `command --version` runs (the tool is installed and on PATH). */
export function hasTool(command: string): boolean {
  return spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Runs promtool with `args` (and `input` on stdin); resolves with its exit code and output. */
export function promtool(args: string[], input?: string): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { input, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

export interface RunningPrometheus {
  base: string;
  pid: number;
  /** One instant query; throws unless Prometheus answers `success`. */
  query(expr: string): Promise<{ resultType: string; result: any }>;
  api<T = any>(path: string): Promise<T>;
  stop(): Promise<void>;
}

/**
 * Starts a real `prometheus` on a free 127.0.0.1 port with its data in `dir`, scraping `targets`
 * (host:port, one per Paceline host) as job `paceline` every second and evaluating `ruleFiles`
 * every second.
 */
export async function startPrometheus(
  dir: string,
  targets: string | string[],
  ruleFiles: string[],
): Promise<RunningPrometheus> {
  await mkdir(join(dir, 'data'), { recursive: true });
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: ruleFiles,
    scrape_configs: [
      {
        job_name: 'paceline',
        metrics_path: '/metrics',
        static_configs: [{ targets: typeof targets === 'string' ? [targets] : targets }],
      },
    ],
  };
  await writeFile(join(dir, 'prometheus.yml'), JSON.stringify(config, null, 2)); // JSON is YAML
  const port = await findFreePort();
  const child = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = once(child, 'exit');
  const base = `http://127.0.0.1:${port}`;
  for (let waited = 0; ; waited += 100) {
    if (child.exitCode !== null) throw new Error(`prometheus exited (code ${child.exitCode}):\n${output}`);
    if (waited > 30_000) throw new Error(`prometheus not ready after 30 s:\n${output}`);
    if (
      await fetch(`${base}/-/ready`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await sleep(100);
  }
  const api = async (path: string) => {
    const body = (await (await fetch(`${base}${path}`)).json()) as { status: string; data: any; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.status} ${body.error ?? ''}`);
    return body.data;
  };
  return {
    base,
    pid: child.pid!,
    api,
    query: (expr) => api(`/api/v1/query?query=${encodeURIComponent(expr)}`),
    stop: () => stopChild(child, exited),
  };
}

/** The values of an instant query's result as numbers (NaN stays NaN). */
export function resultValues(data: { resultType: string; result: any }): number[] {
  if (data.resultType === 'scalar') return [Number(data.result[1])];
  if (data.resultType === 'vector')
    return (data.result as Array<{ value: [number, string] }>).map((s) => Number(s.value[1]));
  return [];
}
