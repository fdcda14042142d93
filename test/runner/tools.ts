import { spawn } from 'node:child_process';
import type { Tool } from './files.js';

/**
 * Installs what the chosen files need through ops/ensure-tools.sh, the one way the project
 * installs a tool: redis-server whenever the stores start, plus each tool a file's header names.
 * With the stores it also builds dist/ when a source is newer than it (`ensure_build`, as `npm
 * start` does): the tests start the service's processes from the compiled entry points
 * (test/helpers/cluster.ts `ENTRY`). Resolves when all are present; rejects with the script's
 * reason otherwise.
 */
export async function ensureTools(tools: Tool[], withStores: boolean): Promise<void> {
  const stores = withStores ? ['ensure_redis_server --always', 'ensure_build'] : [];
  const calls = [...stores, ...tools.map((tool) => `ensure_${tool}`)];
  if (calls.length === 0) return;
  const script = ['set -euo pipefail', 'source ops/ensure-tools.sh', ...calls].join('\n');
  const child = spawn('bash', ['-c', script], { stdio: ['ignore', 'inherit', 'inherit'] });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`a needed tool is missing (${calls.join('; ')})`);
}
