import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import Koa from 'koa';
import type Router from '@koa/router';
import type { Deps } from '../deps.js';
import { admitBeforeApp, type Classified } from '../edge/admission-listener.js';
import { buildScopes, OWN_RATE_SETTINGS, type ScopeName, type ScopeRule } from '../throttle/index.js';
import { apiOperations } from './api-operations.js';
import { authRoutes } from './auth.routes.js';
import { baseHeaders } from './base-headers.js';
import { handleErrors } from './errors.middleware.js';
import { eventRoutes } from './events.routes.js';
import { docsRoutes } from './docs.routes.js';
import { answerEarlyRefusals, plainPath } from './early-refusal.js';
import { createGuard } from './guard.js';
import { healthRoutes } from './health.routes.js';
import { rateLimitRoutes } from './rate-limits.routes.js';
import { reportRoutes } from './reports.routes.js';
import { requestContext, type RequestRecorder } from './request-context.middleware.js';
import { rootRoutes } from './root.routes.js';
import { allowByPath } from './router.js';
import { routeRequests } from './route-table.js';
import { statsRoutes } from './stats.routes.js';
import { taskRoutes } from './tasks.routes.js';

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

/** Routers a feature mounts beside the API's (`createApp`'s `extraRoutes`). */
type ExtraRoutes = Array<(deps: Deps, guard: ReturnType<typeof createGuard>) => Router>;

/** Builds the Koa application; `extraRoutes` lets later features mount their routers. */
export function createApp(deps: Deps, extraRoutes: ExtraRoutes = []): Koa {
  return createApi(deps, extraRoutes).app;
}

/**
 * The API's request listener (server.ts): `GET /healthz` is answered before Koa, every other request passes
 * admission control (src/edge/admission-listener.ts); then a request from a client this process already knows
 * the throttle refuses is answered before Koa (early-refusal.ts), byte for byte as the app would; every other
 * goes to the app.
 */
export function createApiListener(deps: Deps, extraRoutes: ExtraRoutes = []): RequestListener & { close(): void } {
  const { app, answerEarly, classify, recorder } = createApi(deps, extraRoutes);
  const handle = app.callback();
  const { config, metrics } = deps;
  // Past capacity, the app is reached through admission (src/edge/); a refusal from memory costs no slot.
  return admitBeforeApp({ classify, recorder, metrics, config }, (req, res) => {
    if (!answerEarly(req, res)) void handle(req, res);
  });
}

/**
 * The Koa application and its early refusal (early-refusal.ts), which shares its routes, request ids, metrics and
 * access log: `answerEarly(req, res)` answers a request and returns true, or does nothing and returns false.
 */
export function createApi(
  deps: Deps,
  extraRoutes: ExtraRoutes = [],
): {
  app: Koa;
  answerEarly: (req: IncomingMessage, res: ServerResponse) => boolean;
  classify: (req: IncomingMessage) => Classified;
  recorder: RequestRecorder;
} {
  const app = new Koa();
  const rules = scopeRules(deps.config);
  const guard = createGuard(deps, rules);
  const routers = [
    healthRoutes(deps),
    rootRoutes(deps, guard),
    docsRoutes(deps, guard, apiOperations),
    statsRoutes(deps, guard),
    taskRoutes(deps, guard),
    authRoutes(deps, guard),
    rateLimitRoutes(deps, rules, guard),
    eventRoutes(deps, guard),
    reportRoutes(deps, guard),
    ...extraRoutes.map((build) => build(deps, guard)),
  ];
  // Which scopes routes declare is known only now; the config already refused the scopes with their own settings.
  const { THROTTLE_RATES, THROTTLE_SHADOW_RATES, THROTTLE_SHADOW_SCOPES, THROTTLE_CONCURRENCY } = deps.config;
  const named = new Set([
    ...Object.keys(THROTTLE_RATES),
    ...Object.keys(THROTTLE_SHADOW_RATES),
    ...THROTTLE_SHADOW_SCOPES,
    ...Object.keys(THROTTLE_CONCURRENCY),
  ]);
  const undeclared = [...named].filter((scope) => !rules.has(scope));
  if (undeclared.length > 0) {
    const settable = [...rules.keys()].filter((scope) => !Object.hasOwn(OWN_RATE_SETTINGS, scope));
    deps.logger.warn(
      { undeclared, settable },
      `${namedBy(deps.config, undeclared)} names scopes no route declares, which have no effect: ` +
        `${undeclared.join(', ')} (it may name: ${settable.join(', ') || 'none'})`,
    );
  }
  const context = requestContext(deps.logger, deps.metrics, deps.config.ACCESS_LOG);
  const allow = allowByPath(routers);
  const routing = routeRequests(routers, allow);
  app.use(context);
  app.use(handleErrors(deps.logger));
  app.use(baseHeaders);
  app.use(routing);
  app.on('error', () => {
    // Errors are answered and logged by handleErrors; socket errors after that are the client's.
  });
  const answerEarly = answerEarlyRefusals({ gatedRoute: routing.gatedRoute, allow, recorder: context.recorder });
  const classify = classifyRequests(routing.templateOf, allow);
  return { app, answerEarly, classify, recorder: context.recorder };
}

/** Which of the rate settings name any of `scopes`, for the warning above. */
function namedBy(config: Deps['config'], scopes: string[]): string {
  const settings = [
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_RATES, scope)) ? 'THROTTLE_RATES' : '',
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_SHADOW_RATES, scope)) ? 'THROTTLE_SHADOW_RATES' : '',
    scopes.some((scope) => config.THROTTLE_SHADOW_SCOPES.includes(scope)) ? 'THROTTLE_SHADOW_SCOPES' : '',
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_CONCURRENCY, scope)) ? 'THROTTLE_CONCURRENCY' : '',
  ];
  return settings.filter((name) => name !== '').join(' and ');
}

/** Each declared operation's `priority` (openapi/operation.ts), by method and template. */
const PRIORITIES: ReadonlyMap<string, 'health' | 'docs'> = new Map(
  apiOperations.flatMap((op) => (op.priority ? [[`${op.method.toUpperCase()} ${op.path}`, op.priority] as const] : [])),
);

/**
 * A request's class for admission (src/edge/admission.ts), from its route's declared priority, its
 * method and whether it carries credentials: a probe is never shed, docs and schema first, then
 * anonymous requests, then authenticated reads, authenticated writes last.
 */
function classifyRequests(
  templateOf: (path: string, method: string) => string | undefined,
  allow: ReadonlyMap<string, string>,
): (req: IncomingMessage) => Classified {
  return (req) => {
    const method = req.method ?? 'GET';
    const path = plainPath(req.url);
    const template = path === undefined ? undefined : templateOf(path, method === 'HEAD' ? 'GET' : method);
    if (template === undefined) return { level: 1, route: 'unmatched' };
    const priority = PRIORITIES.get(`${method === 'HEAD' ? 'GET' : method} ${template}`);
    const allowed = allow.get(template);
    if (priority === 'health') return { level: 'health', route: template, allow: allowed };
    if (priority === 'docs') return { level: 0, route: template, allow: allowed };
    if (req.headers.authorization === undefined) return { level: 1, route: template, allow: allowed };
    const read = method === 'GET' || method === 'HEAD' || method === 'OPTIONS';
    return { level: read ? 2 : 3, route: template, allow: allowed };
  };
}
