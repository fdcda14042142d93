import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import Koa, { type Middleware } from 'koa';
import { Errors } from '../base/errors.js';
import type { Deps } from '../deps.js';
import { admitBeforeApp, type Classified } from '../edge/admission-listener.js';
import { rememberedClient } from '../edge/authenticate.js';
import { baseHeaders } from '../edge/base-headers.js';
import { answerEarlyRefusals, plainPath } from '../edge/early-refusal.js';
import { createGuard } from '../edge/guard.js';
import { writeRecordedRefusal } from '../edge/refusal.js';
import { requestContext, type RequestRecorder } from '../edge/request-context.js';
import { originOf } from '../server/request-url.js';
import { readKey } from './cached-read.js';
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
type ExtraRoutes = readonly Routes[];

/** Builds the Koa application; `extraRoutes` lets later features mount their resources. */
export function createApp(deps: Deps, extraRoutes: ExtraRoutes = []): Koa {
  return createApi(deps, extraRoutes).app;
}

/**
 * The API's request listener (server.ts): `GET /healthz` is answered before Koa, and so is a request from a
 * client this process already knows the throttle refuses (src/edge/early-refusal.ts), byte for byte as the app
 * would; every other request passes admission control (src/edge/admission-listener.ts) to the app.
 */
export function createApiListener(deps: Deps, extraRoutes: ExtraRoutes = []): RequestListener & { close(): void } {
  const { app, answerEarly, classify, recorder } = createApi(deps, extraRoutes);
  const handle = app.callback();
  const { config, metrics } = deps;
  // Past capacity, the app is reached through admission (src/edge/); a refusal from memory costs no slot.
  return admitBeforeApp({ classify, answerEarly, recorder, metrics, config }, (req, res) => void handle(req, res));
}

/**
 * The Koa application and its early refusal (src/edge/early-refusal.ts), which shares its routes, request ids,
 * metrics and access log: `answerEarly(req, res)` answers a request and returns true, or does nothing and
 * returns false.
 */
export function createApi(
  deps: Deps,
  extraRoutes: ExtraRoutes = [],
): {
  app: Koa;
  answerEarly: (req: IncomingMessage, res: ServerResponse) => boolean;
  classify: (req: IncomingMessage) => Classified;
  recorder: RequestRecorder;
  /** The route the door finds for a request before Koa, as the router will run it (src/api/router.ts). */
  lookup: (path: string, method: string) => DeclaredRoute | undefined;
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
  const context = requestContext(deps.logger, deps.metrics, deps.config.ACCESS_LOG);
  app.use(context);
  app.use(handleErrors(deps.logger));
  app.use(baseHeaders);
  app.use(routeRequests(api));
  app.use(api.router.routes());
  app.on('error', () => {
    // Errors are answered and logged by handleErrors; socket errors after that are the client's.
  });
  const lookup = (path: string, method: string) => (redirected(api, path) ? undefined : api.lookup(path, method));
  const answerEarly = answerEarlyRefusals({
    lookup,
    allowOf: (template) => api.allowOf(template),
    recorder: context.recorder,
  });
  const classify = classifyRequests(lookup, api, deps);
  return { app, answerEarly, classify, recorder: context.recorder, lookup, operations: api.operations };
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

/**
 * A request's class for admission (src/edge/admission.ts), from its route's declared priority, its
 * method and whether it carries credentials: a probe is never shed, nor an answer this worker keeps
 * in memory; docs and schema first, then anonymous requests, then authenticated reads, authenticated
 * writes last. An answer that needs no PostgreSQL (a kept page, the own budget) for a client known
 * without it (anonymous, or a token this worker remembers) takes the fast lane: it is not held behind
 * requests that do (a guess: the read itself checks the published head and the token epoch).
 */
function classifyRequests(
  lookup: (path: string, method: string) => DeclaredRoute | undefined,
  api: ApiRoutes,
  deps: Pick<Deps, 'readCache' | 'config' | 'clock'>,
): (req: IncomingMessage) => Classified {
  const { readCache, config } = deps;
  return (req) => {
    const method = req.method ?? 'GET';
    const path = plainPath(req.url);
    const route = path === undefined ? undefined : lookup(path, method);
    if (route === undefined) return { level: 1, route: 'unmatched' };
    const { template, priority } = route;
    const allowed = api.allowOf(template);
    if (priority === 'health') return { level: 'health', route: template, allow: allowed };
    if (priority === 'docs') return { level: 0, route: template, allow: allowed };
    const anonymous = req.headers.authorization === undefined;
    const level = anonymous ? 1 : method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 2 : 3;
    if (method !== 'GET' && method !== 'HEAD') return { level, route: template, allow: allowed };
    const client = anonymous ? 'anonymous' : rememberedClient(req.headers.authorization, deps);
    if (client === undefined) return { level, route: template, allow: allowed };
    if (priority === 'memory') return { level: 'memory', route: template, allow: allowed };
    if (!route.cached || !readCache) return { level, route: template, allow: allowed };
    // Kept for everyone, or for this viewer (a task's history, src/api/cached-read.ts `startRead`).
    const key = readKey(originOf(req, config), req.url!, config);
    const viewer = client === 'anonymous' ? client : `user ${client.id}`;
    const kept = readCache.holds(key) || readCache.holds(`${key} for ${viewer}`);
    return { level: kept ? 'memory' : level, route: template, allow: allowed };
  };
}
