import { exportBackup, importBackup } from './backup.commands.js';
import type { Command } from './command.js';
import { migrate, migrateDown, migrateStatus, rebuild } from './migrations.commands.js';
import { limitAuditCommand, limitOverride, limitOverrides, limitRemove, planSet, plans } from './limits.commands.js';
import { say } from './output.js';
import { reload, status, stop, throttled } from './service.commands.js';
import {
  tokenRevoke,
  userAudit,
  userCheck,
  userCreate,
  userDisable,
  userEnable,
  userList,
  userSetPassword,
} from './users.commands.js';

const help: Command = {
  usage: '  help               show this text (also -h, --help)',
  needs: 'nothing',
  run: () => say(USAGE),
};

/** Every command of `npm run cli`, by name, in the order the usage lists them. */
export const COMMANDS: Readonly<Record<string, Command>> = {
  'user:create': userCreate,
  'user:list': userList,
  'user:set-password': userSetPassword,
  'user:disable': userDisable,
  'user:enable': userEnable,
  'token:revoke': tokenRevoke,
  'user:audit': userAudit,
  'user:check': userCheck,
  plans,
  'plan:set': planSet,
  'limit:override': limitOverride,
  'limit:overrides': limitOverrides,
  'limit:remove': limitRemove,
  'limit:audit': limitAuditCommand,
  migrate,
  rebuild,
  export: exportBackup,
  import: importBackup,
  'migrate:status': migrateStatus,
  'migrate:down': migrateDown,
  status,
  stop,
  reload,
  throttled,
  help,
};

/** Other names of a command. */
const ALIASES: Readonly<Record<string, string>> = { '-h': 'help', '--help': 'help' };

export const USAGE = `usage: npm run cli -- <command>\n${Object.values(COMMANDS)
  .map((command) => command.usage)
  .join('\n')}`;

/** The command `name` names (none: help), or undefined when it names none. */
export function findCommand(name: string | undefined): Command | undefined {
  const key = name === undefined ? 'help' : Object.hasOwn(ALIASES, name) ? ALIASES[name]! : name;
  return Object.hasOwn(COMMANDS, key) ? COMMANDS[key] : undefined;
}
