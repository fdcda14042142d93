import type { Context } from 'koa';
import { createHashBudget } from '../../auth/hash-budget.js';
import { verifyPassword } from '../../auth/passwords.js';
import type { PasswordCheck } from '../../auth/tokens.js';
import type { Deps } from '../../deps.js';
import { Errors } from '../../base/errors.js';
import type { ScopeRule } from '../../throttle/index.js';
import { ipKey, loginIdent } from '../../throttle/index.js';
import { createRefusalAnswers, longestWait, rateLimitHeaders } from '../../edge/throttle-answers.js';
import { createDecide, takenFrom, type Decide, type Limit } from '../../edge/decision.js';
import { answerRefusal } from '../../edge/refusal.js';
import { clientAddressOf } from '../../server/client-address.js';
import { createBurstLogger, STORE_DOWN_RETRY_S } from '../../edge/throttle-store-down.js';

/**
 * Checks one login attempt against the budget of the username it names: true when it may go on; false when it
 * was refused with a 429 (recorded by the one refusal writer, refusal.ts: the route returns); throws its 503.
 */
export type LoginLimit = (ctx: Context, username: string) => Promise<boolean>;

/**
 * The per-account login budget (docs/security.md "Password guessing"): every attempt that names a username
 * counts against that name, normalised and hashed (`loginIdent`), from whichever address it
 * comes, whether the user exists or not. It runs after the route's per-address `token-obtain`
 * check and before any password work, so a refused attempt costs no scrypt. The decision is recorded by
 * decision.ts, as every limit's is.
 *
 * Always closed, whatever THROTTLE_FAILURE_MODE says: when Redis cannot answer, the attempt is
 * answered 503 and never reaches the password check. Its RateLimit fields are added to those of
 * `token-obtain`, on the 429 and on every other answer of an attempt it counted.
 */
export function createLoginLimit(deps: Deps, rule: ScopeRule, decide: Decide = createDecide(deps)): LoginLimit {
  const { config, cursorSecret } = deps;
  const limit = loginBudget(deps);
  return async (ctx, username) => {
    if (!config.THROTTLE_ENABLED) return true;
    const earlier = ctx.state.rateLimit ?? [];
    const decided = await decide.take(limit, { rule, ident: loginIdent(username, cursorSecret) }, earlier);
    if (!decided) return true;
    if (decided.refusal) {
      answerRefusal(ctx, decided.refusal.refusal, decided.refusal.answer);
      return false;
    }
    const headers = rateLimitHeaders([...earlier, ...decided.decisions]);
    for (const name in headers) ctx.set(name, headers[name] as string);
    return true;
  };
}

/** The login budget as the decision takes it (decision.ts): the sliding log in Redis, closed without it. */
function loginBudget(deps: Deps): Limit {
  const answers = createRefusalAnswers();
  return {
    store: { errors: createBurstLogger(deps, 'throttle store unavailable; logins are answered 503 until it is back') },
    series: (scope) => scope,
    async take(check) {
      const decisions = await deps.throttler.consume([check]);
      return takenFrom(decisions, longestWait(decisions));
    },
    withoutStore(check) {
      // A scope wholly in shadow never refuses, not even for want of Redis.
      if (check.rule.inShadow) return undefined;
      throw Errors.unavailable(
        'Logins are temporarily unavailable: their rate limit cannot be checked. Try again shortly.',
        STORE_DOWN_RETRY_S,
      );
    },
    answer: (taken, counted) => answers(counted, taken.refused!.retryAfterS),
  };
}

/** Password checks of logins within the process's hashing budget, queued per client address prefix. */
export interface LoginHashing {
  /** The check for one attempt from this request's client; no free slot in time throws its 503. */
  verifierFor(ctx: Context): { verify: PasswordCheck; settle(succeeded: boolean): void };
}

/**
 * The login CPU budget (docs/security.md "Login CPU budget"): at most LOGIN_HASH_CONCURRENCY
 * password hashes, real or decoy, at once in this process; a login that waits longer than
 * LOGIN_HASH_WAIT_MS for one is answered 503 with Retry-After. Attempts queue by client address
 * (IPv6 by LOGIN_IPV6_PREFIX), so the names they give play no part in when they are served.
 */
export function createLoginHashing({ config, metrics }: Pick<Deps, 'config' | 'metrics'>): LoginHashing {
  let peak = 0;
  const budget = createHashBudget({
    concurrency: config.LOGIN_HASH_CONCURRENCY,
    waitMs: config.LOGIN_HASH_WAIT_MS,
    observer: {
      changed(inFlight, waiting) {
        metrics.loginHashesInFlight.set(inFlight);
        metrics.loginHashesWaiting.set(waiting);
        if (inFlight > peak) metrics.loginHashesPeak.set((peak = inFlight));
      },
      finished: (seconds) => metrics.loginHashSeconds.inc(seconds),
      refused: () => metrics.loginHashRefused.inc(),
    },
  });
  metrics.loginHashesPeak.set(0);
  return {
    verifierFor(ctx) {
      const client = ipKey(clientAddressOf(ctx.req, config), config.LOGIN_IPV6_PREFIX);
      return {
        async verify(password, stored) {
          const turn = await budget.run(client, () => verifyPassword(password, stored));
          if (turn.ok) return turn.value;
          throw Errors.unavailable('Too many logins are being checked right now. Try again shortly.', turn.retryAfterS);
        },
        settle: (succeeded) => budget.settle(client, succeeded),
      };
    },
  };
}
