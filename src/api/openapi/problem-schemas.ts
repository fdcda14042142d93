import { z } from 'zod';
import { QUOTA_EXCEEDED_TITLE, QUOTA_EXCEEDED_TYPE } from '../../edge/quota-problem.js';
import { named, responses, validationErrorSchema } from './schemas.js';

/**
 * The error bodies as RFC 9457 problem details, which a client gets when its Accept asks for
 * `application/problem+json` (docs/api.md "Problem details"): every error but a throttle's 429 is of type
 * `about:blank`; that 429 is the IETF RateLimit draft's quota-exceeded problem.
 */

const seconds = z.number().int().min(1);

export const problemSchema = named(
  responses,
  'Problem',
  z.object({
    type: z.literal('about:blank'),
    title: z.string().describe('The status phrase: `Not Found`, `Bad Request`…'),
    status: z.number().int().min(400).max(599).describe("The answer's status code."),
    detail: z.string().describe("DRF's text, as the `detail` of the JSON answer; `Invalid input.` beside `errors`."),
    errors: validationErrorSchema
      .optional()
      .describe('A 400 for a body that does not validate: each bad field with its messages, as DRF lists them.'),
  }),
  'An error as RFC 9457 problem details, for a client whose Accept asks for `application/problem+json`.',
);

export const quotaExceededSchema = named(
  responses,
  'QuotaExceeded',
  z.object({
    type: z.literal(QUOTA_EXCEEDED_TYPE),
    title: z.literal(QUOTA_EXCEEDED_TITLE),
    status: z.literal(429),
    detail: z.string().describe("DRF's text: `Request was throttled. Expected available in 37 seconds.`"),
    'violated-policies': z
      .array(z.string())
      .describe('The names of the policies the request exceeded, as `RateLimit-Policy` names them.'),
    policies: z
      .array(
        z.object({
          scope: z.string().describe('The throttle scope: the policy name (`anon`, `user:concurrent`).'),
          quota: z.number().int().min(0).describe('Its `q`: requests per window, or requests in progress.'),
          window: seconds.optional().describe('Its `w`: the window in seconds; none for a concurrency limit.'),
          'quota-unit': z
            .literal('concurrent-requests')
            .optional()
            .describe('Its `qu` for a concurrency limit; absent for requests.'),
          plan: z.string().optional().describe("The client's plan whose quota this is, when one sets it."),
          override: z.string().optional().describe("The override that set this client's quota, when one did."),
        }),
      )
      .describe('Each violated policy, in the order of `violated-policies`.'),
    'retry-after': seconds.describe('Seconds to wait: the value of the `Retry-After` field.'),
  }),
  'A throttle 429 as the IETF RateLimit draft\'s "quota-exceeded" problem (draft-ietf-httpapi-ratelimit-headers).',
);
