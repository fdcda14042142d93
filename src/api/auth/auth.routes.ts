import { issueToken, revokeToken } from '../../auth/tokens.js';
import { Errors } from '../../base/errors.js';
import { logStoreFailure } from '../../stores/store-errors.js';
import { buildScopes } from '../../throttle/index.js';
import { readBody } from '../body.js';
import { readCredentials } from './credentials.input.js';
import { createLoginHashing, createLoginLimit } from './login-limit.js';
import type { ResourceRouter, RouteParts } from '../router.js';
import { requireUser } from '../users.js';
import { defineOperation, route } from '../openapi/operation.js';
import { credentialsSchema, tokenSchema } from '../openapi/schemas.js';

const authOperations = {
  login: defineOperation({
    method: 'post',
    path: '/api/auth/token/',
    operationId: 'obtainToken',
    summary: 'Log in: a bearer token for a username and password',
    description:
      'Throttled per address by the `token-obtain` scope and per username named by the `login` scope, which answers ' +
      '503 rather than admit when Redis cannot count. Wrong credentials: 400 `{"non_field_errors": [...]}`.',
    tag: 'auth',
    access: 'optional',
    body: credentialsSchema,
    responses: { 200: { description: 'A token valid for TOKEN_TTL.', body: tokenSchema } },
  }),
  logout: defineOperation({
    method: 'delete',
    path: '/api/auth/token/',
    operationId: 'revokeToken',
    summary: 'Log out: revoke the token sent',
    tag: 'auth',
    access: 'required',
    responses: { 204: { description: 'Revoked.' } },
  }),
};

/**
 * Login (`POST`) and logout (`DELETE`) of bearer tokens. Login has its own `token-obtain` budget
 * per address and, for every attempt that names a username, the `login` budget of that name
 * (docs/security.md "Password guessing").
 */
export function authRoutes(router: ResourceRouter, { deps, guard }: RouteParts): void {
  const { db, clock, config } = deps;
  const shadows = { rates: config.THROTTLE_SHADOW_RATES, scopes: config.THROTTLE_SHADOW_SCOPES };
  const limitLogin = createLoginLimit(deps, buildScopes({ login: config.THROTTLE_LOGIN }, {}, shadows).get('login')!);
  const hashing = createLoginHashing(deps);

  route(router, authOperations.login, guard({ scope: 'token-obtain' }), async (ctx) => {
    const { username, password, errors } = readCredentials(await readBody(ctx, config.BODY_LIMIT_BYTES));
    // Counted before the other fields are judged and before any password work: a refused attempt costs no scrypt.
    if (username !== '' && !(await limitLogin(ctx, username))) return;
    if (errors) throw Errors.validation(errors);
    const attempt = hashing.verifierFor(ctx);
    const issued = await issueToken(db, username, password, config.TOKEN_TTL, clock.now(), attempt.verify);
    attempt.settle(issued !== null);
    if (!issued) throw Errors.validation({ non_field_errors: ['Unable to log in with provided credentials.'] });
    ctx.body = { token: issued.token, expires_at: issued.expiresAt.toISOString() };
  });

  route(router, authOperations.logout, guard(), async (ctx) => {
    requireUser(ctx);
    const token = ctx.get('Authorization').trim().split(/\s+/)[1]!;
    await revokeToken(db, token, clock.now());
    // Every worker that remembers a token looks it up again. Should Redis not take the new epoch,
    // other workers could still accept the token: the client is told to repeat the logout (the
    // token is already revoked here, so repeating is safe).
    await deps.readCache?.channel.rotateTokenEpoch().catch((error: unknown) => {
      logStoreFailure(deps.logger, error, 'token epoch not rotated after a logout');
      throw Errors.unavailable(
        'The token was revoked, but not every server could be told yet. Repeat the logout shortly.',
        1,
      );
    });
    ctx.status = 204;
  });

  router.refuseOtherMethods(() => guard({ scope: 'token-obtain' }));
}
