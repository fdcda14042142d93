import { randomBytes } from 'node:crypto';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import { methodLabel, type Metrics } from '../base/metrics.js';
import { RefusalLog } from './refusal-log.js';
import type { AnswerRecorder } from './answer.js';

/** A client's X-Request-Id that is kept as given. */
const CLIENT_ID = /^[\w.:-]{1,128}$/;

/** Probes polled every few seconds by orchestrators: logged at debug, so they do not drown the rest. */
const PROBES: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

export type AccessLog = 'all' | 'errors' | 'off';

/**
 * A generator of request ids unique per process and start: 48 random bits drawn once, then a
 * counter (`3f9a0c12d4e7-1b`), so a request costs no call into the random source.
 */
function createRequestIds(): () => string {
  const prefix = `${randomBytes(6).toString('hex')}-`;
  let counter = 0;
  return () => prefix + (counter++).toString(36);
}

/** What the request context records of each answer, shared with the answers given before Koa (src/listener/). */
export type RequestRecorder = AnswerRecorder;

/**
 * Gives each request an id (the client's `X-Request-Id` when it is sane, else a new id from createRequestIds),
 * returns it as `X-Request-Id`, and logs and measures the request by its route template.
 * `accessLog` (ACCESS_LOG) picks the requests logged: all, errors (4xx and 5xx) or none. A
 * refused request's line carries its scope, client and Retry-After, and refusals are sampled
 * per client (see RefusalLog) so a flood cannot write a line per request. Its `recorder` does the same for an
 * answer given outside Koa.
 */
export function requestContext(
  logger: Logger,
  metrics: Metrics,
  accessLog: AccessLog = 'all',
): Middleware & { recorder: RequestRecorder } {
  const recorder = createRecorder(logger, metrics, accessLog);
  const middleware: Middleware = async (ctx, next) => {
    const started = process.hrtime.bigint();
    const requestId = recorder.idFor(ctx.get('X-Request-Id'));
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const { method, status, state } = ctx;
      recorder.record({ requestId, method, route: routeLabel(ctx), status, seconds, refusal: state.refusal });
    }
  };
  return Object.assign(middleware, { recorder });
}

function createRecorder(logger: Logger, metrics: Metrics, accessLog: AccessLog): RequestRecorder {
  const series = bindSeries(metrics);
  const refusals = new RefusalLog(logger);
  const nextId = createRequestIds();
  return {
    idFor: (given) => (CLIENT_ID.test(given) ? given : nextId()),
    record({ requestId, method, route, status, seconds, refusal }) {
      const bound = series(methodLabel(method), route, status);
      bound.requests.inc();
      bound.duration.observe(seconds);
      const logged = accessLog === 'all' || (accessLog === 'errors' && status >= 400);
      if (logged && (!refusal || refusals.note(refusal))) {
        const line = { requestId, method, route, status, ms: Math.round(seconds * 1e4) / 10 };
        if (refusal) logger.info({ ...line, ...refusal }, 'request');
        else if (PROBES.has(route) && status < 400) logger.debug(line, 'request');
        else logger.info(line, 'request');
      }
    },
  };
}

/**
 * The route template a request reached (`/api/tasks/:id/`), also when its guard answered 429 or
 * its method got 405/OPTIONS on a known path; `unmatched` for paths no route knows. Never the
 * raw path, so ids and typos cannot grow the label set.
 */
function routeLabel(ctx: Context): string {
  if (typeof ctx.routerPath === 'string') return ctx.routerPath;
  const layers: ReadonlyArray<{ path: unknown; methods: string[] }> = ctx.matched ?? [];
  const known = layers.findLast((layer) => layer.methods.length > 0 && typeof layer.path === 'string');
  return known ? String(known.path) : 'unmatched';
}

/**
 * The request metrics bound per method, route and status: label sets are few (route templates,
 * never raw paths), and a bound series skips hashing the labels on every request.
 */
function bindSeries(metrics: Metrics) {
  const bound = new Map<
    string,
    { requests: ReturnType<Metrics['httpRequests']['labels']>; duration: ReturnType<Metrics['httpDuration']['labels']> }
  >();
  return (method: string, route: string, status: number) => {
    const key = `${method} ${status} ${route}`;
    let series = bound.get(key);
    if (!series) {
      series = {
        requests: metrics.httpRequests.labels({ method, route, status: String(status) }),
        duration: metrics.httpDuration.labels({ method, route }),
      };
      bound.set(key, series);
    }
    return series;
  };
}
