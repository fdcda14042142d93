import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { findFreePort } from '../../../src/embedded/ports.js';
import { NODE_MAJOR } from '../../../src/settings/node-runtime.js';
import { ENTRY } from '../../../test/helpers/cluster.js';
import { childPids } from '../read-path/processes.js';

/** A Node.js binary the bench runs things on: its path and the version it reports itself. */
export interface Runtime {
  /** The line, as the table names it: "20" or "24". */
  line: string;
  binary: string;
  version: string;
}

/** A process tree started on one runtime: a primary and the workers it forked. */
export interface Tree {
  base: string;
  /** Where the service serves /metrics (0 for a bare server). */
  metricsPort: number;
  primary: number;
  /** The last 20,000 characters it wrote to stderr (the service's stdout, a line per request, is read and dropped). */
  output(): string;
  /** SIGTERM, SIGKILL after 30 s; resolves once the primary has exited. Safe twice. */
  stop(): Promise<void>;
}

const READY_MS = 120_000;
const STOP_MS = 30_000;
const BARE_SERVER = fileURLToPath(new URL('../read-path/bare-server.mjs', import.meta.url));

/** The runtime behind `binary`, as the binary itself reports it. */
export function describeRuntime(binary: string): Runtime {
  const version = execFileSync(binary, ['-p', 'process.version'], { encoding: 'utf8' }).trim();
  return { line: version.slice(1).split('.')[0]!, binary, version };
}

/**
 * `<runtime> dist/src/main.js` with read-path's startService settings (2 web workers, no job worker, LOG_LEVEL=info)
 * and `env`; its primary forks the workers with the same binary. A runtime of another line than the project's gets
 * PACELINE_RUNTIME_CHECK=off, the one way past the entry point's check. Resolves once /readyz answers 200 and both
 * workers run on the binary asked for.
 */
export async function startServiceOn(runtime: Runtime, env: Record<string, string>): Promise<Tree> {
  const port = await findFreePort();
  const metricsPort = await findFreePort();
  const tree = spawnTree(runtime, [ENTRY.main], port, metricsPort, {
    ...(runtime.line === String(NODE_MAJOR) ? {} : { PACELINE_RUNTIME_CHECK: 'off' }),
    WEB_CONCURRENCY: '2',
    JOB_CONCURRENCY: '0',
    ROLE: 'web',
    LOG_LEVEL: 'info',
    ...env,
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    METRICS_HOST: '127.0.0.1',
    HOST: '127.0.0.1',
  });
  const ready = () =>
    fetch(`${tree.base}/readyz`).then(
      (response) => response.status === 200 && childPids(tree.primary).length >= 2,
      () => false,
    );
  await waitFor(tree, ready);
  await checkBinary(tree, runtime);
  return tree;
}

/** The read-path bench's bare node:http (or bare Koa) cluster of 2 workers answering `bodyFile`'s bytes, on `runtime`. */
export async function startBareOn(
  runtime: Runtime,
  bodyFile: string,
  contentType: string,
  framework: 'node' | 'koa',
): Promise<Tree> {
  const port = await findFreePort();
  const args = [BARE_SERVER, String(port), '2', bodyFile, contentType, framework];
  const tree = spawnTree(runtime, args, port, 0, {});
  await waitFor(tree, () => Promise.resolve(tree.listening()));
  await checkBinary(tree, runtime);
  return tree;
}

function spawnTree(runtime: Runtime, args: string[], port: number, metricsPort: number, env: Record<string, string>) {
  const child: ChildProcess = spawn(runtime.binary, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let listening = false;
  // The bare server says "listening" on stdout; the service writes its access log there, read and dropped.
  child.stdout!.on('data', (chunk: Buffer) => (listening ||= chunk.includes('listening')));
  child.stderr!.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
  const exited = once(child, 'exit');
  child.on('error', (error) => (output += `\n${error.message}`));
  return {
    child,
    base: `http://127.0.0.1:${port}`,
    metricsPort,
    primary: child.pid ?? -1,
    output: () => output,
    listening: () => listening,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function waitFor(tree: ReturnType<typeof spawnTree>, ready: () => Promise<boolean>): Promise<void> {
  for (let waited = 0; !(await ready()); waited += 200) {
    if (tree.child.exitCode !== null || waited > READY_MS) {
      await tree.stop();
      throw new Error(`${tree.child.spawnargs.join(' ')} did not start:\n${tree.output()}`);
    }
    await sleep(200);
  }
}

/** The binary a running process executes, from /proc (undefined once it has exited). */
export function executableOf(pid: number): string | undefined {
  try {
    return realpathSync(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    return undefined;
  }
}

/** Stops a tree whose primary or any worker runs on another binary than `runtime`'s. */
async function checkBinary(tree: ReturnType<typeof spawnTree>, runtime: Runtime): Promise<void> {
  const wanted = realpathSync(runtime.binary);
  const pids = [tree.primary, ...childPids(tree.primary)];
  const wrong = pids.filter((pid) => executableOf(pid) !== wanted);
  if (wrong.length === 0) return;
  const found = wrong.map((pid) => `${pid} runs ${executableOf(pid)}`).join(', ');
  await tree.stop();
  throw new Error(`${found}, not ${wanted}`);
}

/** The Node.js version the service reports itself (prom-client's nodejs_version_info on its metrics port). */
export async function reportedVersion(tree: Tree): Promise<string> {
  const text = await fetch(`http://127.0.0.1:${tree.metricsPort}/metrics`).then(
    (response) => response.text(),
    () => '',
  );
  return /^nodejs_version_info\{[^}]*version="(v[\d.]+)"/m.exec(text)?.[1] ?? 'not reported';
}

/** CPU time (user + system, every thread) the tree's primary and workers have used, in seconds. */
export function cpuSeconds(tree: Tree): number {
  return [tree.primary, ...childPids(tree.primary)].reduce((sum, pid) => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return sum + (Number(fields[11]) + Number(fields[12])) / 100; // Linux' USER_HZ
    } catch {
      return sum; // exited
    }
  }, 0);
}
