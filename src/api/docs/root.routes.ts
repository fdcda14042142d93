import { absoluteUrl } from '../../server/request-url.js';
import type { ResourceRouter, RouteParts } from '../router.js';
import { defineOperation, route } from '../openapi/operation.js';
import { errorSchema, rootSchema } from '../openapi/schemas.js';

const rootOperations = {
  home: defineOperation({
    method: 'get',
    path: '/',
    operationId: 'home',
    summary: 'Redirect to the API root',
    tag: 'meta',
    access: 'public',
    responses: { 302: { description: 'To `/api/`.', body: errorSchema, headers: ['Location'] } },
  }),
  root: defineOperation({
    method: 'get',
    path: '/api/',
    operationId: 'apiRoot',
    summary: 'Links to every collection, the docs page and the API document',
    tag: 'meta',
    access: 'optional',
    responses: { 200: { description: 'Each collection by name.', body: rootSchema } },
  }),
};

const COLLECTIONS = {
  tasks: '/api/tasks/',
  'task-stats': '/api/tasks/stats/',
  events: '/api/events/',
  reports: '/api/reports/',
  'rate-limits': '/api/rate-limits/',
  token: '/api/auth/token/',
  // Not collections: where a person (docs) or a client generator (schema) learns the API.
  docs: '/api/docs/',
  schema: '/api/schema/',
};

/**
 * `GET /api/`: the API root, absolute links to every collection (as DRF's router serves), then to
 * the docs page and the API document (docs/api.md "For integrators"). `GET /`
 * redirects there (302), so a browser or `curl -L` pointed at the host finds the API.
 */
export function rootRoutes(router: ResourceRouter, { deps, guard }: RouteParts): void {
  route(router, rootOperations.home, (ctx) => {
    ctx.status = 302;
    ctx.set('Location', '/api/');
    ctx.body = { detail: 'Moved to /api/' };
  });
  route(router, rootOperations.root, guard(), (ctx) => {
    const link = (path: string) => absoluteUrl(ctx, deps.config, path);
    ctx.body = Object.fromEntries(Object.entries(COLLECTIONS).map(([name, path]) => [name, link(path)]));
  });
  router.refuseOtherMethods(() => guard());
}
