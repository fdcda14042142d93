import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stripVTControlCharacters } from 'node:util';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { startCluster, type Launch } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';

// docs/operations.md "Logs": what the service prints depends on who reads it. With a terminal for
// stdout (a pseudo-terminal from util-linux's `script`), every process prints pino-pretty's
// lines and the primary prints the ready banner as plain text, naming the address the API is bound
// to and suggesting `user:create` only while there is no user; through a pipe, JSON lines.

const HINT = 'next, in another terminal: npm run cli -- user:create NAME';
const REQUEST_ID = 'terminal-output-probe';

interface Printed {
  /** What the service printed until its first request was logged: escapes and CRs taken out, by line. */
  lines: string[];
  port: number;
  metricsPort: number;
}

const Output = suite<{ database: { url: string; drop(): Promise<void> }; dir: string }>(
  'what npm start prints: readable lines and a plain banner on a terminal, JSON through a pipe',
);

Output.before(async (context) => {
  const script = spawnSync('script', ['--version'], { stdio: 'ignore' });
  assert.is(script.status, 0, "util-linux's `script` runs the service on a terminal (Debian's bsdutils has it)");
  context.database = await createTestDatabase('terminal');
  context.dir = await mkdtemp(join(process.env.TEST_TMP_DIR!, 'terminal-'));
});

Output.after(async ({ database, dir }) => {
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Starts the service as `launch` says, waits for its banner, sends one request and returns what it printed. */
async function printedBy(launch: Launch, databaseUrl: string, dir: string): Promise<Printed> {
  const env = { ...testStoresEnv('terminal', databaseUrl), DATA_DIR: dir, LOG_LEVEL: 'info', WEB_CONCURRENCY: '1' };
  const cluster = await startCluster(env, 30_000, launch);
  const printed = () => stripVTControlCharacters(cluster.output()).replaceAll('\r\n', '\n');
  try {
    await until(() => printed().includes('Paceline is up'), printed);
    await fetch(`${cluster.base}/api/tasks/`, { headers: { 'X-Request-Id': REQUEST_ID } });
    await until(() => printed().includes(REQUEST_ID), printed);
    return { lines: printed().split('\n').filter(Boolean), port: cluster.port, metricsPort: cluster.metricsPort };
  } finally {
    assert.is(await cluster.stop('SIGTERM'), 0, `stopped cleanly:\n${printed()}`);
  }
}

async function until(done: () => boolean, printed: () => string, timeoutMs = 15_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !done(); await sleep(50))
    if (Date.now() > deadline) throw new Error(`not printed within ${timeoutMs} ms:\n${printed()}`);
}

const bannerOf = ({ port, metricsPort }: Printed) =>
  `Paceline is up: API http://127.0.0.1:${port}/api/ (listening on 127.0.0.1:${port}, this machine only), ` +
  `docs http://127.0.0.1:${port}/api/docs/, metrics http://127.0.0.1:${metricsPort}/metrics`;

/** pino-pretty's line for the probe request, logged by the web child. */
const ACCESS_LINE = new RegExp(
  String.raw`^\[\d\d:\d\d:\d\d\] INFO \(\d+\): web request \{"requestId":"${REQUEST_ID}","method":"GET",` +
    String.raw`"route":"/api/tasks/","status":\d{3},"ms":[\d.]+\}$`,
);

Output(
  'on a terminal with no user yet: readable lines, the banner as plain text, then the user:create hint',
  async ({ database, dir }) => {
    const printed = await printedBy('tty', database.url, dir);
    const { lines } = printed;
    const text = lines.join('\n');
    assert.not.ok(
      lines.some((line) => line.startsWith('{')),
      `no JSON line on a terminal:\n${text}`,
    );
    assert.ok(
      lines.some((line) => ACCESS_LINE.test(line)),
      `the web child's access line is readable:\n${text}`,
    );
    const banner = lines.indexOf(bannerOf(printed));
    assert.ok(banner >= 0, `the banner is a plain line naming the bound address:\n${text}`);
    assert.is(lines[banner + 1], HINT, text);
  },
);

Output('through a pipe: JSON lines, the banner among them', async ({ database, dir }) => {
  const printed = await printedBy('dist', database.url, dir);
  const records = printed.lines.map((line) => {
    try {
      return JSON.parse(line) as { msg?: string; requestId?: string; role?: string; host?: string; port?: number };
    } catch {
      throw new Error(`not a JSON line: ${line}\n${printed.lines.join('\n')}`);
    }
  });
  const banner = records.find((record) => record.msg?.startsWith('Paceline is up'));
  assert.is(banner?.msg, `${bannerOf(printed)} ; ${HINT}`);
  assert.equal([banner?.role, banner?.host, banner?.port], ['primary', '127.0.0.1', printed.port]);
  const access = records.find((record) => record.requestId === REQUEST_ID);
  assert.equal([access?.role, access?.msg], ['web', 'request']);
});

Output('on a terminal once a user exists: the banner without the user:create hint', async ({ database, dir }) => {
  const db = connectDatabase(database.url, 1);
  try {
    await createUser(db, 'alice', 'alice-pass-123');
  } finally {
    await db.destroy();
  }
  const printed = await printedBy('tty', database.url, dir);
  const text = printed.lines.join('\n');
  assert.ok(printed.lines.includes(bannerOf(printed)), text);
  assert.not.match(text, 'user:create', text);
});

Output.run();
