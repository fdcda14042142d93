import type Router from '@koa/router';
import type { Guard } from './guard.js';
import { absoluteUrl } from './request-url.js';
import type { Deps } from '../deps.js';
import { createRouter, refuseOtherMethods } from './router.js';

const COLLECTIONS = {
  tasks: '/api/tasks/',
  'task-stats': '/api/tasks/stats/',
  events: '/api/events/',
  reports: '/api/reports/',
  'rate-limits': '/api/rate-limits/',
  token: '/api/auth/token/',
};

/**
 * `GET /api/`: the API root, absolute links to every collection (as DRF's router serves). `GET /`
 * redirects there (302), so a browser or `curl -L` pointed at the host finds the API.
 */
export function rootRoutes(deps: Deps, guard: Guard): Router {
  const router = createRouter();
  router.get('/', (ctx) => {
    ctx.status = 302;
    ctx.set('Location', '/api/');
    ctx.body = { detail: 'Moved to /api/' };
  });
  router.get('/api/', guard(), (ctx) => {
    const link = (path: string) => absoluteUrl(ctx, deps.config, path);
    ctx.body = Object.fromEntries(Object.entries(COLLECTIONS).map(([name, path]) => [name, link(path)]));
  });
  return refuseOtherMethods(router, () => guard());
}
