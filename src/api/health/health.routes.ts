import { sql } from 'kysely';
import { LIVENESS } from '../../edge/answer.js';
import { checkRedis } from '../../stores/redis-client.js';
import { describeStoreError, type StoreSetting } from '../../stores/store-errors.js';
import type { ResourceRouter, RouteParts } from '../router.js';
import { shareCheck } from './shared-check.js';
import { defineOperation, route } from '../openapi/operation.js';
import { healthSchema, readinessSchema } from '../openapi/schemas.js';

const healthProbe = { tag: 'health', access: 'public', priority: 'health' } as const;
const healthOperations = {
  live: defineOperation({
    ...healthProbe,
    method: 'get',
    path: '/healthz',
    operationId: 'liveness',
    summary: 'Liveness',
    responses: { 200: { description: 'The process answers.', body: healthSchema } },
  }),
  ready: defineOperation({
    ...healthProbe,
    method: 'get',
    path: '/readyz',
    operationId: 'readiness',
    summary: 'Readiness: PostgreSQL and Redis answered within 2 s (one check per worker per second, shared)',
    description: 'When not ready, `causes` names why each failing store cannot be used and what to do.',
    responses: {
      200: { description: 'Ready.', body: readinessSchema },
      503: { description: 'A store is failing, or the host is stopping.', body: readinessSchema },
    },
  }),
};

/**
 * Liveness and readiness; never throttled. Readiness checks PostgreSQL and Redis within 2 s, and
 * is 503 once the host is stopping (`deps.leaving`). On a Redis Cluster, Redis is ready when
 * every slot is served and every master answers. Probes share one check per READY_CHECK_MS
 * (default 1 s) per worker, so a flood of them costs the stores nothing more.
 */
export function healthRoutes(router: ResourceRouter, { deps }: RouteParts): void {
  const checkStores = shareCheck(
    () =>
      Promise.all([
        probe(() => sql`select 1`.execute(deps.db), 'DATABASE_URL'),
        probe(() => checkRedis(deps.redis), deps.config.REDIS_CLUSTER_NODES ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL'),
      ]),
    deps.config.READY_CHECK_MS,
    deps.clock,
  );
  // A GET is answered before Koa (src/listener/listener.ts); a HEAD reaches this route.
  route(router, healthOperations.live, (ctx) => {
    ctx.body = LIVENESS;
  });
  route(router, healthOperations.ready, async (ctx) => {
    if (deps.leaving) {
      ctx.status = 503;
      ctx.body = { status: 'stopping' };
      return;
    }
    const [database, redis] = await checkStores();
    const ready = database.status === 'ok' && redis.status === 'ok';
    ctx.status = ready ? 200 : 503;
    const causes = { ...database.cause, ...redis.cause };
    ctx.body = {
      status: ready ? 'ready' : 'unavailable',
      checks: { database: database.status, redis: redis.status },
      ...(ready ? {} : { causes }),
    };
  });
  // Never throttled: other methods are refused without counting.
  router.refuseOtherMethods(() => (_ctx, next) => next());
}

interface Probed {
  status: 'ok' | 'failing';
  /** The failing store's cause and what to do, under its check's name (docs/operations.md "When a store is down"). */
  cause?: Record<string, string>;
}

async function probe(check: () => Promise<unknown>, setting: StoreSetting): Promise<Probed> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error('no answer within 2 s (timed out)')), 2000)),
  );
  try {
    await Promise.race([check(), timeout]);
    return { status: 'ok' };
  } catch (error) {
    const { cause, advice } = describeStoreError(error, setting);
    return { status: 'failing', cause: { [setting === 'DATABASE_URL' ? 'database' : 'redis']: `${cause}: ${advice}` } };
  } finally {
    clearTimeout(timer);
  }
}
