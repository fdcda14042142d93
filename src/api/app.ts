import Koa, { type Middleware } from 'koa';
import { Errors } from '../base/errors.js';
import type { Deps } from '../deps.js';
import { baseHeaders } from '../edge/base-headers.js';
import { createGuard } from '../edge/guard.js';
import { writeRecordedRefusal } from '../edge/refusal.js';
import { requestContext, type RequestRecorder } from '../edge/request-context.js';
import { buildScopes, OWN_RATE_SETTINGS, type ScopeName, type ScopeRule } from '../throttle/index.js';
import { authRoutes } from './auth/auth.routes.js';
import { docsRoutes } from './docs/docs.routes.js';
import { rootRoutes } from './docs/root.routes.js';
import { handleErrors } from './errors.middleware.js';
import { eventRoutes } from './events/events.routes.js';
import { healthRoutes } from './health/health.routes.js';
import type { Operation } from './openapi/operation.js';
import { rateLimitRoutes } from './rate-limits/rate-limits.routes.js';
import { reportRoutes } from './reports/reports.routes.js';
import { ApiRoutes, type DeclaredRoute, type Routes } from './router.js';
import { taskRoutes } from './tasks/tasks.routes.js';

/**
 * The API, declared once (docs/architecture.md "The request's journey"): the app mounts these routes in this
 * order, and the API document (`GET /api/schema/`, `npm run client`) lists the operations they declare in the
 * order declared. The docs page lists the tags in the order they first appear: the tasks first, then auth,
 * events, reports, meta and health (docs/api.md "For integrators").
 */
const API_ROUTES: readonly Routes[] = [
  taskRoutes,
  authRoutes,
  eventRoutes,
  reportRoutes,
  rootRoutes,
  docsRoutes,
  rateLimitRoutes,
  healthRoutes,
];

/**
 * The throttle scopes of docs/architecture.md "Throttling" with their configured rates. Routes may declare more with
 * `guard({ scope, rate })`, which adds them to this map as the app is built.
 */
export function scopeRules(config: Deps['config']): Map<ScopeName, ScopeRule> {
  return new Map(
    buildScopes(
      {
        anon: config.THROTTLE_ANON,
        user: config.THROTTLE_USER,
        'token-obtain': config.THROTTLE_TOKEN_OBTAIN,
        reports: config.THROTTLE_REPORTS,
        login: config.THROTTLE_LOGIN,
      },
      {},
      { rates: config.THROTTLE_SHADOW_RATES, scopes: config.THROTTLE_SHADOW_SCOPES },
    ),
  );
}

/** Routes a feature mounts after the API's (`createApi`'s `extraRoutes`), as tests declare them. */
export type ExtraRoutes = readonly Routes[];

/** Builds the Koa application; `extraRoutes` lets later features mount their resources. */
export function createApp(deps: Deps, extraRoutes: ExtraRoutes = []): Koa {
  return createApi(deps, extraRoutes).app;
}

/**
 * The Koa application, and what the listener before it (src/listener/listener.ts) reads of it: its route
 * lookup and `Allow` values, its request records (request ids, metrics and access log), and the operations the
 * routes declared.
 */
export function createApi(
  deps: Deps,
  extraRoutes: ExtraRoutes = [],
): {
  app: Koa;
  recorder: RequestRecorder;
  /** The route the listener finds for a request before Koa, as the router will run it (src/api/router.ts). */
  lookup: (path: string, method: string) => DeclaredRoute | undefined;
  /** A route template's `Allow` value. */
  allowOf: (template: string) => string | undefined;
  /** Every operation the routes declared, in the order declared: the API document's. */
  operations: readonly Operation[];
} {
  const app = new Koa();
  const rules = scopeRules(deps.config);
  const guard = createGuard(deps, rules);
  const api = new ApiRoutes();
  const parts = { deps, guard, rules, operations: () => api.operations };
  for (const routes of [...API_ROUTES, ...extraRoutes]) routes(api.resource(), parts);
  warnOfUndeclaredScopes(deps, rules);
  const errors = handleErrors(deps.logger);
  const context = requestContext(deps.logger, deps.metrics, deps.config.ACCESS_LOG);
  app.use(context);
  app.use(errors);
  app.use(baseHeaders);
  app.use(routeRequests(api));
  app.use(api.router.routes());
  app.on('error', () => {
    // Errors are answered and logged by handleErrors; socket errors after that are the client's.
  });
  const lookup = (path: string, method: string) => (redirected(api, path) ? undefined : api.lookup(path, method));
  const allowOf = (template: string) => api.allowOf(template);
  return { app, recorder: context.recorder, lookup, allowOf, operations: api.operations };
}

/** Which scopes routes declare is known only now; the config already refused the scopes with their own settings. */
function warnOfUndeclaredScopes(deps: Deps, rules: ReadonlyMap<ScopeName, ScopeRule>): void {
  const { THROTTLE_RATES, THROTTLE_SHADOW_RATES, THROTTLE_SHADOW_SCOPES, THROTTLE_CONCURRENCY, THROTTLE_COSTS } =
    deps.config;
  const named = new Set([
    ...Object.keys(THROTTLE_RATES),
    ...Object.keys(THROTTLE_SHADOW_RATES),
    ...THROTTLE_SHADOW_SCOPES,
    ...Object.keys(THROTTLE_CONCURRENCY),
    ...Object.keys(THROTTLE_COSTS),
  ]);
  const undeclared = [...named].filter((scope) => !rules.has(scope));
  if (undeclared.length === 0) return;
  const settable = [...rules.keys()].filter((scope) => !Object.hasOwn(OWN_RATE_SETTINGS, scope));
  deps.logger.warn(
    { undeclared, settable },
    `${namedBy(deps.config, undeclared)} names scopes no route declares, which have no effect: ` +
      `${undeclared.join(', ')} (it may name: ${settable.join(', ') || 'none'})`,
  );
}

/** `/api/tasks` is redirected to `/api/tasks/` when that is a route. */
function redirected(api: ApiRoutes, path: string): boolean {
  return (path === '/api' || path.startsWith('/api/')) && !path.endsWith('/') && api.has(`${path}/`);
}

/**
 * What the app's routing adds around the router: `/api/tasks` → 308 to `/api/tasks/` when that is a
 * route (method and query kept), the path's `Allow` on every answer of a
 * declared path (errors and 429s included, as DRF's views send it), and 404 for anything no route
 * answered.
 */
function routeRequests(api: ApiRoutes): Middleware {
  return async (ctx, next) => {
    const path = ctx.path;
    if (redirected(api, path)) {
      const target = `${path}/${ctx.search}`;
      ctx.status = 308;
      ctx.set('Location', target);
      ctx.body = { detail: `Moved to ${target}` };
      return;
    }
    try {
      await next();
    } finally {
      const methods = typeof ctx.routerPath === 'string' ? api.allowOf(ctx.routerPath) : undefined;
      // A guard's refusal is written here, where the path's Allow is known (src/edge/refusal.ts).
      if (!writeRecordedRefusal(ctx, methods) && methods !== undefined) ctx.set('Allow', methods);
    }
    if (ctx.body === undefined && ctx.status === 404) throw Errors.notFound();
  };
}

/** Which of the rate settings name any of `scopes`, for the warning above. */
function namedBy(config: Deps['config'], scopes: string[]): string {
  const settings = [
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_RATES, scope)) ? 'THROTTLE_RATES' : '',
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_SHADOW_RATES, scope)) ? 'THROTTLE_SHADOW_RATES' : '',
    scopes.some((scope) => config.THROTTLE_SHADOW_SCOPES.includes(scope)) ? 'THROTTLE_SHADOW_SCOPES' : '',
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_CONCURRENCY, scope)) ? 'THROTTLE_CONCURRENCY' : '',
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_COSTS, scope)) ? 'THROTTLE_COSTS' : '',
  ];
  return settings.filter((name) => name !== '').join(' and ');
}
