// First: another Node.js line stops here, in one line, before anything else loads.
import './settings/check-runtime.js';
import cluster from 'node:cluster';
import { ConfigError, loadConfig } from './settings/config.js';
import { runChild } from './cluster/child.js';
import { runPrimary } from './cluster/primary.js';
import { readEnvFile } from './settings/env-file.js';

/** The one entry point: the primary, or a child of the role the primary gave it. */
async function main(): Promise<void> {
  if (!cluster.isPrimary) return runChild(loadConfig(process.env), process.env.PACELINE_CHILD_ROLE);
  // The primary reads ENV_FILE; children get its settings in their environment when forked.
  const fileSettings = readEnvFile(process.env);
  await runPrimary(loadConfig({ ...process.env, ...fileSettings }), fileSettings);
}

main().catch((error: unknown) => {
  // One line, whatever went wrong: a bad setting names the variable, anything else says what failed.
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(
    `paceline: ${error instanceof ConfigError ? '' : 'could not start: '}${message.split('\n')[0]}\n`,
  );
  process.exit(1);
});
