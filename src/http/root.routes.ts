import type Router from '@koa/router';
import type { Guard } from './guard.js';
import { requestUrl } from './request-url.js';
import type { Deps } from '../deps.js';
import { createRouter, refuseOtherMethods } from './router.js';

const COLLECTIONS = { tasks: '/api/tasks/', 'task-stats': '/api/tasks/stats/', events: '/api/events/', reports: '/api/reports/', 'rate-limits': '/api/rate-limits/', token: '/api/auth/token/' };

/** `GET /api/`: the API root, absolute links to every collection (as DRF's router serves). */
export function rootRoutes(deps: Deps, guard: Guard): Router {
  const router = createRouter();
  router.get('/api/', guard(), (ctx) => {
    const base = requestUrl(ctx, deps.config.TRUST_PROXY_HOPS);
    ctx.body = Object.fromEntries(Object.entries(COLLECTIONS).map(([name, path]) => [name, new URL(path, base).href]));
  });
  return refuseOtherMethods(router, () => guard());
}
