import type { IncomingMessage } from 'node:http';
import type { Deps } from '../deps.js';
import { type Check } from '../throttle/index.js';
import { createRefusalAnswers, longestWait } from './throttle-answers.js';
import { answerFor, takenFrom, type Decide, type KnownRefusal, type Limit } from './decision.js';
import { isOverLimit } from '../throttle/cost.js';
import { overLimitAnswer } from './throttle-answers.js';
import type { RouteCost } from './route-cost.js';

export type { KnownRefusal } from './decision.js';

/** A route guard's early refusal: the answer for a request it would refuse from memory, else undefined. */
export type RefuseKnown = (req: IncomingMessage) => KnownRefusal | undefined;

/**
 * For a route whose guard counts a request without a user by `check`: a request without credentials from a client
 * this process already knows the throttle refuses is refused now (docs/throttling.md "Refusals: the cheap answer,
 * logged by sample"), recorded by decision.ts as the throttle records a refusal, with no Redis, no token lookup and
 * no body read. Undefined for any other request, and nothing counted: the route's guard decides it. A request with
 * `Authorization` is never refused here, whatever it holds.
 */
export function refuseKnown(
  { throttler }: Pick<Deps, 'throttler'>,
  decide: Decide,
  check: (req: IncomingMessage) => Check | undefined,
  cost?: RouteCost,
): RefuseKnown {
  const answers = createRefusalAnswers();
  // Only `series` and `answer` are read of a limit for a decision already taken.
  const memory: Pick<Limit, 'series' | 'answer'> = {
    series: (scope) => scope,
    answer: (taken, counted, rule) =>
      isOverLimit(taken.decisions) ? overLimitAnswer(counted) : answerFor(answers, counted, taken, rule),
  };
  return (req) => {
    if (req.headers.authorization !== undefined) return undefined;
    let known = check(req);
    if (!known) return undefined;
    // A request that weighs more is remembered refused only for its own cost or more (refusals.ts).
    const units = cost?.of(req, known.rule);
    if (units !== undefined) known = { ...known, cost: units };
    const started = performance.now();
    const decisions = throttler.knownRefusal(known);
    if (!decisions) return undefined;
    return decide.record(memory, known, takenFrom(decisions, longestWait(decisions)), started).refusal;
  };
}
