/**
 * What the throttle alone costs: a bare Koa app served by W=2 node:cluster workers, without a
 * throttle and with a Redis limiter in front, loaded by autocannon on 127.0.0.1.
 *
 *   npm run bench:throttle-alone -- [seconds per variant = 10] [rounds = 2] [variants, comma-separated]
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
import type { Worker } from 'node:cluster';
import type autocannon from 'autocannon';
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
import { runLine } from './harness/report.js';
import { defer, runBench, scratchDir } from './harness/run.js';
import { interleave, runAutocannon, type Slice } from './harness/send.js';
import { withCosts, type Costs } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { per, spread, sumOf } from './harness/stats.js';
import { forkWorkers, runCluster } from './harness/workers.js';

const VARIANTS = ['none', 'fields', 'roundtrip', 'ring', 'zset', 'fixed', 'flexible', 'koa-ratelimit'] as const;
type Variant = (typeof VARIANTS)[number];

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
const { limit, windowMs } = RULE.rate;

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

/** Sets the RateLimit fields of `decision`; refuses with 429 when it does not allow the request. */
function answerWith(ctx: Koa.Context, decision: Decision): boolean {
  ctx.set(rateLimitHeaders([decision]));
  if (decision.allowed) return true;
  ctx.status = 429;
  ctx.set('Retry-After', String(decision.retryAfterS));
  ctx.body = { detail: throttledDetail(decision.retryAfterS) };
  return false;
}

/** A one-scope sorted-set log or fixed window in a script, answering in the shape of the service's Decision. */
function scriptThrottle(variant: 'zset' | 'fixed', redis: Redis): Koa.Middleware {
  redis.defineCommand(variant, { lua: variant === 'zset' ? ZSET_SCRIPT : FIXED_SCRIPT, numberOfKeys: 1 });
  const run = (redis as unknown as Record<string, (...args: Array<string | number>) => Promise<number[]>>)[variant]!;
  return async (ctx, next) => {
    const key = `bench:${variant}:{ip:${ctx.get('X-Forwarded-For')}}:${RULE.scope}`;
    const [allowed, remaining = 0, resetMs = 0, retryAfterS = 0] = await run.call(redis, key, limit, windowMs);
    const decision = { scope: RULE.scope, allowed: allowed === 1, limit, windowMs, remaining, resetMs, retryAfterS };
    if (answerWith(ctx, decision)) return next();
  };
}

/** The service's throttle middleware, with the dependencies it uses and nothing else. */
function serviceThrottle(redis: Redis): Koa.Middleware {
  const config = loadConfig({ TRUST_PROXY_HOPS: '1', THROTTLE_ANON: RULE.rate.text, LOG_LEVEL: 'silent' });
  const throttler = createThrottler({ redis, keyPrefix: 'bench:', timeoutMs: config.THROTTLE_TIMEOUT_MS });
  const deps = { config, metrics: createMetrics(), logger: pino({ level: 'silent' }), throttler };
  return createThrottle(deps as Pick<Deps, keyof typeof deps> as Deps, RULES)();
}

/** The fields after a shared Redis round trip (PING) per turn of requests, no script: the floor of a batched check. */
function roundTripOnly(redis: Redis): Koa.Middleware {
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
  const decision = { scope: RULE.scope, allowed: true, limit, windowMs, remaining: limit - 1, resetMs: windowMs };
  return async (ctx, next) => {
    await new Promise<void>((resume) => {
      if (waiting.push(resume) === 1) setImmediate(flush);
    });
    ctx.set(rateLimitHeaders([{ ...decision, retryAfterS: 0 }]));
    return next();
  };
}

/** rate-limiter-flexible's Redis limiter (a fixed window: one INCR script per request), answering with the same fields. */
function flexibleThrottle(redis: Redis): Koa.Middleware {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
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
    const { remainingPoints: remaining, msBeforeNext: resetMs } = state;
    if (answerWith(ctx, { scope: RULE.scope, allowed, limit, windowMs, remaining, resetMs, retryAfterS }))
      return next();
  };
}

/** Only the fields, fixed values and no Redis: what the fields alone cost the server and the load generator. */
function fieldsOnly(): Koa.Middleware {
  let turn = 0;
  return (ctx, next) => {
    const remaining = turn++ % limit;
    ctx.set(
      rateLimitHeaders([
        { scope: RULE.scope, allowed: true, limit, windowMs, remaining, resetMs: 500, retryAfterS: 0 },
      ]),
    );
    return next();
  };
}

/** Each variant's middleware in front of the answer; `redis()` opens its own connection to Redis. */
const MIDDLEWARE: Record<Variant, (redis: () => Redis) => Koa.Middleware | undefined> = {
  none: () => undefined,
  fields: () => fieldsOnly(),
  roundtrip: (redis) => roundTripOnly(redis()),
  ring: (redis) => serviceThrottle(redis()),
  zset: (redis) => scriptThrottle('zset', redis()),
  fixed: (redis) => scriptThrottle('fixed', redis()),
  flexible: (redis) => flexibleThrottle(redis()),
  'koa-ratelimit': (redis) =>
    koaRatelimit({
      driver: 'redis',
      db: redis(),
      duration: windowMs,
      max: limit,
      id: (ctx) => ctx.get('X-Forwarded-For'),
    }),
};

function serve({ variant, redisUrl, httpPort }: { variant: Variant; redisUrl: string; httpPort: number }): void {
  const app = new Koa();
  const middleware = MIDDLEWARE[variant](() => new Redis(redisUrl));
  if (middleware) app.use(middleware);
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  app.listen(httpPort, '127.0.0.1', () => process.send?.('listening'));
}

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

type Run = Slice & Costs;

/** Totals per request over all slices; the ratio per round compares slices run back to back. */
function summarise(variant: Variant, slices: Run[], baseline: Run[]) {
  const rate = (rows: Run[]) => sumOf(rows, (s) => s.requests) / sumOf(rows, (s) => s.seconds);
  const requests = sumOf(slices, (s) => s.requests);
  return {
    variant,
    reqPerS: Math.round(rate(slices)),
    ratio: Number((rate(slices) / rate(baseline)).toFixed(3)),
    roundRatios: spread(slices.map((slice, i) => rate([slice]) / rate(baseline.slice(i, i + 1)))),
    p99Ms: Math.max(...slices.map((s) => s.p99Ms)),
    non2xx: sumOf(slices, (s) => s.non2xx),
    errors: sumOf(slices, (s) => s.socketErrors),
    roundTrips: per(slices, (s) => s.scripts, requests, 3),
    redisCmds: per(slices, (s) => s.commands, requests, 2),
    nodeCpuUs: per(slices, (s) => s.workersCpuUs, requests, 1),
    redisCpuUs: per(slices, (s) => s.redisCpuUs, requests, 1),
    loaderCpuUs: per(slices, (s) => s.loaderCpuUs, requests, 1),
  };
}

async function primary(): Promise<void> {
  const [secondsPerVariant, rounds] = readArgs([10, 2]) as [number, number];
  const asked = (process.argv[4]?.split(',') ?? VARIANTS).filter((v): v is Variant => VARIANTS.includes(v as Variant));
  const variants: Variant[] = ['none', ...asked.filter((v) => v !== 'none')];
  const redis = await startBenchRedis(await scratchDir('throttle-alone'));
  defer(() => redis.stop());
  const admin = new Redis(redis.url);
  defer(() => admin.disconnect());
  const servers: { variant: Variant; workers: Worker[]; load: autocannon.Options }[] = [];
  for (const variant of variants) {
    const { workers, base } = await forkWorkers(WORKERS, { variant, redisUrl: redis.url });
    const load = { url: `${base}/`, connections: CONNECTIONS, requests: CLIENT_REQUESTS };
    await runAutocannon(load, WARMUP_S);
    servers.push({ variant, workers, load });
  }
  const slices = await interleave(servers, rounds, (server) =>
    withCosts(admin, server.workers, () => runAutocannon(server.load, secondsPerVariant / rounds)),
  );
  const what = `W=${WORKERS} workers, ${CONNECTIONS} connections, ${secondsPerVariant} s per variant in ${rounds} interleaved rounds`;
  console.log(await runLine(admin, what));
  console.table(servers.map((server) => summarise(server.variant, slices.get(server)!, slices.get(servers[0]!)!)));
  console.log('MEMORY USAGE per client key, limit 100 full (bytes):', await memoryPerKey(admin));
}

await runCluster(() => runBench('throttle-alone', primary), serve);
