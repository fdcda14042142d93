import Router from '@koa/router';
import type { Middleware } from 'koa';
import { Errors } from '../errors.js';

const METHOD_ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

/** A router that matches paths as written: case-sensitive, and the trailing slash counts. */
export function createRouter(): Router {
  return new Router({ sensitive: true, strict: true });
}

/**
 * Answers the methods each declared path lacks, after that path's guard has counted the request
 * (DRF counts a 405 against the view's throttle too): OPTIONS gets 204, anything else 405, both
 * with `Allow` in DRF's order. Call once every route of `router` is declared; `guardFor` gives the
 * guard for a path (the one its routes use, or the general one).
 */
export function refuseOtherMethods(router: Router, guardFor: (path: string) => Middleware): Router {
  const paths = new Map<string, Set<string>>();
  for (const layer of router.stack) {
    if (typeof layer.path !== 'string') continue;
    const methods = paths.get(layer.path) ?? new Set<string>(['OPTIONS']);
    for (const method of layer.methods) methods.add(method);
    paths.set(layer.path, methods);
  }
  for (const [path, methods] of paths) {
    const allow = METHOD_ORDER.filter((m) => methods.has(m)).join(', ');
    router.all(path, guardFor(path), (ctx) => {
      ctx.set('Allow', allow);
      if (ctx.method !== 'OPTIONS') throw Errors.methodNotAllowed(ctx.method, allow);
      ctx.status = 204;
    });
  }
  return router;
}
