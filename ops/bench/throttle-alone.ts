/**
 * What the throttle alone costs: a bare Koa app served by W=2 node:cluster workers, without a
 * throttle and with a Redis limiter in front, loaded by autocannon on 127.0.0.1.
 *
 *   node --import tsx ops/bench/throttle-alone.ts [seconds per variant = 10] [rounds = 2] [variants, comma-separated]
 *
 * Variants: `none`; `fields`, only the RateLimit fields a throttled response carries (fixed
 * values, no Redis: what the fields alone cost the server and the load generator); `roundtrip`,
 * the fields after one Redis PING per turn's requests, at most two in flight, as the throttle
 * batches its calls (what the round trip costs without any script work); `ring`, the
 * service's own throttle middleware (src/edge/throttle.ts over src/throttle, with its
 * metrics, RateLimit fields and THROTTLE_TIMEOUT_MS) as the only middleware; `zset`, a sorted-set
 * sliding log (ZREMRANGEBYSCORE/ZCARD/ZADD) and `fixed`, a fixed-window INCR+PEXPIRE counter, one
 * script call per request, setting the same fields (these two live only here, for comparison);
 * and two popular npm limiters as their users run them: `flexible`, rate-limiter-flexible's
 * RateLimiterRedis (a fixed window; the middleware sets the same fields from its answer) and
 * `koa-ratelimit` (a sorted-set log, with its own X-RateLimit headers). Every request carries one
 * of 1,000 client addresses in X-Forwarded-For (TRUST_PROXY_HOPS=1) and the limit (100/s per
 * client) never triggers, so every variant takes the admitting path; `none` gets the same
 * requests. All servers start first and are warmed; the variants then take turns in rounds, so a
 * change in the host's load hits them alike.
 *
 * Printed per variant: req/s and its ratio to `none` (overall, and the range over rounds), p99,
 * script calls (round trips) and Redis commands per request (INFO commandstats; commands inside
 * scripts count), and CPU µs per request of the workers, of redis-server and of this process
 * (autocannon). Then MEMORY USAGE of one client key holding 100 admissions. Starts and stops its
 * own redis-server on a free port.
 */
import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import Koa from 'koa';
import koaRatelimit from 'koa-ratelimit';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { pino } from 'pino';
import { loadConfig } from '../../src/settings/config.js';
import type { Deps } from '../../src/deps.js';
import { createThrottle } from '../../src/edge/throttle.js';
import { createMetrics } from '../../src/base/metrics.js';
import { createThrottler } from '../../src/throttle/consume.js';
import type { Decision } from '../../src/throttle/throttler.js';
import { rateLimitHeaders, throttledDetail } from '../../src/throttle/headers.js';
import { buildScopes } from '../../src/throttle/scopes.js';
import { startBenchRedis } from '../../test/helpers/bench-stores.js';

const VARIANTS = ['none', 'fields', 'roundtrip', 'ring', 'zset', 'fixed', 'flexible', 'koa-ratelimit'] as const;
type Variant = (typeof VARIANTS)[number];
type Check = (ident: string) => Promise<Decision>;
interface Setup {
  variant: Variant;
  redisUrl: string;
  httpPort: number;
}

const WORKERS = 2;
const CONNECTIONS = 100;
const WARMUP_S = 2;
const IDENTS = 1000;
const RULES = buildScopes({ anon: '100/s' });
/** One request per client address; every connection cycles through them (each built once by autocannon). */
const CLIENT_REQUESTS = Array.from({ length: IDENTS }, (_, i) => ({
  headers: { 'x-forwarded-for': `198.18.${i >> 8}.${i & 255}` },
}));
const RULE = RULES.get('anon')!;

const ZSET_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, window_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local window = window_ms * 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = count < limit
if allowed then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. count)
  redis.call('PEXPIRE', KEYS[1], window_ms)
  count = count + 1
end
local wait = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]) + window - now
return { allowed and 1 or 0, limit - count, math.ceil(wait / 1000), allowed and 0 or math.max(1, math.ceil(wait / 1000000)) }
`;

const FIXED_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local ttl = redis.call('PTTL', KEYS[1])
local allowed = count <= tonumber(ARGV[1])
return { allowed and 1 or 0, math.max(0, ARGV[1] - count), ttl, allowed and 0 or math.max(1, math.ceil(ttl / 1000)) }
`;

/** A one-scope check for a comparison variant, answering in the shape of the service's Decision. */
function createCheck(variant: 'zset' | 'fixed', redis: Redis): Check {
  redis.defineCommand(variant, { lua: variant === 'zset' ? ZSET_SCRIPT : FIXED_SCRIPT, numberOfKeys: 1 });
  const run = (redis as unknown as Record<string, (...args: Array<string | number>) => Promise<number[]>>)[variant];
  return async (ident) => {
    const [allowed, remaining = 0, resetMs = 0, retryAfterS = 0] = await run!.call(
      redis,
      `bench:${variant}:{${ident}}:${RULE.scope}`,
      RULE.rate.limit,
      RULE.rate.windowMs,
    );
    const { limit, windowMs } = RULE.rate;
    return { scope: RULE.scope, allowed: allowed === 1, limit, windowMs, remaining, resetMs, retryAfterS };
  };
}

/** The service's throttle middleware, with the dependencies it uses and nothing else. */
function serviceThrottle(redisUrl: string): Koa.Middleware {
  const config = loadConfig({ TRUST_PROXY_HOPS: '1', THROTTLE_ANON: RULE.rate.text, LOG_LEVEL: 'silent' });
  const redis = new Redis(redisUrl);
  const throttler = createThrottler({ redis, keyPrefix: 'bench:', timeoutMs: config.THROTTLE_TIMEOUT_MS });
  const deps = { config, metrics: createMetrics(), logger: pino({ level: 'silent' }), throttler } as Pick<
    Deps,
    'config' | 'metrics' | 'logger' | 'throttler'
  >;
  return createThrottle(deps as Deps, RULES)();
}

/** The fields after a shared Redis round trip (PING) per turn of requests, no script: the floor of a batched check. */
function roundTripOnly(redisUrl: string): Koa.Middleware {
  const redis = new Redis(redisUrl);
  let waiting: Array<() => void> = [];
  let inFlight = 0;
  const flush = () => {
    if (inFlight >= 2 || waiting.length === 0) return;
    const batch = waiting;
    waiting = [];
    inFlight++;
    void redis.ping().then(() => {
      inFlight--;
      for (const resume of batch) resume();
      flush();
    });
  };
  const { limit, windowMs } = RULE.rate;
  return async (ctx, next) => {
    await new Promise<void>((resume) => {
      if (waiting.push(resume) === 1) setImmediate(flush);
    });
    ctx.set(
      rateLimitHeaders([
        { scope: RULE.scope, allowed: true, limit, windowMs, remaining: limit - 1, resetMs: windowMs, retryAfterS: 0 },
      ]),
    );
    return next();
  };
}

/** rate-limiter-flexible's Redis limiter (a fixed window: one INCR script per request), answering with the same fields. */
function flexibleThrottle(redisUrl: string): Koa.Middleware {
  const { limit, windowMs } = RULE.rate;
  const limiter = new RateLimiterRedis({
    storeClient: new Redis(redisUrl),
    points: limit,
    duration: windowMs / 1000,
    keyPrefix: 'bench:flexible',
  });
  return async (ctx, next) => {
    let state: RateLimiterRes;
    let allowed = true;
    try {
      state = await limiter.consume(ctx.get('X-Forwarded-For'));
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      [state, allowed] = [rejection, false];
    }
    const retryAfterS = allowed ? 0 : Math.max(1, Math.ceil(state.msBeforeNext / 1000));
    const decision = {
      scope: RULE.scope,
      allowed,
      limit,
      windowMs,
      remaining: state.remainingPoints,
      resetMs: state.msBeforeNext,
      retryAfterS,
    };
    ctx.set(rateLimitHeaders([decision]));
    if (allowed) return next();
    ctx.status = 429;
    ctx.set('Retry-After', String(retryAfterS));
    ctx.body = { detail: throttledDetail(retryAfterS) };
  };
}

function serve({ variant, redisUrl, httpPort }: Setup): void {
  const app = new Koa();
  if (variant === 'ring') app.use(serviceThrottle(redisUrl));
  if (variant === 'fields') {
    let turn = 0;
    app.use(async (ctx, next) => {
      const { limit, windowMs } = RULE.rate;
      ctx.set(
        rateLimitHeaders([
          {
            scope: RULE.scope,
            allowed: true,
            limit,
            windowMs,
            remaining: turn++ % limit,
            resetMs: 500,
            retryAfterS: 0,
          },
        ]),
      );
      return next();
    });
  }
  if (variant === 'zset' || variant === 'fixed') {
    const check = createCheck(variant, new Redis(redisUrl));
    app.use(async (ctx, next) => {
      const decision = await check(`ip:${ctx.get('X-Forwarded-For')}`);
      ctx.set(rateLimitHeaders([decision]));
      if (decision.allowed) return next();
      ctx.status = 429;
      ctx.set('Retry-After', String(decision.retryAfterS));
      ctx.body = { detail: throttledDetail(decision.retryAfterS) };
    });
  }
  if (variant === 'roundtrip') app.use(roundTripOnly(redisUrl));
  if (variant === 'flexible') app.use(flexibleThrottle(redisUrl));
  if (variant === 'koa-ratelimit') {
    const { limit, windowMs } = RULE.rate;
    app.use(
      koaRatelimit({
        driver: 'redis',
        db: new Redis(redisUrl),
        duration: windowMs,
        max: limit,
        id: (ctx) => ctx.get('X-Forwarded-For'),
      }),
    );
  }
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  app.listen(httpPort, '127.0.0.1', () => process.send?.('listening'));
  process.on('message', () => process.send?.(cpuMicros(process.cpuUsage())));
}

const cpuMicros = (usage: NodeJS.CpuUsage) => usage.user + usage.system;

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** The bench's Redis as `npm start` runs one (its password, the service's ACL user), with an admin connection. */
async function startRedisWithAdmin(): Promise<{ url: string; admin: Redis; stop(): Promise<void> }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'paceline-throttle-alone-'));
  const server = await startBenchRedis(dataDir);
  const admin = new Redis(server.url);
  return {
    url: server.url,
    admin,
    async stop() {
      admin.disconnect();
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

interface Server {
  variant: Variant;
  url: string;
  workers: Worker[];
}

async function startServer(variant: Variant, redisUrl: string): Promise<Server> {
  const httpPort = await freePort();
  const workers = Array.from({ length: WORKERS }, () => cluster.fork());
  await Promise.all(
    workers.map(async (worker) => {
      await once(worker, 'message');
      worker.send({ variant, redisUrl, httpPort } satisfies Setup);
      await once(worker, 'message');
    }),
  );
  const url = `http://127.0.0.1:${httpPort}/`;
  await autocannon({ url, connections: CONNECTIONS, duration: WARMUP_S, requests: CLIENT_REQUESTS });
  return { variant, url, workers };
}

async function stopServer({ workers }: Server): Promise<void> {
  await Promise.all(
    workers.map(async (worker) => {
      const exited = once(worker, 'exit');
      worker.kill();
      await exited;
    }),
  );
}

/** CPU time of the process tree parts, in µs: the server's workers, Redis, this process (autocannon). */
async function sampleCpu(server: Server, admin: Redis) {
  const workers = await Promise.all(
    server.workers.map(async (worker) => {
      const reply = once(worker, 'message');
      worker.send('cpu');
      return (await reply)[0] as number;
    }),
  );
  const info = await admin.info('cpu');
  const redisSeconds = ['used_cpu_user', 'used_cpu_sys'].reduce(
    (sum, field) => sum + Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0),
    0,
  );
  return { node: workers.reduce((a, b) => a + b, 0), redis: redisSeconds * 1e6, loader: cpuMicros(process.cpuUsage()) };
}

async function commandCounts(admin: Redis): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const match of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    counts.set(match[1] as string, Number(match[2]));
  }
  return counts;
}

async function measureSlice(server: Server, admin: Redis, seconds: number) {
  const [commandsBefore, cpuBefore] = [await commandCounts(admin), await sampleCpu(server, admin)];
  const result = await autocannon({
    url: server.url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: CLIENT_REQUESTS,
  });
  const [commandsAfter, cpuAfter] = [await commandCounts(admin), await sampleCpu(server, admin)];
  let scripts = 0;
  let commands = 0;
  for (const [name, calls] of commandsAfter) {
    const delta = calls - (commandsBefore.get(name) ?? 0);
    if (name !== 'info') commands += delta;
    if (name === 'evalsha' || name === 'eval') scripts += delta;
  }
  return {
    requests: result['2xx'] + result.non2xx,
    seconds: result.duration,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    scripts,
    commands,
    nodeUs: cpuAfter.node - cpuBefore.node,
    redisUs: cpuAfter.redis - cpuBefore.redis,
    loaderUs: cpuAfter.loader - cpuBefore.loader,
  };
}

type Slice = Awaited<ReturnType<typeof measureSlice>>;

/** MEMORY USAGE of one client key after 100 admissions at limit 100 (a full ring). */
async function memoryPerKey(admin: Redis): Promise<Record<string, number | null>> {
  const sizes: Record<string, number | null> = {};
  const full = buildScopes({ anon: '100/min' }).get('anon')!;
  const ring = createThrottler({ redis: admin, keyPrefix: 'mem:' });
  for (let i = 0; i < 100; i++) await ring.consume([{ rule: full, ident: 'ip:198.19.0.1' }]);
  sizes.ring = await admin.memory('USAGE', 'mem:throttle:v3:{ip:198.19.0.1}:anon', 'SAMPLES', 0);
  for (const variant of ['zset', 'fixed'] as const) {
    const script = variant === 'zset' ? ZSET_SCRIPT : FIXED_SCRIPT;
    for (let i = 0; i < 100; i++) await admin.eval(script, 1, `mem:${variant}`, 100, 60_000);
    sizes[variant] = await admin.memory('USAGE', `mem:${variant}`, 'SAMPLES', 0);
  }
  return sizes;
}

/** Totals per request over all slices; the ratio per round compares slices run back to back. */
function summarise(variant: Variant, slices: Slice[], baseline: Slice[]) {
  const sum = (rows: Slice[], pick: (slice: Slice) => number) => rows.reduce((total, slice) => total + pick(slice), 0);
  const rate = (rows: Slice[]) => sum(rows, (s) => s.requests) / sum(rows, (s) => s.seconds);
  const requests = sum(slices, (s) => s.requests);
  const perReq = (pick: (slice: Slice) => number, digits = 1) => Number((sum(slices, pick) / requests).toFixed(digits));
  const roundRatios = slices.map((slice, i) => rate([slice]) / rate(baseline.slice(i, i + 1)));
  return {
    variant,
    reqPerS: Math.round(rate(slices)),
    ratio: Number((rate(slices) / rate(baseline)).toFixed(3)),
    roundRatios: `${Math.min(...roundRatios).toFixed(2)}–${Math.max(...roundRatios).toFixed(2)}`,
    p99Ms: Math.max(...slices.map((s) => s.p99Ms)),
    non2xx: sum(slices, (s) => s.non2xx),
    errors: sum(slices, (s) => s.errors),
    roundTrips: perReq((s) => s.scripts, 3),
    redisCmds: perReq((s) => s.commands, 2),
    nodeCpuUs: perReq((s) => s.nodeUs),
    redisCpuUs: perReq((s) => s.redisUs),
    loaderCpuUs: perReq((s) => s.loaderUs),
  };
}

async function runPrimary(secondsPerVariant: number, rounds: number, variants: Variant[]): Promise<void> {
  const redis = await startRedisWithAdmin();
  const redisUrl = redis.url;
  const servers: Server[] = [];
  try {
    for (const variant of variants) servers.push(await startServer(variant, redisUrl));
    const slices = new Map<Variant, Slice[]>(variants.map((variant) => [variant, []]));
    for (let round = 0; round < rounds; round++) {
      const order = [...servers.slice(round % servers.length), ...servers.slice(0, round % servers.length)];
      for (const server of order)
        slices.get(server.variant)?.push(await measureSlice(server, redis.admin, secondsPerVariant / rounds));
    }
    console.log(
      `redis ${(await redis.admin.info('server')).match(/redis_version:(\S+)/)?.[1]}, node ${process.version}, ` +
        `W=${WORKERS} workers, ${CONNECTIONS} connections, ${secondsPerVariant} s per variant in ${rounds} interleaved rounds, ` +
        `load average ${loadavg()
          .map((load) => load.toFixed(1))
          .join(' ')}`,
    );
    console.table(variants.map((variant) => summarise(variant, slices.get(variant) ?? [], slices.get('none') ?? [])));
    console.log('MEMORY USAGE per client key, limit 100 full (bytes):', await memoryPerKey(redis.admin));
  } finally {
    await Promise.all(servers.map(stopServer));
    await redis.stop();
  }
}

if (cluster.isPrimary) {
  const variants = (process.argv[4]?.split(',') ?? VARIANTS).filter((v): v is Variant =>
    VARIANTS.includes(v as Variant),
  );
  await runPrimary(Number(process.argv[2] ?? 10), Number(process.argv[3] ?? 2), [
    'none',
    ...variants.filter((v) => v !== 'none'),
  ]);
} else {
  process.once('message', (setup: Setup) => serve(setup));
  process.send?.('ready');
}
