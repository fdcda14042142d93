import Koa, { type Middleware } from 'koa';
import type Router from '@koa/router';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { buildScopes, OWN_RATE_SETTINGS, type ScopeName, type ScopeRule } from '../throttle/index.js';
import { apiOperations } from './api-operations.js';
import { authRoutes } from './auth.routes.js';
import { handleErrors } from './errors.middleware.js';
import { eventRoutes } from './events.routes.js';
import { docsRoutes } from './docs.routes.js';
import { createGuard } from './guard.js';
import { healthRoutes } from './health.routes.js';
import { rateLimitRoutes } from './rate-limits.routes.js';
import { reportRoutes } from './reports.routes.js';
import { requestContext } from './request-context.middleware.js';
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

/** Builds the Koa application; `extraRoutes` lets later features mount their routers. */
export function createApp(
  deps: Deps,
  extraRoutes: Array<(deps: Deps, guard: ReturnType<typeof createGuard>) => Router> = [],
): Koa {
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
  const { THROTTLE_RATES, THROTTLE_SHADOW_RATES, THROTTLE_SHADOW_SCOPES } = deps.config;
  const named = new Set([
    ...Object.keys(THROTTLE_RATES),
    ...Object.keys(THROTTLE_SHADOW_RATES),
    ...THROTTLE_SHADOW_SCOPES,
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
  app.use(requestContext(deps.logger, deps.metrics, deps.config.ACCESS_LOG));
  app.use(handleErrors(deps.logger));
  app.use(baseHeaders);
  app.use(routeRequests(routers, allowByPath(routers)));
  app.on('error', () => {
    // Errors are answered and logged by handleErrors; socket errors after that are the client's.
  });
  return app;
}

/** Which of the rate settings name any of `scopes`, for the warning above. */
function namedBy(config: Deps['config'], scopes: string[]): string {
  const settings = [
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_RATES, scope)) ? 'THROTTLE_RATES' : '',
    scopes.some((scope) => Object.hasOwn(config.THROTTLE_SHADOW_RATES, scope)) ? 'THROTTLE_SHADOW_RATES' : '',
    scopes.some((scope) => config.THROTTLE_SHADOW_SCOPES.includes(scope)) ? 'THROTTLE_SHADOW_SCOPES' : '',
  ];
  return settings.filter((name) => name !== '').join(' and ');
}

const baseHeaders: Middleware = async (ctx, next) => {
  // Straight to Node: nothing has been sent yet, and Koa's setter adds only checks for that.
  const res = ctx.res;
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('Vary', 'Accept, Authorization');
  // HTTP/1.1 requires exactly one Host (RFC 9112 §3.2); Node keeps the first of several silently,
  // and its own refusal has no body (see answerClientErrors).
  if (!ctx.req.headers.host && ctx.req.httpVersion === '1.1')
    throw Errors.badRequest('Bad request: the Host header is missing.');
  if (countHost(ctx.req.rawHeaders) > 1) throw Errors.badRequest('Bad request: more than one Host header.');
  await next();
};

/** How many Host fields a request sent, read from the raw headers (`headersDistinct` builds arrays for every field). */
function countHost(raw: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') count += 1;
  return count;
}
