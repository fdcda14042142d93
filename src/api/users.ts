import type { Context } from 'koa';
import type { User } from '../auth/users.repository.js';
import { Errors } from '../base/errors.js';

/** The authenticated user, or a 401 for an anonymous client. */
export function requireUser(ctx: Context): User {
  const user = ctx.state.user;
  if (!user) throw Errors.notAuthenticated();
  return user;
}
