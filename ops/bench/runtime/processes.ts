import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findFreePort } from '../../../src/embedded/ports.js';
import { NODE_MAJOR } from '../../../src/settings/node-runtime.js';
import { ENTRY } from '../../../test/helpers/cluster.js';
import { checkRow, loadOf, PAGE_1_ROW, POST_SCRIPT, rowSpecs, type RowSpec } from '../read-path/rows.js';
import type { Load } from '../harness/send.js';
import { childPids, executableOf, startBare, startTree, type Stores, type Tree } from '../harness/service.js';

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

/** One runtime's processes, and what the write row sends. */
export interface Targets {
  trees: Record<'bare' | 'bareKoa' | 'service', Tree>;
  writerToken: string;
  /** The read-path bench's wrk Lua script that makes each request a POST with a JSON body. */
  postScript: string;
}

export type Row = RowSpec & { server: keyof Targets['trees'] };

/** The read-path bench's rows that run on both runtimes, as it loads them. */
const NAMES = [rowSpecs(0)[0]!.name, rowSpecs(0)[1]!.name, PAGE_1_ROW, 'health', 'writes, authenticated'];
export const ROWS = rowSpecs(0).filter((spec) => NAMES.includes(spec.name)) as Row[];

/** What wrk sends for `row` to the runtime of `targets`. */
export const loadOfRow = (row: Row, { trees, writerToken, postScript }: Targets): Load =>
  loadOf(row, {
    bases: { bare: trees.bare.base, bareKoa: trees.bareKoa.base, service: trees.service.base },
    writerToken,
    postScript,
    tasks: 0,
  });

/**
 * Both services, then both runtimes' bare servers answering the bytes of page 1 as our runtime's service sends it;
 * every row's request sent once on each. The services take node:cluster's round robin on both runtimes: the default
 * door (CONNECTION_DOOR=reuseport) asks listen() for `reusePort`, which Node.js 20 does not have (22.12 and 23.1
 * brought it), so there a second web worker's listen fails with EADDRINUSE and the worker is restarted over and over.
 */
export async function startTargets(runtimes: Runtime[], stores: Stores, root: string, writerToken: string) {
  const services = new Map<Runtime, Service>();
  for (const runtime of runtimes)
    services.set(
      runtime,
      await startServiceOn(runtime, {
        DATABASE_URL: stores.databaseUrl,
        REDIS_URL: stores.redisUrl,
        CURSOR_SECRET: 'runtime-bench-cursor-secret-0123456789',
        REDIS_PREFIX: `bench:runtime:${runtime.line}:`,
        THROTTLE_ANON: '100000/s',
        THROTTLE_USER: '100000/s',
        CONNECTION_DOOR: 'cluster',
      }),
    );
  const response = await fetch(`${services.get(runtimes.at(-1)!)!.base}/api/tasks/`);
  const [file, type] = [join(root, 'page-1.json'), response.headers.get('content-type') ?? 'application/json'];
  await writeFile(file, Buffer.from(await response.arrayBuffer()));
  const postScript = join(root, 'post.lua');
  await writeFile(postScript, POST_SCRIPT);
  const targets = new Map<Runtime, Targets>();
  for (const runtime of runtimes) {
    const bare = await startBare(file, type, 'node', runtime.binary);
    const bareKoa = await startBare(file, type, 'koa', runtime.binary);
    for (const tree of [bare, bareKoa]) checkBinary(tree, runtime);
    targets.set(runtime, { trees: { service: services.get(runtime)!, bare, bareKoa }, writerToken, postScript });
  }
  for (const runtime of runtimes) for (const row of ROWS) await checkRow(row, loadOfRow(row, targets.get(runtime)!));
  return { targets, services };
}
