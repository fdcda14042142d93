import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { isAlive } from '../../src/cluster/processes.js';

export interface FileResult {
  passed: number;
  failed: number;
  seconds: number;
  /** CPU seconds (user + system) of the file's process and the processes it started and reaped. */
  cpu?: number;
}

interface FileRun {
  output: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  problem?: string;
  cpu?: number;
}

/**
 * bash runs the file (`$0` node, `$1` its compiled copy, test/runner/compile.ts), then reports
 * the CPU its process tree used: the kernel adds a reaped child's CPU, with its own reaped
 * descendants', to the parent's cutime and cstime (fields 16 and 17 of /proc/PID/stat, in clock
 * ticks). The line goes to descriptor 3, apart from the file's output; the exit code is kept.
 */
const MEASURED = [
  '"$0" --enable-source-maps "$1" 3>&-',
  'code=$?',
  'read -ra stat < /proc/$$/stat',
  'echo "$((stat[15] + stat[16])) $(getconf CLK_TCK)" >&3',
  'exit $code',
].join('; ');

const EXIT_GRACE_MS = 10_000;
/** Process groups of the files running now, for Ctrl-C and teardown. */
export const running = new Set<number>();

export function killGroup(pid: number): boolean {
  try {
    process.kill(-pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs one file (`script`, the compiled copy of `file`) and prints its output, then `# ok|FAILED:
 * N passed, M failed in X s (Y s of CPU)`. `live` streams the output as it comes; otherwise it is
 * printed in one piece when the file ends, so files running side by side do not interleave.
 */
export async function runFile(
  file: string,
  script: string,
  env: Record<string, string>,
  live: boolean,
  timeoutMs: number,
): Promise<FileResult> {
  const started = Date.now();
  if (live) console.log(`\n# ${file}`);
  const run = await execute(script, env, timeoutMs, live ? (text) => process.stdout.write(text) : () => {});
  const tail = run.output !== '' && !run.output.endsWith('\n') ? '\n' : '';
  const summary = parseSummary(run.output);
  const failure =
    run.problem ??
    (run.code !== 0 ? `exit ${run.signal ?? `code ${run.code}`}` : summary ? undefined : 'no uvu summary');
  const seconds = (Date.now() - started) / 1000;
  const result: FileResult = { passed: summary?.passed ?? 0, failed: summary?.failed ?? 0, seconds, cpu: run.cpu };
  if (failure !== undefined) result.failed = Math.max(result.failed, 1);
  const verdict = result.failed === 0 ? 'ok' : `FAILED${failure === undefined ? '' : ` (${failure})`}`;
  const cpu = run.cpu === undefined ? '' : ` (${run.cpu.toFixed(1)} s of CPU)`;
  const line = `# ${verdict}: ${result.passed} passed, ${result.failed} failed in ${seconds.toFixed(1)} s${cpu}\n`;
  process.stdout.write(live ? `${tail}${line}` : `\n# ${file}\n${run.output}${tail}${line}`);
  return result;
}

/** Runs one file in its own process group, enforcing the timeouts; `show` receives its output. */
async function execute(
  script: string,
  env: Record<string, string>,
  timeoutMs: number,
  show: (text: string) => void,
): Promise<FileRun> {
  const child = spawn('bash', ['-c', MEASURED, process.execPath, script], {
    env,
    detached: true, // its own process group, so a timeout or Ctrl-C can kill everything it started
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  let cpuLine = '';
  child.stdio[3]!.on('data', (chunk: Buffer) => (cpuLine += chunk.toString('utf8')));
  const pid = child.pid ?? 0;
  running.add(pid);
  const run: FileRun = { output: '', code: null, signal: null };
  const fail = (problem: string) => {
    run.problem = problem;
    killGroup(pid);
  };
  const timeout = setTimeout(() => fail(`timed out after ${timeoutMs} ms`), timeoutMs);
  let grace: NodeJS.Timeout | undefined;
  let lastOutputAt = Date.now();
  const onData = (chunk: Buffer) => {
    lastOutputAt = Date.now();
    const text = chunk.toString('utf8');
    run.output += text;
    show(text);
    // Restarted by any later output, in case uvu runs again.
    if (grace !== undefined || parseSummary(run.output.slice(-(text.length + 200))) !== undefined) {
      clearTimeout(grace);
      grace = setTimeout(() => fail(`still running ${EXIT_GRACE_MS / 1000} s after its summary`), EXIT_GRACE_MS);
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  [run.code, run.signal] = await new Promise((resolve) => child.once('exit', (...exit) => resolve(exit)));
  clearTimeout(timeout);
  clearTimeout(grace);
  await Promise.race([
    new Promise((resolve) => child.once('close', resolve)),
    outputRead(
      () => cpuLine,
      () => lastOutputAt,
    ),
  ]);
  const [ticks, perSecond] = cpuLine.trim().split(' ').map(Number);
  if (Number.isFinite(ticks) && perSecond! > 0) run.cpu = ticks! / perSecond!;
  if (await sweepGroup(pid)) {
    const line = `${run.output.endsWith('\n') ? '' : '\n'}# it left processes running (a server not stopped?): killed them\n`;
    run.output += line;
    show(line);
  }
  running.delete(pid);
  return run;
}

/**
 * Resolves once what the file wrote before it exited has been read: bash's CPU line is in and the output has been
 * quiet a moment (the pipes hold it all at the exit). Their close, which would say so too, can wait on a process
 * that inherited them and is no longer the file's; at most a second.
 */
async function outputRead(cpuLine: () => string, lastOutputAt: () => number): Promise<void> {
  for (let waited = 0; waited < 1_000; waited += 20) {
    if (cpuLine().includes('\n') && Date.now() - lastOutputAt() >= 100) return;
    await sleep(20);
  }
}

/**
 * Kills what remains of a finished file's process group. Helpers such as esbuild's service
 * exit on their own a moment after the file does, so only what outlives a short wait counts.
 */
async function sweepGroup(pid: number): Promise<boolean> {
  for (let waited = 0; waited < 3_000; waited += 50) {
    if (!isAlive(-pid)) return false;
    await sleep(50);
  }
  return killGroup(pid);
}

/** The last uvu summary in the output: `Total: n` then `Passed: n` (skipped tests are not in Total). */
function parseSummary(output: string): { passed: number; failed: number } | undefined {
  const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
  const last = [...plain.matchAll(/Total:\s+(\d+)\s*\n\s*Passed:\s+(\d+)/g)].at(-1);
  if (last === undefined) return undefined;
  const [total, passed] = [Number(last[1]), Number(last[2])];
  return { passed, failed: total - passed };
}
