import { once } from 'node:events';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createConcurrencyLimiter } from '../../../src/throttle/concurrency.js';
import { createThrottler } from '../../../src/throttle/consume.js';
import type { Decision, Throttler } from '../../../src/throttle/throttler.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';
import { startRedisCluster, type TestRedisCluster } from '../../helpers/redis-cluster.js';

// docs/architecture.md "Throttling": the throttle works unchanged on Redis Cluster. A real 3-master cluster of
// redis-server processes; the checks of one turn are split into one script call per hash slot,
// each request's keys share its ident's slot, and every client is still admitted exactly N times.

const TMP = process.env.TEST_TMP_DIR;
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

const test = suite('throttling on a Redis Cluster (3 masters)');
let redisCluster: TestRedisCluster | undefined;
let cluster: Cluster;
/** The operator's view, for counting keys: the service user may not run KEYS. */
let inspector: Cluster;
let throttler: Throttler;

const rule = (rate: string, scope = 'anon'): ScopeRule => ({ scope, rate: parseRate(rate), keyedBy: 'ip' });

test.before(async () => {
  redisCluster = await startRedisCluster(join(TMP, 'redis-cluster'), { masters: 3 });
  cluster = new Cluster(
    redisCluster.ports.map((port) => ({ host: '127.0.0.1', port })),
    { redisOptions: redisCluster.credentials },
  );
  inspector = new Cluster([{ host: '127.0.0.1', port: redisCluster.ports[0]! }], {
    redisOptions: redisCluster.adminCredentials,
  });
  await once(inspector, 'ready');
  throttler = createThrottler({ redis: cluster, keyPrefix: 'test:cluster:', timeoutMs: 5_000 });
});

test.after(async () => {
  cluster?.disconnect();
  inspector?.disconnect();
  await redisCluster?.stop();
});

test('hundreds of concurrent requests from many clients on all masters: each client admitted exactly N', async () => {
  const r = rule('7/min');
  const clients = Array.from({ length: 60 }, (_, i) => `ip:10.9.${i >> 4}.${i & 15}`);
  const calls = clients.flatMap((ident) =>
    Array.from({ length: 12 }, () => ({ ident, decision: throttler.consume([{ rule: r, ident }]) })),
  );
  const decisions = await Promise.all(
    calls.map(async ({ ident, decision }) => ({ ident, decision: (await decision)[0] as Decision })),
  );
  for (const ident of clients) {
    const mine = decisions.filter((d) => d.ident === ident).map((d) => d.decision);
    assert.is(mine.filter((d) => d.allowed).length, 7, ident);
    assert.equal(
      mine.filter((d) => d.allowed).map((d) => d.remaining),
      [6, 5, 4, 3, 2, 1, 0],
      `${ident} in arrival order`,
    );
  }
  const masters = await Promise.all(
    inspector.nodes('master').map(async (node) => (await node.keys('test:cluster:*')).length),
  );
  assert.ok(
    masters.every((count) => count > 0),
    `keys on every master: ${masters.join(', ')}`,
  );
});

test('several scopes of one client are decided together on its slot', async () => {
  const user = rule('5/min', 'user');
  const reports = rule('1/min', 'reports');
  const both = () =>
    throttler.consume([
      { rule: user, ident: 'user:77' },
      { rule: reports, ident: 'user:77' },
    ]);
  const [first, second] = await Promise.all([both(), both()]);
  assert.equal(
    first?.map((d) => d.allowed),
    [true, true],
  );
  assert.equal(
    second?.map((d) => d.allowed),
    [true, false],
  );
  assert.is(
    (await throttler.consume([{ rule: user, ident: 'user:77' }]))[0]?.remaining,
    3,
    'the refused pair recorded nothing',
  );
});

test('a request whose checks name idents on different slots fails alone, not its batch', async () => {
  const r = rule('5/min', 'mixed');
  const [mixed, fine] = await Promise.allSettled([
    throttler.consume([
      { rule: r, ident: 'ip:10.9.9.1' },
      { rule: rule('5/min', 'other'), ident: 'user:1' },
    ]),
    throttler.consume([{ rule: r, ident: 'ip:10.9.9.2' }]),
  ]);
  assert.is(mixed?.status, 'rejected');
  assert.match(String((mixed as PromiseRejectedResult).reason), /share an ident/);
  assert.is(fine?.status === 'fulfilled' && fine.value[0]?.allowed, true);
});

test('concurrency limits (docs/throttling.md "Concurrency limits"): exactly N in progress per client', async () => {
  const limiter = createConcurrencyLimiter({
    redis: cluster,
    keyPrefix: 'test:cluster:',
    expiryMs: 60_000,
    timeoutMs: 5_000,
  });
  const clients = Array.from({ length: 30 }, (_, i) => `user:${900 + i}`);
  const ask = async (ident: string) => ({ ident, slot: await limiter.acquire({ scope: 'user', ident, limit: 3 }) });
  const asked = clients.flatMap((ident) => Array.from({ length: 6 }, () => ask(ident)));
  const slots = await Promise.all(asked);
  for (const ident of clients) assert.is(slots.filter((s) => s.ident === ident && s.slot.admitted).length, 3, ident);
  const held = () =>
    Promise.all(
      inspector.nodes('master').map(async (node) => (await node.keys('test:cluster:throttle:concurrent:*')).length),
    );
  assert.ok(
    (await held()).every((count) => count > 0),
    'sets on every master',
  );
  await Promise.all(slots.map(({ slot }) => slot.release()));
  assert.equal(await held(), [0, 0, 0], 'each set went with its last entry');
});

test.run();
