import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import pino from 'pino';
import { ConfigError, loadConfig } from '../../../src/settings/config.js';
import { startTestApp } from '../../helpers/app.js';
import { ENTRY } from '../../helpers/cluster.js';

// docs/configuration.md "Rules between settings": settings that cannot all hold stop a start (and
// a reload, test/cluster/cluster/reload-settings.test.ts) with one line naming the setting and the rule.

const Rules = suite('settings that contradict each other are refused in one line');

const CONTRADICTIONS: Array<[Record<string, string>, string]> = [
  [{ PAGE_SIZE: '500', MAX_PAGE_SIZE: '50' }, 'invalid PAGE_SIZE="500": must not exceed MAX_PAGE_SIZE (50)'],
  [{ PAGE_SIZE: '200' }, 'invalid PAGE_SIZE="200": must not exceed MAX_PAGE_SIZE (100)'],
  [
    { HTTP_HEADERS_TIMEOUT_MS: '40000' },
    'invalid HTTP_HEADERS_TIMEOUT_MS="40000": must not exceed HTTP_REQUEST_TIMEOUT_MS (30000)',
  ],
  [
    { SHUTDOWN_TIMEOUT_MS: '6000' },
    'invalid DATABASE_STATEMENT_TIMEOUT_MS="5000": must be below the 4500 ms a stop gives a worker to drain ' +
      '(SHUTDOWN_TIMEOUT_MS 6000 less what the primary keeps); raise SHUTDOWN_TIMEOUT_MS or lower this',
  ],
  [{ METRICS_PORT: '8000' }, 'invalid METRICS_PORT="8000": PORT uses port 8000 already'],
  [{ EMBEDDED_REDIS_PORT: '54329' }, 'invalid EMBEDDED_REDIS_PORT="54329": EMBEDDED_PG_PORT uses port 54329 already'],
  [
    { THROTTLE_RATES: 'docs=100/min,anon=1/s' },
    'invalid THROTTLE_RATES="docs=100/min,anon=1/s": the anon scope has its own setting, THROTTLE_ANON',
  ],
];

Rules('each contradiction is one ConfigError line naming the setting, its value and the rule', () => {
  for (const [env, line] of CONTRADICTIONS) {
    try {
      loadConfig(env);
      assert.unreachable(`${JSON.stringify(env)} was accepted`);
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.is((error as Error).message, line);
    }
  }
});

Rules('settings that agree are accepted, edges included', () => {
  assert.is(loadConfig({ PAGE_SIZE: '50', MAX_PAGE_SIZE: '50' }).PAGE_SIZE, 50);
  assert.is(loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '30000' }).HTTP_HEADERS_TIMEOUT_MS, 30_000);
  const tight = loadConfig({ SHUTDOWN_TIMEOUT_MS: '6000', DATABASE_STATEMENT_TIMEOUT_MS: '4499' });
  assert.is(tight.DATABASE_STATEMENT_TIMEOUT_MS, 4_499);
  assert.is(loadConfig({ PORT: '0', METRICS_PORT: '0' }).METRICS_PORT, 0, 'port 0 is any free port, never shared');
  const external = { DATABASE_URL: 'postgres://u:p@db:5432/x', REDIS_URL: 'redis://cache:6379' };
  assert.is(loadConfig({ ...external, EMBEDDED_PG_PORT: '6000', EMBEDDED_REDIS_PORT: '6000' }).EMBEDDED_PG_PORT, 6000);
  assert.is(loadConfig({ ROLE: 'jobs', PORT: '9464' }).PORT, 9464, 'a jobs host listens on no PORT');
});

Rules('npm start with PAGE_SIZE=500 MAX_PAGE_SIZE=50 stops before starting anything, with one line', async () => {
  const child = spawn(process.execPath, [ENTRY.main], {
    env: {
      ...process.env,
      DATA_DIR: join(process.env.TEST_TMP_DIR ?? '.', 'config-rules-never-used'),
      PORT: '0',
      METRICS_PORT: '0',
      PAGE_SIZE: '500',
      MAX_PAGE_SIZE: '50',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let [stdout, stderr] = ['', ''];
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  assert.ok(code !== 0 && code !== null, `exit ${code}`);
  assert.is(stderr, 'paceline: invalid PAGE_SIZE="500": must not exceed MAX_PAGE_SIZE (50)\n');
  assert.is(stdout, '');
});

Rules('a THROTTLE_RATES scope no route declares is warned about with the names it may set', async () => {
  const logs: Array<{ msg: string; undeclared?: string[]; settable?: string[] }> = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const app = await startTestApp({ THROTTLE_RATES: 'docs=900/min,exports=5/min' }, 'config-rules', { logger });
  try {
    const warning = logs.find((line) => line.msg.startsWith('THROTTLE_RATES'));
    assert.is(
      warning?.msg,
      'THROTTLE_RATES names scopes no route declares, which have no effect: exports (it may name: docs)',
    );
    assert.equal([warning?.undeclared, warning?.settable], [['exports'], ['docs']]);
  } finally {
    await app.close();
  }
});

Rules.run();
