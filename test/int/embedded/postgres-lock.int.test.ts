import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { clearStaleLock } from '../../../src/embedded/postgres-data-dir.js';

// What a start says when DATA_DIR's PostgreSQL is still serving: a server that a running
// Paceline owns is never to be killed (its primary is named); only one left behind by a primary
// that is gone is offered for cleanup. Stand-ins show as `postgres … <dataDir>` in /proc, as
// the real server does; one is the child of a process running Paceline's entry point, the other
// an orphan (its parent exited).

const Lock = suite('a data directory whose PostgreSQL still serves');
const started: number[] = [];
const stay = 'setInterval(() => {}, 1000)';

async function waitForPid(file: string): Promise<number> {
  for (let i = 0; i < 100; i += 1) {
    const text = await readFile(file, 'utf8').catch(() => '');
    if (/^\d+\n/.test(text)) return Number.parseInt(text, 10);
    await sleep(50);
  }
  throw new Error(`no pid in ${file}`);
}

async function lockedDataDir(): Promise<string> {
  return mkdtemp(join(process.env.TEST_TMP_DIR ?? '/tmp', 'pg-lock-'));
}

Lock.after(() => {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

Lock('a server a running Paceline owns: its primary is named and no kill is advised', async () => {
  const dataDir = await lockedDataDir();
  const pidFile = join(dataDir, 'postmaster.pid');
  // The "primary": a process whose command line runs the entry point, with the server as its child.
  const script = `const { spawn } = require('node:child_process'); const c = spawn('bash', ['-c', 'exec -a postgres node -e "${stay}" ${dataDir}'], { stdio: 'ignore' }); require('node:fs').writeFileSync(${JSON.stringify(pidFile)}, c.pid + '\\n'); ${stay}`;
  const primary = spawn(process.execPath, ['-e', script, 'dist/src/main.js'], { stdio: 'ignore' });
  started.push(primary.pid!);
  const server = await waitForPid(pidFile);
  started.push(server);
  await sleep(200);
  assert.throws(
    () => clearStaleLock(dataDir, () => {}),
    (error: Error) =>
      error.message.includes(`for the Paceline whose primary is pid ${primary.pid}`) &&
      error.message.includes('Never kill') &&
      !/kill -/.test(error.message),
  );
});

Lock('a server left behind by a primary that is gone is offered for a clean stop', async () => {
  const dataDir = await lockedDataDir();
  const pidFile = join(dataDir, 'postmaster.pid');
  // Started in the background of a shell that exits at once: the server's parent is gone.
  spawn('bash', ['-c', `(exec -a postgres node -e "${stay}" ${dataDir} & echo $! > ${pidFile}) ; exit 0`], {
    stdio: 'ignore',
  });
  const server = await waitForPid(pidFile);
  started.push(server);
  await sleep(200);
  assert.throws(
    () => clearStaleLock(dataDir, () => {}),
    (error: Error) => error.message.includes(`kill -TERM ${server}`) && error.message.includes('left behind'),
  );
});

Lock('a postmaster.pid whose process is gone is removed', async () => {
  const dataDir = await lockedDataDir();
  await writeFile(join(dataDir, 'postmaster.pid'), '999999\n');
  const lines: string[] = [];
  clearStaleLock(dataDir, (line) => lines.push(line));
  assert.match(lines.join('\n'), /removed stale/);
});

Lock.run();
