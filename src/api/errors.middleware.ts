import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { isDatabaseTimeout, isDatabaseUnreachable } from '../../db/connect.js';
import { DatabaseDeadlineError } from '../../db/deadline.js';
import { TurnTimeoutError } from '../auth/unknown-tokens.js';
import { AppError, Errors } from '../base/errors.js';
import { CommandTimeoutError } from '../events/store/group-commit.js';
import { PROBLEM_JSON, prefersProblem, problemOf } from '../server/problem-details.js';

/**
 * The one place errors become responses: every error is JSON; an AppError answers with its own
 * status, body and headers; a request that waited past its deadline for the database is 503 with
 * `Retry-After`; anything else is logged with its stack and answered with a bare 500. The body is
 * DRF's, or its problem details for a client that asks for them (docs/api.md "Problem details").
 */
export function handleErrors(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      const waited = waitedTooLong(error);
      const known = error instanceof AppError && error.expose;
      if (waited)
        logger.warn(
          { requestId: ctx.state.requestId, reason: (error as Error).message },
          'request answered 503: the database did not answer in time or is unreachable',
        );
      else if (!known) logger.error({ err: error, requestId: ctx.state.requestId }, 'request failed');
      const appError = waited ?? (known ? error : fromUnknown(error));
      ctx.status = appError.status;
      ctx.set(appError.headers);
      if (!prefersProblem(ctx.req.headers.accept)) ctx.body = appError.body;
      else {
        ctx.set('Content-Type', PROBLEM_JSON);
        ctx.body = problemOf(appError.status, appError.body);
      }
    }
  };
}

/** Seconds a client is asked to wait before retrying a request the database had no time for. */
const RETRY_AFTER_S = 1;

/**
 * The 503 for a request whose database work did not start in time (no pool connection within
 * DATABASE_WAIT_MS, its command's turn at the append lock or its token lookup's turn not within it)
 * or was cancelled by DATABASE_STATEMENT_TIMEOUT_MS: in each case nothing of it was written. Also
 * for a database that is unreachable or went away mid-request (see isDatabaseUnreachable for what
 * was written).
 */
function waitedTooLong(error: unknown): AppError | undefined {
  // The server stopped answering while a COMMIT was in flight: it may still commit
  // (docs/architecture.md "Bounded work").
  if (error instanceof DatabaseDeadlineError && error.inDoubt) {
    return Errors.unavailable(
      'The database did not confirm the write in time: it may still be made. Repeat the request with the same ' +
        'Idempotency-Key to learn its outcome.',
      RETRY_AFTER_S,
    );
  }
  if (error instanceof CommandTimeoutError || error instanceof TurnTimeoutError || isDatabaseTimeout(error)) {
    return Errors.unavailable('The database is busy and could not answer in time. Try again later.', RETRY_AFTER_S);
  }
  // PostgreSQL down or gone mid-request (docs/security.md "Outages"): the process keeps serving what it can
  // without it and answers the rest 503 until it is back, with no restart.
  if (isDatabaseUnreachable(error))
    return Errors.unavailable('The database is unavailable. Try again shortly.', RETRY_AFTER_S);
  return undefined;
}

function fromUnknown(error: unknown): AppError {
  // Koa and its body readers throw http-errors with `status` and `expose` for client mistakes.
  const e = error as { status?: number; expose?: boolean; message?: string };
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500 && e.expose) {
    return new AppError(e.status, { detail: e.message ?? 'Bad request.' });
  }
  return new AppError(500, { detail: 'A server error occurred.' });
}
