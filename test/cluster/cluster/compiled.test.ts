import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { childPids, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';

// Production runs compiled JavaScript (docs/operations.md "Processes and signals"): `npm run build` writes
// dist/, `node dist/src/main.js` serves with its stores, and no process of the service, the
// primary or any child it forks, loads a TypeScript loader (tsx) or runs esbuild.

let cluster: RunningCluster;
let databaseUrl = '';
let dropDatabase: () => Promise<void> = async () => {};

/** `pid` and every process below it. */
function tree(pid: number): number[] {
  return [pid, ...childPids(pid).flatMap(tree)];
}

/** A process's command line and NODE_OPTIONS, from /proc. */
function describe(pid: number): { pid: number; argv: string[]; nodeOptions: string } {
  const read = (file: string) => readFileSync(`/proc/${pid}/${file}`, 'utf8').split('\0').filter(Boolean);
  const nodeOptions = read('environ').find((entry) => entry.startsWith('NODE_OPTIONS='));
  return { pid, argv: read('cmdline'), nodeOptions: nodeOptions?.slice('NODE_OPTIONS='.length) ?? '' };
}

const Compiled = suite('the compiled service: npm run build, then node dist/src/main.js');

Compiled.before(async () => {
  // As `npm start` does: `npm run build` when a source is newer than dist/ (the runner has built
  // it before the files run, so a whole run builds once; a run of this file after an edit builds here).
  const build = spawnSync('bash', ['-c', 'source ops/ensure-tools.sh && ensure_build'], { encoding: 'utf8' });
  assert.is(build.status, 0, `npm run build failed:\n${build.stdout}${build.stderr}`);
  const database = await createTestDatabase('compiled');
  databaseUrl = database.url;
  dropDatabase = database.drop;
  cluster = await startCluster(
    { ...testStoresEnv('compiled', database.url), WEB_CONCURRENCY: '2', JOB_CONCURRENCY: '1' },
    60_000,
    'dist',
  );
});

Compiled.after(async () => {
  await cluster?.stop('SIGTERM');
  await dropDatabase();
});

Compiled('the build copies the runtime files that are not TypeScript beside their modules', () => {
  const lua = (path: string) => readFileSync(path, 'utf8');
  assert.is(lua('dist/src/throttle/ring.lua'), lua('src/throttle/ring.lua'));
});

Compiled(
  'it is ready and serves the task list, throttled as deployed (the ring script loaded from dist/)',
  async () => {
    assert.is((await request(cluster.base, 'GET', '/readyz')).status, 200);
    const list = await request(cluster.base, 'GET', '/api/tasks/');
    assert.is(list.status, 200, list.text);
    assert.equal(list.body.results, []);
    assert.ok(list.headers.get('ratelimit'), 'the anon scope answered with its RateLimit field');
  },
);

Compiled(
  'it serves the API document and the docs page with its Swagger UI files from the installed package',
  async () => {
    const schema = await request(cluster.base, 'GET', '/api/schema/');
    assert.is(schema.status, 200, schema.text);
    assert.is(schema.body.openapi, '3.1.0');
    assert.equal(schema.body.servers, [{ url: cluster.base }]);
    const page = await request(cluster.base, 'GET', '/api/docs/');
    assert.is(page.status, 200);
    assert.match(page.text, /swagger-ui-bundle\.js/);
    for (const file of ['swagger-ui-bundle.js', 'swagger-ui.css', 'init.js']) {
      const asset = await request(cluster.base, 'GET', `/api/docs/${file}`);
      assert.is(asset.status, 200, file);
      assert.ok(asset.text.length > (file === 'init.js' ? 50 : 10_000), file);
    }
  },
);

Compiled(
  'no process of the service runs tsx or esbuild: the primary runs dist/src/main.js and forks its children without a loader',
  async () => {
    const primary = cluster.child.pid!;
    // The job worker is forked once the web workers are ready.
    for (let waited = 0; tree(primary).length < 4 && waited < 30_000; waited += 100) await sleep(100);
    const processes = tree(primary).map(describe);
    assert.equal(processes[0]!.argv.slice(1), ['dist/src/main.js']);
    assert.ok(processes.length >= 4, `the primary, two web workers and a job worker: ${JSON.stringify(processes)}`);
    for (const proc of processes) {
      const line = `${proc.argv.join(' ')} NODE_OPTIONS=${proc.nodeOptions}`;
      assert.not.match(line, /tsx|esbuild/, `process ${proc.pid}: ${line}`);
    }
  },
);

Compiled('the CLI runs compiled too', () => {
  const migrate = spawnSync(process.execPath, ['dist/src/cli.js', 'migrate'], {
    encoding: 'utf8',
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
  assert.is(migrate.status, 0, migrate.stderr);
  assert.is(migrate.stdout, 'schema is up to date\n');
});

Compiled.run();

// The build itself, in a copy of what it reads (the real dist/ stays as the files running beside
// this one use it): esbuild transpiles each module on its own, and a compile error changes nothing.
const Build = suite('npm run build: a dist/ from clean with esbuild, and a failed build leaves dist/ as it was');

const BUILD_READS = ['src', 'workers', 'db', 'ops/build.mjs', 'package.json', 'tsconfig.json', 'tsconfig.build.json'];
const ENTRIES = ['src/main.js', 'src/cli.js', 'workers/jobs.js', 'db/migrations/index.js', 'src/throttle/ring.lua'];
let copy = '';

Build.before(() => {
  copy = mkdtempSync(join(tmpdir(), 'paceline-build-'));
  for (const path of BUILD_READS) cpSync(path, join(copy, path), { recursive: true });
  symlinkSync(resolve('node_modules'), join(copy, 'node_modules'), 'dir');
});

Build.after(() => rmSync(copy, { recursive: true, force: true }));

const buildCopy = () => spawnSync(process.execPath, ['ops/build.mjs'], { cwd: copy, encoding: 'utf8' });

/** Every entry below the copy's dist/, with each file's bytes. */
function distContents(): Record<string, string> {
  const dist = join(copy, 'dist');
  const entries = readdirSync(dist, { recursive: true, withFileTypes: true });
  return Object.fromEntries(
    entries.map((entry) => {
      const path = join(entry.parentPath, entry.name);
      return [path.slice(dist.length + 1), entry.isFile() ? readFileSync(path, 'base64') : 'folder'];
    }),
  );
}

Build('from clean it writes dist/src, dist/workers and dist/db as ES modules that run, stamped by esbuild', () => {
  const build = buildCopy();
  assert.is(build.status, 0, build.stderr);
  const built = distContents();
  for (const path of ENTRIES) assert.ok(path in built, `dist/${path}`);
  assert.not.ok(
    Object.keys(built).some((path) => path.includes('.staging-')),
    'no staging folder is left',
  );
  const stamp = join(copy, 'dist/.build-stamp');
  const [, began] =
    /^built (\S+): esbuild \d+\.\d+\.\d+, \d+ modules transpiled, \d+ runtime files copied, entries bundled\n$/.exec(
      readFileSync(stamp, 'utf8'),
    )!;
  // The entry points are bundles: a process reads them and their shared chunks, not every module (ops/build.mjs).
  for (const entry of ['main.js', 'cli.js'])
    assert.match(readFileSync(join(copy, 'dist/src', entry), 'utf8'), /from "\.\/chunk-\w+\.js"/, entry);
  assert.is(Math.round(statSync(stamp).mtimeMs), Date.parse(began!), 'the stamp is dated when the build began');
  // The command line loads most of the service's modules (stores, database, cluster files) before it answers.
  const help = spawnSync(process.execPath, ['dist/src/cli.js', 'help'], { cwd: copy, encoding: 'utf8' });
  assert.is(help.status, 0, help.stderr);
  assert.match(help.stdout, /^usage: npm run cli -- <command>/);
});

Build('a syntax error fails the build, names the file and line, and leaves every file of dist/ as it was', () => {
  const before = distContents();
  // A module saved half-edited.
  writeFileSync(join(copy, 'src/base/clock.ts'), 'export const systemClock = { now: () => Date.now( };\n');
  const build = buildCopy();
  assert.is.not(build.status, 0);
  assert.match(build.stderr, /src\/base\/clock\.ts:\d+:\d+/);
  assert.match(build.stderr, /build failed \(the errors above\): dist\/ is unchanged/);
  assert.equal(distContents(), before);
});

Build.run();
