/**
 * The parts of the API document every operation shares (docs/architecture.md "API document"):
 * authentication schemes, the pagination and conditional-request parameters, the headers, and
 * the error answers of the guard and of the body reader, with the texts of src/base/errors.ts, each
 * also as problem details (docs/api.md "Problem details").
 */

import { PROBLEM_JSON, problemOf } from '../../server/problem-details.js';
import { throttledDetail } from '../../edge/throttle-answers.js';
import { quotaExceededProblem } from '../../edge/quota-problem.js';

type Json = Record<string, unknown>;

const THROTTLED = throttledDetail(37);

export const REF = {
  schema: (id: string) => `#/components/schemas/${id}`,
  parameter: (name: string) => `#/components/parameters/${name}`,
  header: (name: string) => `#/components/headers/${name}`,
  response: (name: string) => `#/components/responses/${name}`,
};

const integerAtLeast = (minimum: number) => ({ type: 'integer', minimum });
const text = { type: 'string' };

const parameters: Record<string, Json> = {
  page: {
    name: 'page',
    in: 'query',
    description: 'Page-number style: 1-based page, or `last`. Beyond the last page: 404 `Invalid page.`',
    schema: { anyOf: [integerAtLeast(1), { type: 'string', const: 'last' }] },
  },
  page_size: {
    name: 'page_size',
    in: 'query',
    description: 'Page-number and cursor styles: items per page (default PAGE_SIZE, clamped to MAX_PAGE_SIZE).',
    schema: integerAtLeast(1),
  },
  limit: {
    name: 'limit',
    in: 'query',
    description: 'Limit/offset style: items per page (default PAGE_SIZE, clamped to MAX_PAGE_SIZE).',
    schema: integerAtLeast(1),
  },
  offset: {
    name: 'offset',
    in: 'query',
    description: 'Limit/offset style: items to skip (default 0).',
    schema: integerAtLeast(0),
  },
  cursor: {
    name: 'cursor',
    in: 'query',
    description:
      'Cursor style: empty for the first page, then the token of a `next`/`previous` link. Not with `page`, `limit` ' +
      'or `offset` (400).',
    schema: text,
    allowEmptyValue: true,
  },
  'If-Match': {
    name: 'If-Match',
    in: 'header',
    description:
      'Change only if the task\'s current ETag is one of these strong tags (`"<id>-<version>"`), or `*`; else 412.',
    schema: text,
  },
  'If-None-Match': {
    name: 'If-None-Match',
    in: 'header',
    description:
      'On a read: 304 when a tag is still current. On a change: 412 when the current ETag is one of these, or `*`.',
    schema: text,
  },
  'Idempotency-Key': {
    name: 'Idempotency-Key',
    in: 'header',
    description:
      'Up to 255 characters. Repeating a request with the same key within 24 hours replays the first answer; another ' +
      'body or endpoint with it is 422.',
    schema: { type: 'string', maxLength: 255 },
  },
};

const headers: Record<string, Json> = {
  ETag: {
    description: 'Strong entity tag: `"<id>-<version>"` for a task, `"L<head>.<digest>"` for a list.',
    schema: text,
  },
  Location: { description: 'Absolute URL of the created resource.', schema: { type: 'string', format: 'uri' } },
  'Cache-Control': { description: '`no-cache`: revalidate with `If-None-Match`.', schema: text },
  'Idempotent-Replayed': {
    description: '`true` when this answer replays the first request with the same `Idempotency-Key`.',
    schema: { const: 'true' },
  },
  'Retry-After': { description: 'Seconds to wait before trying again.', required: true, schema: integerAtLeast(0) },
  'WWW-Authenticate': {
    description:
      'The scheme to authenticate with: `Bearer realm="api"`; for a refused token also `error="invalid_token"`, ' +
      'with `error_description="The token has expired"` or `"The token has been revoked"` where known (log in again).',
    schema: text,
  },
  Allow: { description: "The methods of the path, in DRF's order.", schema: text },
  'RateLimit-Policy': {
    description:
      'One member per throttle scope that applied: `"<scope>";q=<limit>;w=<window seconds>` (IETF RateLimit fields). ' +
      'Absent while throttling is off.',
    schema: text,
  },
  RateLimit: {
    description:
      'One member per scope: `"<scope>";r=<remaining>;t=<seconds until r grows>`. On a 429, `t` equals `Retry-After`. ' +
      'While Redis is unreachable (THROTTLE_FAILURE_MODE=local, the default) the answer also carries ' +
      "`Paceline-Throttle: local`: `r` and `t` are then of the answering worker's share of the limit.",
    schema: text,
  },
};

/** An error answer of `status`: DRF's `{detail}`, or its problem details for a client that asks for them. */
const detail = (status: number, description: string, example: string, extra: Json = {}): Json => ({
  description,
  ...extra,
  content: {
    'application/json': { schema: { $ref: REF.schema('Error') }, example: { detail: example } },
    [PROBLEM_JSON]: { schema: { $ref: REF.schema('Problem') }, example: problemOf(status, { detail: example }) },
  },
});
const rateLimitFields = {
  'RateLimit-Policy': { $ref: REF.header('RateLimit-Policy') },
  RateLimit: { $ref: REF.header('RateLimit') },
};

const responses: Record<string, Json> = {
  BadRequest: {
    description:
      'A malformed request: `{detail}` (a query parameter, JSON syntax) or a validation error mapping each field to ' +
      'its messages.',
    content: {
      'application/json': {
        schema: { anyOf: [{ $ref: REF.schema('Error') }, { $ref: REF.schema('ValidationError') }] },
      },
      [PROBLEM_JSON]: {
        schema: { $ref: REF.schema('Problem') },
        example: problemOf(400, { title: ['This field may not be blank.'] }),
      },
    },
  },
  NotAuthenticated: detail(
    401,
    'No credentials, or a token that is unknown, expired or revoked.',
    'Authentication credentials were not provided.',
    {
      headers: { 'WWW-Authenticate': { $ref: REF.header('WWW-Authenticate') }, ...rateLimitFields },
    },
  ),
  InvalidToken: detail(
    401,
    'A token was sent but is malformed, unknown, expired or revoked (anonymous clients need none here).',
    'Invalid token.',
    {
      headers: { 'WWW-Authenticate': { $ref: REF.header('WWW-Authenticate') }, ...rateLimitFields },
    },
  ),
  NotFound: detail(404, 'No such resource (or an invalid page or cursor on a list).', 'Not found.'),
  NotAcceptable: detail(
    406,
    'The Accept header excludes JSON, the only representation.',
    'Could not satisfy the request Accept header.',
  ),
  PayloadTooLarge: detail(
    413,
    'The body is larger than BODY_LIMIT_BYTES (default 65536).',
    'Request body is larger than 65536 bytes.',
  ),
  UnsupportedMediaType: detail(
    415,
    'The body is not `application/json` in UTF-8.',
    'Unsupported media type "text/plain" in request. Send the body as JSON with Content-Type: application/json.',
  ),
  Throttled: {
    description:
      "Over the rate of the request's throttle scope, or its requests in progress: wait `Retry-After` seconds. As " +
      "problem details, the IETF RateLimit draft's quota-exceeded type with the violated policies.",
    headers: { 'Retry-After': { $ref: REF.header('Retry-After') }, ...rateLimitFields },
    content: {
      'application/json': { schema: { $ref: REF.schema('Error') }, example: { detail: THROTTLED } },
      [PROBLEM_JSON]: {
        schema: { $ref: REF.schema('QuotaExceeded') },
        example: quotaExceededProblem([{ scope: 'anon', quota: 20, window: 60 }], 37, THROTTLED),
      },
    },
  },
  Unavailable: detail(
    503,
    "The database did not answer in time, Redis could not take a write's publication, or the throttle store is down " +
      'with THROTTLE_FAILURE_MODE=closed. Nothing was written: retry after `Retry-After`.',
    'The database is busy and could not answer in time. Try again later.',
    { headers: { 'Retry-After': { $ref: REF.header('Retry-After') } } },
  ),
};

export function commonComponents(): Json {
  return {
    parameters,
    headers,
    responses,
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description: 'A token from `POST /api/auth/token/`: `Authorization: Bearer <token>`.',
      },
      tokenAuth: {
        type: 'apiKey',
        in: 'header',
        name: 'Authorization',
        description: "DRF's spelling of the same token: `Authorization: Token <token>`.",
      },
    },
  };
}
