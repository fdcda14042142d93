/**
 * What the throttle alone costs (docs/benchmarks.md "The throttle alone"): a bare Koa app on W=2 node:cluster workers
 * with each variant's limiter (MIDDLEWARE below) in front, or none, loaded by autocannon on 127.0.0.1 in interleaved
 * rounds after a warm-up. Every request carries one of 1,000 client addresses in X-Forwarded-For (TRUST_PROXY_HOPS=1)
 * and the limit (100/s per client) never triggers, so every variant takes the admitting path.
 *
 *   npm run bench:throttle-alone -- [seconds per variant = 10] [rounds = 2] [variants, comma-separated]
 *
 * Prints per variant req/s and its ratio to `none`, p99, script calls (round trips) and Redis commands per request
 * (commands inside scripts count), CPU µs per request of the workers, redis-server and autocannon; then MEMORY USAGE
 * of one client key holding 100 admissions. Starts and stops its own redis-server on a free port.
 */
import Koa from 'koa';
import koaRatelimit from 'koa-ratelimit';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadConfig } from '../../src/settings/config.js';
import type { Deps } from '../../src/deps.js';
import { createThrottle } from '../../src/edge/throttle.js';
import { createMetrics } from '../../src/base/metrics.js';
import { createThrottler } from '../../src/throttle/consume.js';
import type { Decision } from '../../src/throttle/throttler.js';
import { rateLimitHeaders, throttledDetail } from '../../src/edge/throttle-answers.js';
import { buildScopes } from '../../src/throttle/scopes.js';
import { runLine } from './harness/report.js';
import { runBench, scratchDir } from './harness/run.js';
import type { Slice } from './harness/send.js';
import { startRedisStore, type Costs } from './harness/service.js';
import { readArgs } from './harness/settings.js';
import { per, sumOf } from './harness/stats.js';
import { throttleKeyBytes } from './harness/throttle-keys.js';
import { measureVariants, rates, startVariants, WORKERS } from './harness/variants.js';
import { runCluster } from './harness/workers.js';

const VARIANTS = ['none', 'fields', 'roundtrip', 'ring', 'zset', 'fixed', 'flexible', 'koa-ratelimit'] as const;
type Variant = (typeof VARIANTS)[number];

const CONNECTIONS = 100;
const IDENTS = 1000;
const RULES = buildScopes({ anon: '100/s' });
/** One request per client address; every connection cycles through them (each built once by autocannon). */
const CLIENT_REQUESTS = Array.from({ length: IDENTS }, (_, i) => ({
  headers: { 'x-forwarded-for': `198.18.${i >> 8}.${i & 255}` },
}));
const RULE = RULES.get('anon')!;
const { limit, windowMs } = RULE.rate;

const SCRIPTS = {
  zset: `
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
`,
  fixed: `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local ttl = redis.call('PTTL', KEYS[1])
local allowed = count <= tonumber(ARGV[1])
return { allowed and 1 or 0, math.max(0, ARGV[1] - count), ttl, allowed and 0 or math.max(1, math.ceil(ttl / 1000)) }
`,
};

/** A decision of the anon rule, in the shape of the service's. */
const decide = (allowed: boolean, remaining: number, resetMs: number, retryAfterS = 0): Decision => ({
  scope: RULE.scope,
  allowed,
  limit,
  windowMs,
  remaining,
  resetMs,
  retryAfterS,
});

/** Sets the RateLimit fields of `decision`; refuses with 429 when it does not allow the request. */
function answerWith(ctx: Koa.Context, decision: Decision): boolean {
  ctx.set(rateLimitHeaders([decision]));
  if (decision.allowed) return true;
  ctx.status = 429;
  ctx.set('Retry-After', String(decision.retryAfterS));
  ctx.body = { detail: throttledDetail(decision.retryAfterS) };
  return false;
}

/** `zset`, a sorted-set sliding log (ZREMRANGEBYSCORE/ZCARD/ZADD), or `fixed`, a fixed-window INCR+PEXPIRE counter. */
function scriptThrottle(variant: 'zset' | 'fixed', redis: Redis): Koa.Middleware {
  redis.defineCommand(variant, { lua: SCRIPTS[variant], numberOfKeys: 1 });
  const run = (redis as unknown as Record<string, (...args: Array<string | number>) => Promise<number[]>>)[variant]!;
  return async (ctx, next) => {
    const key = `bench:${variant}:{ip:${ctx.get('X-Forwarded-For')}}:${RULE.scope}`;
    const [allowed, remaining = 0, resetMs = 0, retryAfterS = 0] = await run.call(redis, key, limit, windowMs);
    if (answerWith(ctx, decide(allowed === 1, remaining, resetMs, retryAfterS))) return next();
  };
}

/** `ring`: the service's throttle middleware (with its metrics, fields and THROTTLE_TIMEOUT_MS), nothing else. */
function serviceThrottle(redis: Redis): Koa.Middleware {
  const config = loadConfig({ TRUST_PROXY_HOPS: '1', THROTTLE_ANON: RULE.rate.text, LOG_LEVEL: 'silent' });
  const throttler = createThrottler({ redis, keyPrefix: 'bench:', timeoutMs: config.THROTTLE_TIMEOUT_MS });
  const deps = { config, metrics: createMetrics(), logger: pino({ level: 'silent' }), throttler };
  const check = createThrottle(deps as Pick<Deps, keyof typeof deps> as Deps, RULES)();
  // As the guard runs it (src/edge/guard.ts): a client with no user yet is counted, then served.
  return async (ctx, next) => {
    ctx.state.user = null;
    if (await check(ctx)) await next();
  };
}

/**
 * `roundtrip`: the fields after one Redis PING per turn's requests, at most two in flight, as the throttle batches
 * its calls: what the round trip costs without any script work.
 */
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
  return async (ctx, next) => {
    await new Promise<void>((resume) => {
      if (waiting.push(resume) === 1) setImmediate(flush);
    });
    ctx.set(rateLimitHeaders([decide(true, limit - 1, windowMs)]));
    return next();
  };
}

/** `flexible`: rate-limiter-flexible's RateLimiterRedis (a fixed window: one INCR script per request). */
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
    if (answerWith(ctx, decide(allowed, state.remainingPoints, state.msBeforeNext, retryAfterS))) return next();
  };
}

/** `fields`: only the fields, fixed values and no Redis: what they alone cost the server and the load generator. */
function fieldsOnly(): Koa.Middleware {
  let turn = 0;
  return (ctx, next) => {
    ctx.set(rateLimitHeaders([decide(true, turn++ % limit, 500)]));
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
  // A sorted-set log, with its own X-RateLimit headers.
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
  const [ring] = await throttleKeyBytes(admin, '100/min', 'ip:198.19.0.1', [100]);
  const sizes: Record<string, number | null> = { ring: ring ?? null };
  for (const variant of ['zset', 'fixed'] as const) {
    for (let i = 0; i < 100; i++) await admin.eval(SCRIPTS[variant], 1, `mem:${variant}`, 100, 60_000);
    sizes[variant] = await admin.memory('USAGE', `mem:${variant}`, 'SAMPLES', 0);
  }
  return sizes;
}

type Run = Slice & Costs;

/** Totals per request over all slices; the ratio per round compares slices run back to back. */
function summarise(variant: Variant, slices: Run[], baseline: Run[]) {
  const requests = sumOf(slices, (s) => s.requests);
  return {
    variant,
    ...rates(slices, baseline, (s) => s.requests),
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
  const { redisUrl, admin } = await startRedisStore(await scratchDir('throttle-alone'));
  const load = (_: Variant, base: string) => ({ url: `${base}/`, connections: CONNECTIONS, requests: CLIENT_REQUESTS });
  const servers = await startVariants(variants, { redisUrl }, load, 'each');
  const slices = await measureVariants(servers, rounds, secondsPerVariant / rounds, { admin });
  const what = `W=${WORKERS} workers, ${CONNECTIONS} connections, ${secondsPerVariant} s per variant in ${rounds} interleaved rounds`;
  console.log(await runLine(admin, what));
  console.table(servers.map((server) => summarise(server.variant, slices.get(server)!, slices.get(servers[0]!)!)));
  console.log('MEMORY USAGE per client key, limit 100 full (bytes):', await memoryPerKey(admin));
}

await runCluster(() => runBench('throttle-alone', primary), serve);
