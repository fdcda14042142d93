import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';

const CLIENT_ID = /^[\w.:-]{1,128}$/;

/**
 * Gives each request an id (the client's `X-Request-Id` when it is sane, else a new UUID),
 * returns it as `X-Request-Id`, and logs and measures the request by its route template.
 */
export function requestContext(logger: Logger, metrics: Metrics): Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const given = ctx.get('X-Request-Id');
    const requestId = CLIENT_ID.test(given) ? given : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched';
      metrics.httpRequests.inc({ method: ctx.method, route, status: String(ctx.status) });
      metrics.httpDuration.observe({ method: ctx.method, route }, seconds);
      logger.info({ requestId, method: ctx.method, route, status: ctx.status, ms: Math.round(seconds * 1e4) / 10 }, 'request');
    }
  };
}
