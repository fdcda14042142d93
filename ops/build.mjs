// npm run build: compiles src/, workers/ and db/ to dist/ (tsc -p tsconfig.build.json), copies the
// runtime files that are not TypeScript (src/throttle/ring.lua, ...) beside their modules, and
// writes dist/.build-stamp, dated when the build began: ops/start.sh rebuilds when any source is
// newer than it (a file saved during a build is then newer, and the next start builds again).
// tsc's output and the copied files are gathered in a staging folder, and each file then replaces
// its old copy by rename, so a process starting from dist/ while a build runs reads whole files,
// old or new, never a half; a failed compile leaves dist/ as it was.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCES = ['src', 'workers', 'db'];
const began = new Date();

const dist = join(root, 'dist');
const staging = join(dist, `.staging-${process.pid}`);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', staging], {
  cwd: root,
  stdio: 'inherit',
});
if (compiled.status !== 0) {
  rmSync(staging, { recursive: true, force: true });
  process.stderr.write(`build failed: tsc exited with ${compiled.status ?? compiled.signal}\n`);
  process.exit(1);
}

/** Every file below `folder`, as [its path, its path relative to `folder`]. */
const filesBelow = (folder) =>
  readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name))
    .map((path) => [path, path.slice(folder.length + 1)]);

let assets = 0;
for (const folder of SOURCES) {
  for (const [from, relative] of filesBelow(join(root, folder))) {
    if (from.endsWith('.ts')) continue;
    const to = join(staging, folder, relative);
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(from, to);
    assets += 1;
  }
}
for (const [from, relative] of filesBelow(staging)) {
  const to = join(dist, relative);
  mkdirSync(dirname(to), { recursive: true });
  renameSync(from, to);
}
rmSync(staging, { recursive: true, force: true });

const stamp = join(dist, '.build-stamp');
writeFileSync(stamp, `built ${began.toISOString()}: tsc -p tsconfig.build.json, ${assets} runtime files copied\n`);
utimesSync(stamp, began, began);
