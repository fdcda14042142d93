import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { ENTRY } from './cluster.js';

/** What a run of the command-line tool printed and how it exited. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the compiled command-line tool (`ENTRY.cli`) with `args` in a process of its own, the test's
 * environment plus `env`, and waits for it.
 */
export async function runCli(env: Record<string, string>, args: string[]): Promise<CliRun> {
  const child = spawn(process.execPath, [ENTRY.cli, ...args], {
    env: { ...process.env, LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let [stdout, stderr] = ['', ''];
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, stdout, stderr };
}
