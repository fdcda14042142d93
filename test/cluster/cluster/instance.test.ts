import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { ENTRY } from '../../helpers/cluster.js';

// The checks the primary makes before it starts anything: the ports it needs, and no other
// Paceline running on its DATA_DIR (recorded in DATA_DIR/paceline.pid).

const Refusal = suite('a start that cannot succeed names the setting or the running primary');

/** Runs the entry point with `env` until it exits; its whole output. */
async function startExpectingRefusal(env: Record<string, string>): Promise<{ code: number; output: string }> {
  const child = spawn(process.execPath, [ENTRY.main], {
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      METRICS_HOST: '127.0.0.1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = (await once(child, 'exit')) as [number];
  clearTimeout(timer);
  return { code, output };
}

Refusal('a busy METRICS_PORT, EMBEDDED_PG_PORT or EMBEDDED_REDIS_PORT is named before anything starts', async () => {
  const tmp = process.env.TEST_TMP_DIR!;
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const port = String((holder.address() as AddressInfo).port);
  const dataDir = await mkdtemp(join(tmp, 'lifecycle-ports-'));
  try {
    for (const [setting, env] of [
      ['METRICS_PORT', { ...testStoresEnv('lifecycle-ports', 'postgres://127.0.0.1:1/none'), METRICS_PORT: port }],
      ['EMBEDDED_PG_PORT', { DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', EMBEDDED_PG_PORT: port }],
      [
        'EMBEDDED_REDIS_PORT',
        {
          DATA_DIR: dataDir,
          DATABASE_URL: '',
          REDIS_URL: '',
          EMBEDDED_PG_PORT: String(await findFreePort()),
          EMBEDDED_REDIS_PORT: port,
        },
      ],
    ] as const) {
      const { code, output } = await startExpectingRefusal(env);
      assert.is(code, 1, output);
      assert.is(
        output.trim(),
        `paceline: could not start: ${setting} ${port} on 127.0.0.1 cannot be served: another process is listening on it`,
      );
    }
  } finally {
    holder.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});

Refusal(
  'a second start on a DATA_DIR whose primary runs names that primary and its ports, and advises no kill',
  async () => {
    const dataDir = await mkdtemp(join(process.env.TEST_TMP_DIR!, 'lifecycle-second-'));
    const primary = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      const ports = { PORT: 8000, METRICS_PORT: 9464, EMBEDDED_PG_PORT: 54329, EMBEDDED_REDIS_PORT: 63799 };
      await writeFile(
        join(dataDir, 'paceline.pid'),
        JSON.stringify({ pid: primary.pid, dataDir, ports, startedAt: new Date().toISOString() }),
      );
      const { code, output } = await startExpectingRefusal({ DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '' });
      assert.is(code, 1, output);
      assert.is(
        output.trim(),
        `paceline: could not start: Paceline is already running on DATA_DIR ${dataDir}: primary PID ${primary.pid} ` +
          '(PORT 8000, METRICS_PORT 9464, EMBEDDED_PG_PORT 54329, EMBEDDED_REDIS_PORT 63799). Use that one, stop it with `npm run cli -- stop`, or start this one with another DATA_DIR',
      );
      assert.not.match(output, /kill/);
    } finally {
      primary.kill('SIGKILL');
      await rm(dataDir, { recursive: true, force: true });
    }
  },
);

Refusal.run();
