import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { childPids, startCluster, type RunningCluster } from '../fixtures/cluster.js';
import { testStoresEnv } from '../helpers/cluster.js';
import { createTestDatabase } from '../helpers/database.js';
import { request } from '../helpers/http.js';

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
