import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const steps: (() => unknown)[] = [];
let stopping: Promise<void> | undefined;

/** One line on stderr, where a benchmark's progress goes (stdout carries its table). */
export const log = (line: string): void => void process.stderr.write(`${line}\n`);

/** Seconds since `began` (a Date.now() time). */
export const secondsSince = (began: number): number => (Date.now() - began) / 1000;

/** Registers a step that stops or removes something the benchmark started; the steps run newest first. */
export function defer(step: () => unknown): void {
  steps.push(step);
}

/** Runs every deferred step once, however often it is called (a signal may arrive mid-stop). */
function stopAll(): Promise<void> {
  stopping ??= (async () => {
    for (const step of steps.reverse())
      await Promise.resolve()
        .then(step)
        .catch((error: unknown) => log(String(error)));
  })();
  return stopping;
}

/**
 * A benchmark's entry point: runs `main`, then whatever it deferred, on success, failure, SIGINT or SIGTERM (Ctrl-C
 * reaches the process twice, from the terminal and from npm: the second does not end it mid-stop). `main` may
 * return the exit status; a failure exits 1, a signal 130.
 */
export async function runBench(name: string, main: () => Promise<number | void>): Promise<void> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      if (stopping === undefined) log(`\n${signal}: stopping what the ${name} benchmark started`);
      void stopAll().finally(() => process.exit(130));
    });
  try {
    const code = await main();
    if (typeof code === 'number') process.exitCode = code;
  } catch (error) {
    // Once a signal stops the run, what fails after (a sender losing its server) is the stop, not a failure.
    if (stopping === undefined)
      log(`${name} benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  } finally {
    await stopAll();
  }
}

/** A temporary directory PostgreSQL and Redis may enter when run as root (they switch accounts), removed at the end. */
export async function scratchDir(name: string): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), `paceline-${name}-`));
  await chmod(root, 0o755);
  defer(() => rm(root, { recursive: true, force: true }));
  return root;
}

/**
 * Forks the script at `url` under this process's loader (tsx) with `args`, talking over IPC: a load generator or
 * client in a process of its own. Disconnected and stopped when the benchmark ends.
 */
export async function forkScript(url: URL, args: string[] = []): Promise<ChildProcess> {
  const child = fork(fileURLToPath(url), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  defer(() => {
    if (child.connected) child.disconnect();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  });
  await once(child, 'spawn');
  return child;
}
