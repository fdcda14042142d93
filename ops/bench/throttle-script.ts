/**
 * What the throttle script costs Redis (docs/benchmarks.md "What the script costs Redis"): CPU µs and commands per
 * check, from Redis's own counters (INFO cpu, INFO commandstats), so the figure hardly depends on the host's load.
 *
 *   npm run bench:throttle-script -- [turns = 20000] [shadow rate, e.g. 50/s]
 *
 * Requests go in turns of 13 (the batch a loaded web worker sends per script call) through the service's throttler,
 * one turn at a time. Shapes: `growing`, 3,072 clients each at about a third of a 100/s limit (logs that grow and get
 * compacted, the common case); `full`, 128 clients each at its 100/s limit (full rings, many refusals). With a shadow
 * rate every check also decides it on its shadow log (docs/throttling.md "Shadow rules"). Starts its own redis-server.
 */
import { Redis } from 'ioredis';
import { createThrottler } from '../../src/throttle/consume.js';
import { buildScopes } from '../../src/throttle/scopes.js';
import { runBench, scratchDir } from './harness/run.js';
import { redisVersion, startRedisStore, withCosts } from './harness/service.js';
import { readArgs } from './harness/settings.js';

const BATCH = 13;
const SHADOW = process.argv[3];
const RULE = buildScopes({ anon: '100/s' }, {}, SHADOW ? { rates: { anon: SHADOW }, scopes: [] } : undefined).get(
  'anon',
)!;

async function measure(admin: Redis, url: string, shape: 'growing' | 'full', turns: number) {
  const clients = shape === 'growing' ? 3072 : 128;
  const throttler = createThrottler({ redis: new Redis(url), keyPrefix: `bench-${shape}:` });
  let next = 0;
  let allowed = 0;
  const turn = async () => {
    const decisions = await Promise.all(
      Array.from({ length: BATCH }, () => {
        const client = next++ % clients;
        return throttler.consume([{ rule: RULE, ident: `ip:10.${client >> 8}.${client & 255}.1` }]);
      }),
    );
    allowed += decisions.filter(([decision]) => decision?.allowed).length;
  };
  for (let i = 0; i < turns / 10; i++) await turn();
  const [started, allowedBefore] = [performance.now(), allowed];
  const costs = await withCosts(admin, [], async () => {
    for (let i = 0; i < turns; i++) await turn();
    return {};
  });
  const checks = turns * BATCH;
  return {
    shape,
    clients,
    checks,
    admitted: `${Math.round((100 * (allowed - allowedBefore)) / checks)} %`,
    perClientPerS: Math.round(checks / clients / ((performance.now() - started) / 1000)),
    redisCpuUsPerCheck: Number((costs.redisCpuUs / checks).toFixed(2)),
    commandsPerCheck: Number((costs.commands / checks).toFixed(2)),
  };
}

async function main(): Promise<void> {
  const [turns] = readArgs([20_000]) as [number];
  const { redisUrl, admin } = await startRedisStore(await scratchDir('script-bench'));
  const rows = [await measure(admin, redisUrl, 'growing', turns), await measure(admin, redisUrl, 'full', turns)];
  console.log(
    `redis ${await redisVersion(admin)}, ${BATCH} checks per script call, one call at a time` +
      (SHADOW ? `, shadow rate ${SHADOW}` : ''),
  );
  console.table(rows);
}

await runBench('throttle-script', main);
process.exit();
