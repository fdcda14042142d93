import type { IncomingMessage } from 'node:http';
import type { Deps } from '../deps.js';
import { createRefusalAnswers, longestWait, type Check, type Decision, type RefusalAnswer } from '../throttle/index.js';
import { refusalOf } from './refusal.js';
import type { Refusal } from './request-state.js';
import { seriesFor, watchDecisions } from './throttle.js';

/** A refusal answered from this process's memory: who was refused, and the 429's own fields and body. */
export interface KnownRefusal {
  refusal: Refusal;
  answer: RefusalAnswer;
}

/** A route guard's early refusal: the answer for a request it would refuse from memory, else undefined. */
export type RefuseKnown = (req: IncomingMessage) => KnownRefusal | undefined;

/**
 * For a route whose guard counts a request without a user by `check`: a request without credentials from a client
 * this process already knows the throttle refuses is refused now (docs/throttling.md "Refusals: the cheap answer,
 * logged by sample"), counted as the throttle counts a refusal (its decisions and check time, the watch of who is
 * refused) with no Redis, no token lookup and no body read. Undefined for any other request, and nothing counted:
 * the route's guard decides it. A request with `Authorization` is never refused here, whatever it holds.
 */
export function refuseKnown(
  deps: Pick<Deps, 'config' | 'metrics' | 'throttler' | 'watch'>,
  check: (req: IncomingMessage) => Check | undefined,
): RefuseKnown {
  const series = seriesFor(deps);
  const answers = createRefusalAnswers();
  return (req) => {
    if (req.headers.authorization !== undefined) return undefined;
    const known = check(req);
    if (!known) return undefined;
    const started = performance.now();
    const decisions = deps.throttler.knownRefusal(known);
    if (!decisions) return undefined;
    const { duration, throttled } = series(known.rule.scope);
    duration.observe((performance.now() - started) / 1000);
    throttled.inc();
    watchDecisions(deps, series, decisions, known.ident);
    const rejected = longestWait(decisions) as Decision;
    const seconds = rejected.retryAfterS;
    const refusal = refusalOf(rejected.scope, known.ident, seconds, true, deps.watch?.pseudonym(known.ident));
    return { refusal, answer: answers(decisions, seconds) };
  };
}
