import { accessSync, constants, createReadStream, createWriteStream, existsSync } from 'node:fs';
import { link, open, rm, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { exportSnapshot } from '../backup/export-snapshot.js';
import { importSnapshot } from '../backup/import-snapshot.js';
import type { Command, CommandContext, PreparedCommand } from './command.js';
import { drawBar, rebuildWithProgress } from './progress.js';
import { serviceInUse } from './service-in-use.js';

/**
 * `export [FILE]` (docs/operations.md "Backup and restore"): a backup to FILE (relative to where
 * `npm run` was typed; default `paceline-<time>.jsonl.gz`; `-` for stdout), never over an
 * existing file: written beside it, synced, then linked into place.
 */
export const exportBackup: Command = {
  usage: `  export [FILE]      back up the event log, users, tokens, reports and idempotency records
                     as of one instant, to FILE (default paceline-<time>.jsonl.gz; - for stdout)`,
  needs: 'database',
  prepare: prepareExport,
};

/**
 * `import FILE` (`-` for stdin): loads a backup into an empty database, refused while the
 * service is connected to it, then rebuilds every projection.
 */
export const importBackup: Command = {
  usage: '  import FILE        load a backup into an empty database, then rebuild every projection',
  needs: 'database',
  prepare: prepareImport,
};

function prepareExport(args: string[], context: CommandContext): PreparedCommand {
  if (args.length > 1) return { ok: false, error: 'export takes one FILE at most (- for stdout)' };
  const toStdout = args[0] === '-';
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '');
  const target = resolve(context.cwd, args[0] ?? `paceline-${stamp}.jsonl.gz`);
  if (!toStdout && existsSync(target))
    return { ok: false, error: `${target} exists: choose another FILE or remove it` };
  return {
    ok: true,
    run: async (db) => {
      const began = Date.now();
      const bar = drawBar(context.stderr);
      const outcome = toStdout ? await exportSnapshot(db, context.stdout, bar) : await exportToFile(db, target, bar);
      if (!outcome.ok) return context.fail(outcome.reason);
      const size = toStdout ? '' : `, ${formatBytes((await stat(target)).size)}`;
      context.stderr.write(
        `backup written to ${toStdout ? 'stdout' : target}: consistent at event position ${outcome.position} ` +
          `(taken ${outcome.takenAt}); ${formatRows(outcome.rows)}${size} in ${seconds(began)}\n`,
      );
      return 0;
    },
  };
}

async function exportToFile(db: Kysely<Database>, target: string, bar: (done: number, total: number) => void) {
  const partial = `${target}.${process.pid}.partial`;
  try {
    const outcome = await exportSnapshot(db, createWriteStream(partial, { flags: 'wx', mode: 0o600 }), bar);
    if (!outcome.ok) return outcome;
    const written = await open(partial, 'r');
    await written.sync().finally(() => written.close());
    await link(partial, target); // fails rather than replace a file made meanwhile
    return outcome;
  } finally {
    await rm(partial, { force: true });
  }
}

function prepareImport(args: string[], context: CommandContext): PreparedCommand {
  if (args.length !== 1) return { ok: false, error: 'import needs one FILE (- for stdin)' };
  const fromStdin = args[0] === '-';
  const path = resolve(context.cwd, args[0]!);
  if (!fromStdin) {
    try {
      accessSync(path, constants.R_OK);
    } catch (error) {
      return { ok: false, error: `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}` };
    }
  }
  const label = fromStdin ? 'stdin' : path;
  return {
    ok: true,
    run: async (db) => {
      const inUse = await serviceInUse(db, context.config);
      if (inUse) return context.fail(`import refused: ${inUse}`);
      const began = Date.now();
      const source = fromStdin ? context.stdin : createReadStream(path);
      const outcome = await importSnapshot(db, source, drawBar(context.stderr));
      if (!outcome.ok) return context.fail(`${label} was not imported: ${outcome.reason}`);
      context.stderr.write(
        `imported ${label}: consistent at event position ${outcome.header.position} (taken ` +
          `${outcome.header.taken_at}); ${formatRows(outcome.rows)} in ${seconds(began)}\n`,
      );
      await rebuildWithProgress(db, context.stderr);
      return 0;
    },
  };
}

function formatRows(rows: Record<string, number>): string {
  return Object.entries(rows)
    .map(([table, n]) => `${table} ${n}`)
    .join(', ');
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} kB`;
  return `${(bytes / 1024 ** 2).toFixed(1)} MB`;
}

function seconds(since: number): string {
  return `${((Date.now() - since) / 1000).toFixed(1)} s`;
}
