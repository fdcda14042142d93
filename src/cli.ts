// First: another Node.js line stops here, in one line, before anything else loads.
import './settings/check-runtime.js';
import type { CommandContext } from './cli/command.js';
import { findCommand, USAGE } from './cli/commands.js';
import { withDatabase } from './cli/database.js';
import { fail } from './cli/output.js';
import { ConfigError, loadConfig } from './settings/config.js';
import { readEnvFile } from './settings/env-file.js';

/**
 * `npm run cli -- <command>`: administrative commands, run against DATABASE_URL or the embedded
 * database under DATA_DIR. Every command is one entry of the table in src/cli/commands.ts, run
 * with what it needs: nothing (help), the settings, or the database once its arguments are read.
 */
async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  const command = findCommand(name);
  if (command?.needs === 'nothing') return command.run();
  const config = loadConfig({ ...process.env, ...readEnvFile(process.env) });
  if (!command) {
    process.stderr.write(`paceline: unknown command "${name}"\n${USAGE}\n`);
    return 2;
  }
  const { stdin, stdout, stderr } = process;
  const context: CommandContext = {
    config,
    cwd: process.env.INIT_CWD ?? process.cwd(),
    stdin,
    stdout,
    stderr,
    fail,
    withDatabase: (work) => withDatabase(config, work),
  };
  if (command.needs === 'settings') return command.run(args, context);
  const prepared = await command.prepare(args, context);
  return prepared.ok ? withDatabase(config, prepared.run) : fail(prepared.error);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `paceline: ${error instanceof ConfigError || error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  },
);
