/**
 * The IETF RateLimit draft's problem type for a 429 (draft-ietf-httpapi-ratelimit-headers, "Problem Types":
 * "Quota Exceeded"), as RFC 9457 problem details (docs/api.md "Problem details").
 */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** The draft's title for the type: the same on every occurrence, as RFC 9457 asks. */
export const QUOTA_EXCEEDED_TITLE = 'Request cannot be satisfied as assigned quota has been exceeded';

/** A quota policy a refused request violated, as the problem's `policies` member lists it. */
export interface ViolatedPolicy {
  /** Its name in `RateLimit-Policy`: the throttle scope (`anon`, `user:concurrent`). */
  scope: string;
  /** Its `q`: the requests it admits in its window, or the requests in progress it allows. */
  quota: number;
  /** Its `w` in seconds; none for a concurrency limit. */
  window?: number;
  /** Its `qu` when not requests: `concurrent-requests` for a concurrency limit. */
  quotaUnit?: 'concurrent-requests';
  /** The client's plan whose quota this is, when the scope's quota comes from one. */
  plan?: string;
  /** The override that set this client's quota, when one did. */
  override?: string;
}

/**
 * The quota-exceeded problem of a 429 waiting `retryAfterS` (the `Retry-After` field's value), whose `detail` is
 * DRF's text: `type`, `title`, `status`, `detail`, the draft's `violated-policies` (the policies' names, as
 * `RateLimit-Policy` names them), `policies` (each of them: scope, quota, window, and plan and override when
 * given) and `retry-after` (seconds).
 */
export function quotaExceededProblem(
  policies: readonly ViolatedPolicy[],
  retryAfterS: number,
  detail: string,
): Record<string, unknown> {
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: QUOTA_EXCEEDED_TITLE,
    status: 429,
    detail,
    'violated-policies': policies.map((policy) => policy.scope),
    policies: policies.map(policyMember),
    'retry-after': retryAfterS,
  };
}

function policyMember({ scope, quota, window, quotaUnit, plan, override }: ViolatedPolicy): Record<string, unknown> {
  const member: Record<string, unknown> = { scope, quota };
  if (window !== undefined) member.window = window;
  if (quotaUnit !== undefined) member['quota-unit'] = quotaUnit;
  if (plan !== undefined) member.plan = plan;
  if (override !== undefined) member.override = override;
  return member;
}
