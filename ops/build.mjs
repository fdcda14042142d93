// npm run build: compiles src/, workers/ and db/ to dist/ (tsc -p tsconfig.build.json), copies the
// runtime files that are not TypeScript (src/throttle/ring.lua, ...) beside their modules, and
// writes dist/.build-stamp, dated when the build began: ops/start.sh rebuilds when any source is
// newer than it (a file saved during a build is then newer, and the next start builds again).
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCES = ['src', 'workers', 'db'];
const began = new Date();

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
if (compiled.status !== 0) {
  process.stderr.write(`build failed: tsc exited with ${compiled.status ?? compiled.signal}\n`);
  process.exit(1);
}

let assets = 0;
for (const folder of SOURCES) {
  for (const entry of readdirSync(join(root, folder), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || entry.name.endsWith('.ts')) continue;
    const from = join(entry.parentPath ?? entry.path, entry.name);
    const to = join(root, 'dist', from.slice(root.length + 1));
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(from, to);
    assets += 1;
  }
}

const stamp = join(root, 'dist', '.build-stamp');
writeFileSync(stamp, `built ${began.toISOString()}: tsc -p tsconfig.build.json, ${assets} runtime files copied\n`);
utimesSync(stamp, began, began);
