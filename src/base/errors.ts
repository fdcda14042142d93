/**
 * An error with an HTTP answer. `expose` says whether the body may reach the client as is; the
 * error middleware replaces anything unexposed with a generic 500 and logs the original.
 */
export class AppError extends Error {
  override name = 'AppError';
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Readonly<Record<string, string>> = {},
    readonly expose = status < 500 || 'detail' in body,
  ) {
    super(typeof body.detail === 'string' ? body.detail : `HTTP ${status}`);
  }
}

/** The catalogue: every error the API answers with, by name, with DRF's texts. */
export const Errors = {
  badRequest: (detail: string) => new AppError(400, { detail }),
  validation: (fields: Record<string, string[]>) => new AppError(400, fields),
  invalidJson: (reason: string) => new AppError(400, { detail: `JSON parse error - ${reason}` }),
  notAuthenticated: () =>
    new AppError(
      401,
      { detail: 'Authentication credentials were not provided.' },
      { 'WWW-Authenticate': 'Bearer realm="api"' },
    ),
  invalidToken: (detail = 'Invalid token.', description?: string) =>
    new AppError(
      401,
      { detail },
      {
        'WWW-Authenticate': `Bearer realm="api", error="invalid_token"${
          description ? `, error_description="${description}"` : ''
        }`,
      },
    ),
  forbidden: () => new AppError(403, { detail: 'You do not have permission to perform this action.' }),
  notFound: () => new AppError(404, { detail: 'Not found.' }),
  methodNotAllowed: (method: string, allow: string) =>
    new AppError(405, { detail: `Method "${method}" not allowed.` }, { Allow: allow }),
  notAcceptable: () => new AppError(406, { detail: 'Could not satisfy the request Accept header.' }),
  preconditionFailed: (currentEtag: string, header: 'If-Match' | 'If-None-Match') =>
    new AppError(412, {
      detail:
        `Precondition failed: the task's current ETag is ${currentEtag}, which ` +
        `${header === 'If-Match' ? 'If-Match does not name' : 'If-None-Match excludes'}.`,
    }),
  preconditionFailedMissing: () => new AppError(412, { detail: 'Precondition failed: the task does not exist.' }),
  payloadTooLarge: (limit: number) => new AppError(413, { detail: `Request body is larger than ${limit} bytes.` }),
  unsupportedMediaType: (detail: string) => new AppError(415, { detail }),
  idempotencyMismatch: () =>
    new AppError(422, { detail: 'Idempotency-Key was already used with a different request body or endpoint.' }),
  unavailable: (detail: string, retryAfterS: number) =>
    new AppError(503, { detail }, { 'Retry-After': String(retryAfterS) }),
} as const;

/**
 * The body as an object of fields, or DRF's 400 `Invalid data. Expected a dictionary, but got
 * list.` (Python's type names: list, str, int, float, bool); for JSON `null`, DRF's `No data provided`.
 */
export function requireObject(body: unknown): Record<string, unknown> {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) return body as Record<string, unknown>;
  if (body === null) throw Errors.validation({ non_field_errors: ['No data provided'] });
  const got = Array.isArray(body)
    ? 'list'
    : typeof body === 'string'
      ? 'str'
      : typeof body === 'boolean'
        ? 'bool'
        : Number.isInteger(body)
          ? 'int'
          : 'float';
  throw Errors.validation({ non_field_errors: [`Invalid data. Expected a dictionary, but got ${got}.`] });
}
