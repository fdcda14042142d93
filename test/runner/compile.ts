import { copyFile, mkdir, readdir, symlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { build } from 'esbuild';

/**
 * The folders whose TypeScript the test files import or start as scripts. Their other files are
 * copied as they are: some are read beside the module that reads them (src/throttle/ring.lua,
 * clients/typescript/schema.d.ts).
 */
const SOURCES = ['src', 'db', 'workers', 'test', 'clients', 'ops'];
/** What a lookup from a module's own folder upwards finds: the module type, the Prettier settings (`npm run client`). */
const ROOT_FILES = ['package.json', '.prettierrc.json'];

/**
 * Transpiles every TypeScript file the tests use into `into`, keeping the repository's layout
 * (`test/int/x.test.ts` becomes `<into>/test/int/x.test.js`), so each test file's process runs
 * plain JavaScript: tsx's loader costs about a second of CPU in each process that loads the app
 * (docs/testing.md "How the tests run"). esbuild transpiles file by file, as tsx does, with no
 * type check (`npm run lint` does that); inline source maps point stack traces at
 * the sources under `--enable-source-maps`. `into` also gets the repository's root settings and
 * a link to its node_modules, so imports and lookups resolve as they do from the sources. Takes
 * about a second.
 */
export async function compileTests(into: string): Promise<void> {
  const typescript: string[] = [];
  for (const folder of SOURCES) {
    for (const path of await filesBelow(folder)) {
      if (path.endsWith('.ts') && !path.endsWith('.d.ts')) typescript.push(path);
      else await copyInto(into, path);
    }
  }
  await build({
    entryPoints: typescript,
    outdir: into,
    outbase: '.',
    format: 'esm',
    platform: 'node',
    target: 'node24',
    sourcemap: 'inline',
    logLevel: 'error',
  });
  for (const path of ROOT_FILES) await copyInto(into, path);
  await symlink(resolve('node_modules'), join(into, 'node_modules'), 'dir');
}

async function filesBelow(folder: string): Promise<string[]> {
  const entries = await readdir(folder, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

async function copyInto(into: string, path: string): Promise<void> {
  await mkdir(dirname(join(into, path)), { recursive: true });
  await copyFile(path, join(into, path));
}
