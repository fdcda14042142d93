import type Router from '@koa/router';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { checkRedis } from '../stores/redis-client.js';
import { createRouter, refuseOtherMethods } from './router.js';

/**
 * Liveness and readiness; never throttled. Readiness checks PostgreSQL and Redis within 2 s (a
 * Redis Cluster: every slot served and every master answering).
 */
export function healthRoutes(deps: Deps): Router {
  const router = createRouter();
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const [database, redis] = await Promise.all([probe(() => sql`select 1`.execute(deps.db)), probe(() => checkRedis(deps.redis))]);
    const ready = database === 'ok' && redis === 'ok';
    ctx.status = ready ? 200 : 503;
    ctx.body = { status: ready ? 'ready' : 'unavailable', checks: { database, redis } };
  });
  // Never throttled: other methods are refused without counting.
  return refuseOtherMethods(router, () => (_ctx, next) => next());
}

async function probe(check: () => Promise<unknown>): Promise<'ok' | 'failing'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), 2000)));
  try {
    await Promise.race([check(), timeout]);
    return 'ok';
  } catch {
    return 'failing';
  } finally {
    clearTimeout(timer);
  }
}
