import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findFreePort } from '../../src/embedded/ports.js';
import { scriptArgs } from './node-script.js';

export interface VerifyRun {
  code: number | null;
  output: string;
  report: {
    verdict: string;
    requests: number;
    checks: { name: string; verdict: string; summary: string; evidence: Record<string, any>; requests: number }[];
  };
}

/** Runs `npm run verify`'s entry point as a user would, with a deadline; reads the report it wrote. */
export async function runVerify(
  base: string,
  args: string[],
  reportDir: string,
  deadlineMs = 180_000,
): Promise<VerifyRun> {
  const child = spawn(
    process.execPath,
    [...scriptArgs('clients/verify/main.ts'), base, ...args, '--report', reportDir],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
  const [code] = await once(child, 'exit');
  clearTimeout(timer);
  const report = JSON.parse(await readFile(join(reportDir, 'report.json'), 'utf8').catch(() => '{"checks":[]}'));
  return { code, output, report };
}

/** The named check of a run, or a failure that shows the run's output. */
export function checkOf(run: VerifyRun, name: string) {
  const check = run.report.checks.find((c) => c.name === name);
  if (check === undefined) throw new Error(`no "${name}" check in the report; verify printed:\n${run.output}`);
  return check;
}

/**
 * Starts test/helpers/verify-faulty-service.ts (or another `script` taking the same arguments, such as
 * test/helpers/verify-weighted-service.ts) with `fault` (docs/verify.md "It catches real faults") on a free port.
 */
export async function startFaulty(
  fault: string,
  script = 'test/helpers/verify-faulty-service.ts',
): Promise<{ base: string; stop: () => Promise<void> }> {
  const port = await findFreePort();
  const child = spawn(process.execPath, [...scriptArgs(script), fault, String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
    child.once('exit', (code) => reject(new Error(`${fault} service exited with ${code}`)));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  await listening.finally(() => clearTimeout(timer));
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  };
  return { base: `http://127.0.0.1:${port}`, stop };
}
