import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig, proxyTrustWarning } from '../../../src/settings/config.js';
import { ENTRY } from '../../helpers/cluster.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real entry point with `env` added; a bad setting must stop it before it starts anything. */
function runMain(env: Record<string, string>): Promise<Run> {
  const child = spawn(process.execPath, [ENTRY.main], {
    env: {
      ...process.env,
      DATA_DIR: join(process.env.TEST_TMP_DIR ?? '.', 'config-never-used'),
      PORT: '0',
      METRICS_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const run: Run = { code: null, stdout: '', stderr: '' };
  child.stdout.on('data', (chunk) => (run.stdout += chunk));
  child.stderr.on('data', (chunk) => (run.stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      run.code = code;
      resolve(run);
    }),
  );
}

const Startup = suite('a bad setting stops the start with one line naming it');

const BAD: Array<[string, string]> = [
  ['PORT', 'abc'],
  ['THROTTLE_ANON', 'lots'],
  ['WEB_CONCURRENCY', '0'],
  ['TOKEN_TTL', 'forever'],
  ['THROTTLE_FAILURE_MODE', 'maybe'],
  ['THROTTLE_RATES', 'exports'],
  ['THROTTLE_RATES', 'exports=often'],
  ['THROTTLE_RATES', 'anon=1/s'],
  ['TRUSTED_PROXIES', '10.0.0.0/33'],
  ['TRUSTED_PROXIES', '10.0.0.0/8,proxy.internal'],
  ['TRUSTED_PROXIES', '::1/129'],
  ['TRUSTED_PROXIES', ' , '],
];

Startup(
  'PORT=abc, THROTTLE_ANON=lots: exit ≠ 0 and exactly one stderr line naming the variable and its value',
  async () => {
    const started = BAD.slice(0, 2);
    const runs = await Promise.all(started.map(([key, value]) => runMain({ [key]: value })));
    runs.forEach((run, i) => {
      const [key, value] = started[i]!;
      const lines = run.stderr.split('\n').filter((line) => line !== '');
      assert.ok(run.code !== 0 && run.code !== null, `${key}: exit ${run.code}`);
      assert.is(lines.length, 1, `${key}: ${run.stderr}`);
      assert.ok(lines[0]!.startsWith(`paceline: invalid ${key}="${value}": `), lines[0]);
      assert.is(run.stdout, '', `${key} printed to stdout`);
    });
  },
);

Startup('a bad TRUSTED_PROXIES entry: exit ≠ 0 and one stderr line naming the setting and the entry', async () => {
  const run = await runMain({ TRUSTED_PROXIES: '10.0.0.0/8, 192.168.0.0/33' });
  const lines = run.stderr.split('\n').filter((line) => line !== '');
  assert.ok(run.code !== 0 && run.code !== null, `exit ${run.code}`);
  assert.equal(lines, [
    'paceline: invalid TRUSTED_PROXIES="10.0.0.0/8, 192.168.0.0/33": "192.168.0.0/33" is not an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8 or fd00::/8)',
  ]);
  assert.is(run.stdout, '');
});

Startup("a REDIS_URL whose scheme is not Redis's stops the start in one line, its value not shown", async () => {
  const run = await runMain({ REDIS_URL: 'htp://:s3cr3t@x' });
  assert.is(run.code, 1, run.stderr);
  assert.equal(run.stderr.split('\n').filter(Boolean), [
    'paceline: invalid REDIS_URL (value not shown): expected redis://[USER:PASSWORD@]HOST:PORT[/DB], rediss://… ' +
      '(TLS) or unix:///PATH/TO/SOCKET (its password in REDIS_PASSWORD)',
  ]);
  assert.is(run.stdout, '');
});

const Load = suite('loadConfig: defaults, parsing, refusals');

Load('REDIS_URL: redis://, rediss:// and a Unix socket, as ioredis reads them; no other scheme', () => {
  for (const url of [
    'redis://cache:6379',
    'redis://paceline:pass@127.0.0.1:63799/0',
    'rediss://cache.example:6380',
    'unix:///run/redis/redis.sock',
    'redis://localhost?path=/run/redis/redis.sock',
  ])
    assert.is(loadConfig({ REDIS_URL: url }).REDIS_URL, url);
  // REDISS:// would reach the server without TLS: ioredis turns TLS on for rediss:// as written only.
  for (const url of ['htp://x', 'http://cache:6379', 'cache:6379', 'REDISS://cache:6380', 'redis:cache'])
    assert.throws(
      () => loadConfig({ REDIS_URL: url }),
      /^invalid REDIS_URL \(value not shown\): expected redis:\/\//,
      url,
    );
});

Load('the API binds loopback unless HOST says otherwise (docs/configuration.md "Configuration")', () => {
  assert.is(loadConfig({}).HOST, '127.0.0.1', 'a development start is reached from this machine only');
  assert.is(loadConfig({ HOST: '0.0.0.0' }).HOST, '0.0.0.0');
  assert.is(loadConfig({ HOST: '::' }).HOST, '::');
});

Load('TRUSTED_PROXIES reads addresses and CIDRs; without it, trusted hops are warned about', () => {
  assert.is(loadConfig({}).TRUSTED_PROXIES, undefined);
  assert.is(loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, 127.0.0.1,::1,fd00::/8' }).TRUSTED_PROXIES?.length, 4);
  assert.is(proxyTrustWarning(loadConfig({})), undefined, 'no hops: nothing forwarded is believed');
  assert.is(proxyTrustWarning(loadConfig({ TRUST_PROXY_HOPS: '1', TRUSTED_PROXIES: '10.0.0.0/8' })), undefined);
  assert.is(
    proxyTrustWarning(loadConfig({ TRUST_PROXY_HOPS: '1', ROLE: 'jobs' })),
    undefined,
    'a jobs-only host serves no requests',
  );
  assert.match(
    proxyTrustWarning(loadConfig({ TRUST_PROXY_HOPS: '2' })) ?? '',
    /^TRUST_PROXY_HOPS=2 without TRUSTED_PROXIES: .* any peer/,
  );
});

Load('THROTTLE_RATES reads scope=rate pairs', () => {
  assert.equal(loadConfig({ THROTTLE_RATES: 'exports=5/min, search = 30/5m' }).THROTTLE_RATES, {
    exports: '5/min',
    search: '30/5m',
  });
  assert.equal(loadConfig({}).THROTTLE_RATES, {});
});

Load('THROTTLE_RATES cannot set a scope that has its own variable', () => {
  assert.throws(
    () => loadConfig({ THROTTLE_RATES: 'exports=5/min,anon=1/s' }),
    /the anon scope has its own setting, THROTTLE_ANON/,
  );
  assert.throws(() => loadConfig({ THROTTLE_RATES: 'token-obtain=1/s' }), /THROTTLE_TOKEN_OBTAIN/);
  assert.equal(loadConfig({ THROTTLE_RATES: 'constructor=5/min,toString=1/s' }).THROTTLE_RATES, {
    constructor: '5/min',
    toString: '1/s',
  });
});

Load('defaults fill every setting; empty strings count as unset', () => {
  const config = loadConfig({ PORT: '', THROTTLE_ANON: '' });
  assert.is(config.PORT, 8000);
  assert.is(config.THROTTLE_ANON, '20/min');
  assert.equal(
    [config.THROTTLE_USER, config.THROTTLE_TOKEN_OBTAIN, config.PAGE_SIZE, config.MAX_PAGE_SIZE],
    ['100/min', '5/min', 10, 100],
  );
  assert.is(config.TOKEN_TTL, 24 * 3_600_000);
  assert.ok(Object.isFrozen(config));
});

Load('a bad credential-bearing setting is named but its value is not echoed', () => {
  for (const [key, value] of [
    ['CURSOR_SECRET', 'tooshort-s3cr3t'],
    ['DATABASE_URL', 'postgres//app:s3cr3t@db'],
    ['REDIS_URL', 'redis//:s3cr3t@cache'],
    ['DATABASE_REPLICA_URLS', 'postgres://app:s3cr3t@replica-1/app,mysql://app:s3cr3t@replica-2/app'],
  ]) {
    try {
      loadConfig({ [key!]: value });
      assert.unreachable(`${key} accepted`);
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.ok((error as Error).message.startsWith(`invalid ${key} `), (error as Error).message);
      assert.not.match((error as Error).message, 's3cr3t');
    }
  }
});

Load('a template placeholder as CURSOR_SECRET stops the start in one line', () => {
  for (const value of [
    'replace-me-with-a-random-secret',
    'REPLACE-ME-with-32-random-bytes-base64',
    'change-me-change-me',
    'changeme-changeme-1',
    'xxxxxxxxxxxxxxxxxxxx',
  ]) {
    try {
      loadConfig({ CURSOR_SECRET: value });
      assert.unreachable(`${value} accepted`);
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.match(
        (error as Error).message,
        /^invalid CURSOR_SECRET \(value not shown\): is a placeholder: set a random value/,
      );
      assert.not.match((error as Error).message, value);
      assert.not.match((error as Error).message, '\n');
    }
  }
  assert.is(loadConfig({ CURSOR_SECRET: 'kq2W7tVbN1xR9sLm4ZpC8yHd' }).CURSOR_SECRET, 'kq2W7tVbN1xR9sLm4ZpC8yHd');
});

Load(
  'DATABASE_REPLICA_URLS: a list of postgres URLs, each named by its place when wrong, and only with the read cache on',
  () => {
    const urls = ['postgres://app:pw@10.0.0.2:5432/app', 'postgresql://app:pw@10.0.0.3/app'];
    assert.equal(loadConfig({ DATABASE_REPLICA_URLS: ` ${urls.join(' , ')} ` }).DATABASE_REPLICA_URLS, urls);
    assert.equal(loadConfig({}).DATABASE_REPLICA_URLS, []);
    assert.is(loadConfig({}).DATABASE_REPLICA_WAIT_MS, 500);
    assert.throws(
      () => loadConfig({ DATABASE_REPLICA_URLS: `${urls[0]},not a url` }),
      /^invalid DATABASE_REPLICA_URLS \(value not shown\): entry 2 is not a postgres:\/\/ URL/,
    );
    assert.throws(
      () => loadConfig({ DATABASE_REPLICA_URLS: urls[0], READ_CACHE_BYTES: '0' }),
      /DATABASE_REPLICA_URLS .*READ_CACHE_BYTES above 0/,
    );
    assert.throws(() => loadConfig({ DATABASE_REPLICA_WAIT_MS: '0' }), /^invalid DATABASE_REPLICA_WAIT_MS="0"/);
  },
);

Load('values are parsed: numbers, durations, rates with a multiplier', () => {
  const config = loadConfig({ PORT: ' 8080 ', TOKEN_TTL: '15m', THROTTLE_USER: '300/5m', THROTTLE_ENABLED: 'false' });
  assert.equal(
    [config.PORT, config.TOKEN_TTL, config.THROTTLE_USER, config.THROTTLE_ENABLED],
    [8080, 900_000, '300/5m', false],
  );
});

Load('each refusal is one line that names the variable', () => {
  for (const [key, value] of [
    ...BAD,
    ['PORT', '70000'],
    ['PAGE_SIZE', '-1'],
    ['LOG_LEVEL', 'loud'],
    ['THROTTLE_USER', '0/min'],
  ] as Array<[string, string]>) {
    try {
      loadConfig({ [key]: value });
      assert.unreachable(`${key}=${value} was accepted`);
    } catch (error) {
      assert.instance(error, ConfigError);
      const message = (error as Error).message;
      assert.ok(message.startsWith(`invalid ${key}=`), message);
      assert.not.match(message, '\n');
    }
  }
});

const Cluster = suite('REDIS_CLUSTER_NODES: a Redis Cluster instead of one Redis');

Cluster('host:port lists and the redis-cluster:// form are read; credentials only from the URL form', () => {
  assert.equal(
    loadConfig({ REDIS_CLUSTER_NODES: ' cache-1:7000, 10.0.0.2:7001,[fd00::3]:7002 ' }).REDIS_CLUSTER_NODES,
    {
      nodes: [
        { host: 'cache-1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
        { host: 'fd00::3', port: 7002 },
      ],
    },
  );
  assert.equal(
    loadConfig({ REDIS_CLUSTER_NODES: 'redis-cluster://app:p%40ss@cache-1:7000,cache-2:7000' }).REDIS_CLUSTER_NODES,
    {
      nodes: [
        { host: 'cache-1', port: 7000 },
        { host: 'cache-2', port: 7000 },
      ],
      username: 'app',
      password: 'p@ss',
    },
  );
  assert.equal(
    loadConfig({ REDIS_CLUSTER_NODES: 'redis-cluster://:s3cr3t@cache-1:7000' }).REDIS_CLUSTER_NODES?.password,
    's3cr3t',
  );
  assert.is(loadConfig({}).REDIS_CLUSTER_NODES, undefined);
});

Cluster('a malformed value is one line naming the variable and the bad entry, never a credential', () => {
  for (const [value, reason] of [
    ['cache-1', /"cache-1" has no port/],
    ['cache-1:7000,,cache-2:7000', /an empty entry/],
    ['cache-1:70000', /port outside 1-65535/],
    ['cache_!:7000', /"cache_!:7000" is not a host name or address/],
    ['redis://cache-1:7000', /is not a cluster address \(for one Redis, set REDIS_URL\)/],
    [':s3cr3t@cache-1:7000', /credentials go in the redis-cluster:\/\/ form or REDIS_PASSWORD/],
    ['redis-cluster://:s3cr3t@cache-1', /"cache-1" has no port/],
    ['redis-cluster://cache-1:7000/0', /not a path or query/],
    ['redis-cluster://cache-1:7000,app:s3cr3t@cache-2:7000', /credentials come first/],
    [' , ', /an empty entry/],
  ] as Array<[string, RegExp]>) {
    try {
      loadConfig({ REDIS_CLUSTER_NODES: value });
      assert.unreachable(`${value} was accepted`);
    } catch (error) {
      assert.instance(error, ConfigError);
      const message = (error as Error).message;
      assert.ok(message.startsWith('invalid REDIS_CLUSTER_NODES (value not shown): '), message);
      assert.match(message, reason);
      assert.match(message, /expected host:port entries separated by commas/);
      assert.not.match(message, 's3cr3t');
      assert.not.match(message, '\n');
    }
  }
});

Cluster('REDIS_URL and REDIS_CLUSTER_NODES together are refused; so is a hash tag in REDIS_PREFIX', () => {
  assert.throws(
    () => loadConfig({ REDIS_URL: 'redis://:s3cr3t@cache:6379', REDIS_CLUSTER_NODES: 'cache-1:7000' }),
    (error: Error) =>
      error instanceof ConfigError &&
      /set REDIS_URL \(one Redis\) or REDIS_CLUSTER_NODES \(a Redis Cluster\), not both/.test(error.message) &&
      !error.message.includes('s3cr3t'),
  );
  assert.throws(
    () => loadConfig({ REDIS_CLUSTER_NODES: 'cache-1:7000', REDIS_PREFIX: '{app}:' }),
    /invalid REDIS_PREFIX="\{app\}:": must not contain \{ or \}/,
  );
  assert.is(loadConfig({ REDIS_PREFIX: '{app}:' }).REDIS_PREFIX, '{app}:', 'one Redis has no slots');
});

Cluster('the start refuses both addresses with one line, before anything starts', async () => {
  const run = await runMain({ REDIS_URL: 'redis://127.0.0.1:1', REDIS_CLUSTER_NODES: '127.0.0.1:2' });
  assert.ok(run.code !== 0 && run.code !== null, `exit ${run.code}`);
  assert.equal(run.stderr.split('\n').filter(Boolean), [
    'paceline: invalid REDIS_CLUSTER_NODES (value not shown): set REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (a Redis Cluster), not both',
  ]);
});

Startup.run();
Load.run();
Cluster.run();
