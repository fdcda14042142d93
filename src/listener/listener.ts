import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Config } from '../settings/config.js';
import type { Metrics } from '../base/metrics.js';
import { PROBLEM_JSON, prefersProblem, problemOf } from '../server/problem-details.js';
import type { Deps } from '../deps.js';
import { createApi, type ExtraRoutes } from '../api/app.js';
import { JSON_TYPE, LIVENESS, requestIdOf, writeEdgeAnswer, type AnswerRecorder } from '../edge/answer.js';
import { AdaptiveLimit } from './adaptive-limit.js';
import { Admission, LEVEL_NAMES, SHED_REASONS, type Level, type ShedReason } from './admission.js';
import { classifyRequests, type Classified } from './classify.js';
import { answerEarlyRefusals } from './early-refusal.js';

/** What the listener reads of the app, besides the app itself. */
export interface ListenerParts {
  classify(req: IncomingMessage): Classified;
  /** Answers a request the worker refuses from memory (early-refusal.ts) and returns true; else false. */
  answerEarly(req: IncomingMessage, res: ServerResponse): boolean;
  recorder: AnswerRecorder;
  metrics: Metrics;
  config: Pick<
    Config,
    | 'ADMISSION_CONTROL'
    | 'ADMISSION_QUEUE_MS'
    | 'ADMISSION_QUEUE_SIZE'
    | 'ADMISSION_LIMIT_MIN'
    | 'ADMISSION_LIMIT_MAX'
    | 'BODY_LIMIT_BYTES'
  >;
}

/** The shed 503's body: answered before the throttle, so nothing was counted. */
export const SHED_DETAIL = { detail: 'Service temporarily unavailable, try again later.' };
const SHED_BODY = Buffer.from(JSON.stringify(SHED_DETAIL));
/** The shed 503 as problem details (docs/api.md "Problem details"). */
const SHED_PROBLEM = Buffer.from(JSON.stringify(problemOf(503, SHED_DETAIL)));
const LIVE_BODY = Buffer.from(JSON.stringify(LIVENESS));

/**
 * The API's request listener (docs/architecture.md "The request's journey"), which the server calls for every
 * request: the listener below, in front of the Koa app `createApi` builds, reading the app's routes, `Allow`
 * values and request records.
 */
export function createApiListener(deps: Deps, extraRoutes: ExtraRoutes = []): RequestListener & { close(): void } {
  const { app, recorder, lookup, allowOf } = createApi(deps, extraRoutes);
  const handle = app.callback();
  const answerEarly = answerEarlyRefusals({ lookup, allowOf, recorder });
  const classify = classifyRequests({ lookup, allowOf }, deps);
  const { config, metrics } = deps;
  return admitBeforeApp({ classify, answerEarly, recorder, metrics, config }, (req, res) => void handle(req, res));
}

/**
 * The listener (docs/throttling.md "Past capacity: admission and shedding"): `GET /healthz`
 * is answered here, before the app, whatever the load, and so is a client the throttle refuses from memory
 * (`answerEarly`: a 429 takes no slot and waits behind no request); every other request goes through
 * admission (ADMISSION_CONTROL=on), which starts it, queues it or sheds it with a 503 written
 * as cheaply as a throttle refusal, and drops a queued request whose client left before any work.
 */
function admitBeforeApp(parts: ListenerParts, app: RequestListener): RequestListener & { close(): void } {
  const { config, metrics, recorder } = parts;
  const admission = new Admission(
    new AdaptiveLimit({ min: config.ADMISSION_LIMIT_MIN, max: config.ADMISSION_LIMIT_MAX }),
    { queueSize: config.ADMISSION_QUEUE_SIZE, queueMs: config.ADMISSION_QUEUE_MS },
  );
  const on = config.ADMISSION_CONTROL === 'on';
  const gauges = () => {
    metrics.admissionInProgress.set(admission.inFlight);
    metrics.admissionQueued.set(admission.queued);
    metrics.admissionLimit.set(admission.limit.value);
  };
  gauges();
  // Every shed series exists from the start, at 0, so that rate() sees a host's first shedding.
  for (const name of LEVEL_NAMES)
    for (const reason of SHED_REASONS) metrics.admissionShed.labels({ class: name, reason }).inc(0);
  const listener: RequestListener = (req, res) => {
    const classified = parts.classify(req);
    if (classified.level === 'health' && classified.route === '/healthz' && req.method === 'GET')
      return answerLive(req, res, classified, recorder);
    if (parts.answerEarly(req, res)) return on ? void metrics.admissionMemory.inc() : undefined;
    if (!on || classified.level === 'health') return void app(req, res);
    if (classified.level === 'memory') {
      metrics.admissionMemory.inc();
      return void app(req, res);
    }
    const level = classified.level;
    const queuedAt = performance.now();
    admission.admit({
      level,
      queuedAt,
      start() {
        const startedAt = performance.now();
        const inFlightAtStart = admission.inFlight;
        metrics.admissionQueueSeconds.labels({ class: LEVEL_NAMES[level] }).observe((startedAt - queuedAt) / 1000);
        res.once('close', () => {
          admission.finish(performance.now() - startedAt, inFlightAtStart, didWork(res));
          gauges();
        });
        app(req, res); // started from admit() or finish(), both of which set the gauges after
      },
      shed(reason) {
        shedRequest(req, res, { ...classified, level }, reason, parts);
        gauges();
      },
      gone: () => req.socket.destroyed,
      left() {
        if (req.socket.destroyed) metrics.admissionAbandoned.inc();
      },
    });
    gauges();
  };
  return Object.assign(listener, { close: () => admission.close() });
}

/**
 * Whether an answer's latency says what the worker's work costs, for the adaptive limit (docs/throttling.md "Past
 * capacity: admission and shedding"): a success, a redirect or a server error did the work or met its trouble; a
 * client error (401, 404, 406, a 429 from memory...) was refused before or without it, and a request whose client
 * left before its answer was cut short. Learning from those would make a flood of refused clients look like fast
 * work and raise the limit for the requests that do reach PostgreSQL.
 */
function didWork(res: ServerResponse): boolean {
  return res.writableFinished && (res.statusCode < 400 || res.statusCode >= 500);
}

function answerLive(req: IncomingMessage, res: ServerResponse, route: Classified, recorder: AnswerRecorder): void {
  const requestId = requestIdOf(recorder, req);
  writeEdgeAnswer(res, { status: 200, requestId, fields: JSON_TYPE, body: LIVE_BODY, allow: route.allow });
  recorder.record({ requestId, method: 'GET', route: route.route, status: 200, seconds: 0 });
}

/**
 * 503 with a `Retry-After` of 1 to 3 s, spread so that the shed do not all come back together, and
 * DRF's text for a service unavailable; logged by sample (one line per class and reason a minute).
 */
function shedRequest(
  req: IncomingMessage,
  res: ServerResponse,
  route: Classified & { level: Level },
  reason: ShedReason,
  parts: ListenerParts,
): void {
  if (res.headersSent || req.socket.destroyed) return;
  const requestId = requestIdOf(parts.recorder, req);
  const retryAfterS = 1 + Math.floor(Math.random() * 3);
  const name = LEVEL_NAMES[route.level];
  parts.metrics.admissionShed.labels({ class: name, reason }).inc();
  const refusal = { scope: 'admission', client: `${name} ${reason}`, retryAfterS, local: true };
  parts.recorder.record({
    requestId,
    method: req.method ?? 'GET',
    route: route.route,
    status: 503,
    seconds: 0,
    refusal,
  });
  // A body no larger than the app accepts is read past and the connection kept, as for a throttle refusal: closing
  // it would make its client connect again for each shed write. A larger or chunked one
  // is not read: the connection closes after the answer.
  const length = req.headers['content-length'];
  const close =
    req.headers['transfer-encoding'] !== undefined ||
    (length !== undefined && !(Number(length) <= parts.config.BODY_LIMIT_BYTES));
  const problem = prefersProblem(req.headers.accept);
  const type = problem ? ['Content-Type', PROBLEM_JSON] : JSON_TYPE;
  const fields = [...type, 'Retry-After', String(retryAfterS), ...(close ? ['Connection', 'close'] : [])];
  writeEdgeAnswer(res, {
    status: 503,
    requestId,
    fields,
    body: problem ? SHED_PROBLEM : SHED_BODY,
    allow: route.allow,
  });
}
