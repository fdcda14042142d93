import Router from '@koa/router';
import type { Middleware } from 'koa';
import { Errors } from '../errors.js';

const METHOD_ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * What an anonymous client may do on a router's paths before a method they lack is refused, in
 * DRF's terms: `any` (AllowAny: 405), `read` (IsAuthenticatedOrReadOnly: an unsafe method is 401
 * first) or `none` (IsAuthenticated: every method is 401 first).
 */
export type AnonymousAccess = 'any' | 'read' | 'none';

/** A router that matches paths as written: case-sensitive, and the trailing slash counts. */
export function createRouter(): Router {
  return new Router({ sensitive: true, strict: true });
}

/** Each router's paths with their `Allow` value, as `refuseOtherMethods` found them. */
const allowByRouter = new WeakMap<Router, Map<string, string>>();

/** Each declared path's `Allow` value: its methods and OPTIONS, in DRF's order. */
function allowedMethods(router: Router): Map<string, string> {
  const paths = new Map<string, Set<string>>();
  for (const layer of router.stack) {
    if (typeof layer.path !== 'string') continue;
    const methods = paths.get(layer.path) ?? new Set<string>(['OPTIONS']);
    for (const method of layer.methods) methods.add(method);
    paths.set(layer.path, methods);
  }
  return new Map([...paths].map(([path, methods]) => [path, METHOD_ORDER.filter((m) => methods.has(m)).join(', ')]));
}

/**
 * Answers the methods each declared path lacks, after that path's guard has counted the request
 * (DRF counts a 405 against the view's throttle too): OPTIONS gets 204, anything else 405, with
 * `Allow` in DRF's order; an anonymous client that `anonymous` does not let in gets 401 first,
 * as DRF checks permission before the method. Call once every route of `router` is declared;
 * `guardFor` gives the guard for a path (the one its routes use, or the general one).
 */
export function refuseOtherMethods(
  router: Router,
  guardFor: (path: string) => Middleware,
  anonymous: AnonymousAccess = 'any',
): Router {
  const allowed = allowedMethods(router);
  allowByRouter.set(router, allowed);
  for (const [path, allow] of allowed) {
    router.all(path, guardFor(path), (ctx) => {
      if (!ctx.state.user && (anonymous === 'none' || (anonymous === 'read' && !SAFE_METHODS.has(ctx.method)))) {
        throw Errors.notAuthenticated();
      }
      if (ctx.method !== 'OPTIONS') throw Errors.methodNotAllowed(ctx.method, allow);
      ctx.status = 204; // with Allow, as every answer of the path (advertiseAllow)
    });
  }
  return router;
}

/** Each declared path's `Allow` value, for every answer of the path (see routeRequests). */
export function allowByPath(routers: readonly Router[]): ReadonlyMap<string, string> {
  return new Map(routers.flatMap((router) => [...(allowByRouter.get(router) ?? allowedMethods(router))]));
}
