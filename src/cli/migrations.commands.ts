import { migrateToLatest } from '../../db/migrate.js';
import {
  listMigrations,
  migrateDown as undoMigrations,
  planMigrateDown,
  type MigrationState,
} from '../../db/migration-admin.js';
import type { Command, CommandContext, PreparedCommand } from './command.js';
import { rebuildWithProgress } from './progress.js';
import { serviceInUse } from './service-in-use.js';

/** `migrate`: applies the pending migrations; with a schema of a newer release, nothing. */
export const migrate: Command = {
  usage: '  migrate            apply pending database migrations',
  needs: 'database',
  prepare: () => ({
    ok: true,
    run: async (db) => {
      const { applied, newer } = await migrateToLatest(db);
      if (newer.length > 0)
        process.stdout.write(`schema is newer than this release (${newer.join(', ')}): nothing to do\n`);
      else process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n');
      return 0;
    },
  }),
};

/** `rebuild`: migrates, then rebuilds every projection from the event log, with its progress bar. */
export const rebuild: Command = {
  usage: '  rebuild            rebuild every projection from the event log',
  needs: 'database',
  prepare: (_args, context) => ({
    ok: true,
    run: async (db) => {
      await migrateToLatest(db);
      await rebuildWithProgress(db, context.stderr);
      return 0;
    },
  }),
};

/** `migrate:status`: every migration, applied (with its time) or pending (docs/operations.md "Migrations"). */
export const migrateStatus: Command = {
  usage: '  migrate:status     every migration, applied (when) or pending',
  needs: 'database',
  prepare: (args, context) => {
    if (args.length > 0) return { ok: false, error: 'migrate:status takes no arguments' };
    return {
      ok: true,
      run: async (db) => {
        const states = await listMigrations(db);
        for (const state of states) context.stdout.write(`${describe(state)}\n`);
        const applied = states.filter((s) => s.appliedAt).length;
        context.stdout.write(`${applied} applied, ${states.length - applied} pending\n`);
        return 0;
      },
    };
  },
};

/**
 * `migrate:down [--to NAME] [--yes]`: undoes the last applied migration, or every one after NAME.
 * Without `--yes` it only prints what it would undo and exits 1, also while the service runs (it
 * changes nothing); with `--yes`, refused while the service is connected to the database.
 */
export const migrateDown: Command = {
  usage: `  migrate:down [--to NAME] [--yes]
                     undo the last migration, or every one after NAME; without --yes, only
                     show what would be undone`,
  needs: 'database',
  prepare: prepareMigrateDown,
};

function prepareMigrateDown(args: string[], context: CommandContext): PreparedCommand {
  const rest = [...args];
  const yes = takeFlag(rest, '--yes');
  const toAt = rest.indexOf('--to');
  const to = toAt >= 0 ? rest.splice(toAt, 2)[1] : undefined;
  if ((toAt >= 0 && !to) || rest.length > 0) return { ok: false, error: 'usage: migrate:down [--to NAME] [--yes]' };
  return {
    ok: true,
    run: async (db) => {
      const inUse = await serviceInUse(db, context.config);
      if (inUse && yes) return context.fail(`migrate:down refused: ${inUse}`);
      const plan = planMigrateDown(await listMigrations(db), to);
      if (!plan.ok) return context.fail(plan.reason);
      if (plan.undo.length === 0) {
        context.stdout.write(`nothing to undo: ${to} is the last applied migration\n`);
        return 0;
      }
      if (!yes) {
        context.stdout.write(`would undo, newest first:\n${plan.undo.map((s) => `  ${describe(s)}\n`).join('')}`);
        context.stdout.write(
          'A down migration drops what its up added, rows included: take a backup first (npm run cli -- export).\n',
        );
        const first = inUse ? `${inUse}, then ` : '';
        return context.fail(`nothing undone: ${first}add --yes to undo ${plan.undo.length} migration(s)`);
      }
      const undone = await undoMigrations(db, to);
      context.stdout.write(`undone: ${undone.join(', ')}\n`);
      return 0;
    },
  };
}

function takeFlag(args: string[], flag: string): boolean {
  const at = args.indexOf(flag);
  if (at >= 0) args.splice(at, 1);
  return at >= 0;
}

/** `applied  2026-11-25 04:36:57 UTC  20261122000100_initial` */
function describe(state: MigrationState): string {
  const when = state.appliedAt
    ? state.appliedAt
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, ' UTC')
    : '';
  const status = !state.appliedAt ? 'pending' : state.known ? 'applied' : 'unknown';
  const note = state.known ? '' : '  (applied by a newer release)';
  return `${status.padEnd(8)} ${when.padEnd(24)} ${state.name}${note}`;
}
