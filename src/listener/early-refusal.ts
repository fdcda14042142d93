import type { IncomingMessage, ServerResponse } from 'node:http';
import { requestIdOf } from '../edge/answer.js';
import { hasOneHost } from '../edge/base-headers.js';
import type { RefuseKnown } from '../edge/known-refusal.js';
import { writeRefusal } from '../edge/refusal.js';
import type { RequestRecorder } from '../edge/request-context.js';
import { plainPath } from './classify.js';

/** The route a request's method selects at its path, as the early refusal reads it (src/api/router.ts). */
export interface EarlyRoute {
  template: string;
  /** Its guard's refusal from memory; undefined for a route no guard counts. */
  refuseKnown: RefuseKnown | undefined;
}

/** What the early refusal reads of the app: its routes, their `Allow` values, and its request records. */
export interface EarlyRefusalParts {
  lookup(path: string, method: string): EarlyRoute | undefined;
  allowOf(template: string): string | undefined;
  recorder: RequestRecorder;
}

/**
 * Answers, before Koa, a request whose route's guard would refuse it from this process's memory
 * (docs/throttling.md "Refusals: the cheap answer, logged by sample"), with the bytes the app would
 * send (writeEdgeAnswer, src/edge/answer.ts). Counted and logged as the app does
 * (`recorder`: the same metric series and sampled access log). Any request the app might answer
 * otherwise (a URL Koa parses the slow way, a missing or repeated Host, credentials, a route whose
 * chain does not start with a guard, a client not known to be refused) is left to the app: false.
 */
export function answerEarlyRefusals(parts: EarlyRefusalParts): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { lookup, allowOf, recorder } = parts;
  return (req, res) => {
    const started = performance.now();
    const path = plainPath(req.url);
    if (path === undefined || req.method === undefined || !hasOneHost(req)) return false;
    const route = lookup(path, req.method);
    const known = route?.refuseKnown?.(req);
    if (!route || !known) return false;
    const requestId = requestIdOf(recorder, req);
    const seconds = (performance.now() - started) / 1000;
    const { method } = req;
    recorder.record({ requestId, method, route: route.template, status: 429, seconds, refusal: known.refusal });
    writeRefusal(res, known.answer, { requestId, allow: allowOf(route.template), accept: req.headers.accept });
    return true;
  };
}
