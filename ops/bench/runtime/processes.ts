import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { findFreePort } from '../../../src/embedded/ports.js';
import { NODE_MAJOR } from '../../../src/settings/node-runtime.js';
import { ENTRY } from '../../../test/helpers/cluster.js';
import { childPids, executableOf, startTree, type Tree } from '../harness/service.js';

/** A Node.js binary the bench runs things on: its path and the version it reports itself. */
export interface Runtime {
  /** The line, as the table names it: "20" or "24". */
  line: string;
  binary: string;
  version: string;
}

/** A service's tree, with where it serves /metrics. */
export type Service = Tree & { metricsPort: number };

/** The runtime behind `binary`, as the binary itself reports it. */
export function describeRuntime(binary: string): Runtime {
  const version = execFileSync(binary, ['-p', 'process.version'], { encoding: 'utf8' }).trim();
  return { line: version.slice(1).split('.')[0]!, binary, version };
}

/**
 * `<runtime> dist/src/main.js` with the harness's startService settings (2 web workers, no job worker,
 * LOG_LEVEL=info) and `env`; its primary forks the workers with the same binary. A runtime of another line than
 * the project's gets PACELINE_RUNTIME_CHECK=off, the one way past the entry point's check. Resolves once /readyz
 * answers 200 and both workers run on the binary asked for.
 */
export async function startServiceOn(runtime: Runtime, env: Record<string, string>): Promise<Service> {
  const [port, metricsPort] = [await findFreePort(), await findFreePort()];
  const tree = await startTree(
    runtime.binary,
    [ENTRY.main],
    port,
    {
      ...(runtime.line === String(NODE_MAJOR) ? {} : { PACELINE_RUNTIME_CHECK: 'off' }),
      ...{ WEB_CONCURRENCY: '2', JOB_CONCURRENCY: '0', ROLE: 'web', LOG_LEVEL: 'info', ...env },
      ...{ PORT: String(port), METRICS_PORT: String(metricsPort), METRICS_HOST: '127.0.0.1', HOST: '127.0.0.1' },
    },
    (t) =>
      fetch(`${t.base}/readyz`).then(
        (response) => response.status === 200 && childPids(t.primary).length >= 2,
        () => false,
      ),
  );
  checkBinary(tree, runtime);
  return { ...tree, metricsPort };
}

/** Fails when a tree's primary or any worker runs on another binary than `runtime`'s. */
export function checkBinary(tree: Tree, runtime: Runtime): void {
  const wanted = realpathSync(runtime.binary);
  const wrong = [tree.primary, ...childPids(tree.primary)].filter((pid) => executableOf(pid) !== wanted);
  if (wrong.length > 0)
    throw new Error(`${wrong.map((pid) => `${pid} runs ${executableOf(pid)}`).join(', ')}, not ${wanted}`);
}

/** The Node.js version the service reports itself (prom-client's nodejs_version_info on its metrics port). */
export async function reportedVersion(tree: Service): Promise<string> {
  const text = await fetch(`http://127.0.0.1:${tree.metricsPort}/metrics`).then(
    (response) => response.text(),
    () => '',
  );
  return /^nodejs_version_info\{[^}]*version="(v[\d.]+)"/m.exec(text)?.[1] ?? 'not reported';
}
