// npm run build: transpiles src/, workers/ and db/ to dist/ with esbuild, file by file (no bundle;
// ES modules, tsconfig.json's target and no source maps, as tsc emitted them), copies the runtime
// files that are not TypeScript (src/throttle/ring.lua, ...) beside their modules, and writes
// dist/.build-stamp, dated when the build began: ops/start.sh rebuilds when any source is newer
// than it (a file saved during a build is then newer, and the next start builds again).
// It checks no types, which is why it takes about half a second where tsc took 16 s: `npm run typecheck`
// does, inside `npm run lint` (so `npm test`), with --isolatedModules, which refuses what a
// compiler that reads one file at a time would get wrong (a type re-exported as a value, a const enum).
// The output and the copied files are gathered in a staging folder, and each file then replaces
// its old copy by rename, so a process starting from dist/ while a build runs reads whole files,
// old or new, never a half; a failed compile (a syntax error) leaves dist/ as it was.
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, version } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCES = ['src', 'workers', 'db'];
const began = new Date();

const dist = join(root, 'dist');
const staging = join(dist, `.staging-${process.pid}`);

/** Every file below `folder`, as [its path, its path relative to `folder`]. */
const filesBelow = (folder) =>
  readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name))
    .map((path) => [path, path.slice(folder.length + 1)]);

/** Fills the staging folder: every module transpiled, every other runtime file copied. */
async function stage() {
  const modules = [];
  let assets = 0;
  for (const folder of SOURCES) {
    for (const [from, relative] of filesBelow(join(root, folder))) {
      // A declaration file (src/types/*.d.ts) only describes a package to the type check.
      if (from.endsWith('.d.ts')) continue;
      if (from.endsWith('.ts')) {
        modules.push(from);
        continue;
      }
      const to = join(staging, folder, relative);
      mkdirSync(dirname(to), { recursive: true });
      copyFileSync(from, to);
      assets += 1;
    }
  }
  await build({
    absWorkingDir: root,
    entryPoints: modules,
    outdir: staging,
    outbase: root,
    bundle: false,
    format: 'esm',
    platform: 'node',
    // tsconfig.json's target, which esbuild does not take from the tsconfig it reads.
    target: 'es2022',
    tsconfig: 'tsconfig.build.json',
    logLevel: 'error',
  });
  return `esbuild ${version}, ${modules.length} modules transpiled, ${assets} runtime files copied`;
}

let done;
try {
  done = await stage();
} catch (error) {
  rmSync(staging, { recursive: true, force: true });
  // esbuild has printed each of its errors with the file and line (logLevel); anything else is told here.
  const why = Array.isArray(error.errors) ? 'the errors above' : error.message;
  process.stderr.write(`build failed (${why}): dist/ is unchanged\n`);
  process.exit(1);
}

for (const [from, relative] of filesBelow(staging)) {
  const to = join(dist, relative);
  mkdirSync(dirname(to), { recursive: true });
  renameSync(from, to);
}
rmSync(staging, { recursive: true, force: true });

const stamp = join(dist, '.build-stamp');
writeFileSync(stamp, `built ${began.toISOString()}: ${done}\n`);
utimesSync(stamp, began, began);
