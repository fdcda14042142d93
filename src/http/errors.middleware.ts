import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { AppError } from '../errors.js';

/**
 * The one place errors become responses: every error is JSON; an AppError answers with its own
 * status, body and headers; anything else is logged with its stack and answered with a bare 500.
 */
export function handleErrors(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      const known = error instanceof AppError && error.expose;
      if (!known) logger.error({ err: error, requestId: ctx.state.requestId }, 'request failed');
      const appError = known ? error : fromUnknown(error);
      ctx.status = appError.status;
      ctx.set(appError.headers);
      ctx.body = appError.body;
    }
  };
}

function fromUnknown(error: unknown): AppError {
  // Koa and its body readers throw http-errors with `status` and `expose` for client mistakes.
  const e = error as { status?: number; expose?: boolean; message?: string };
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500 && e.expose) {
    return new AppError(e.status, { detail: e.message ?? 'Bad request.' });
  }
  return new AppError(500, { detail: 'A server error occurred.' });
}
