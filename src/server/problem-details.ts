import { STATUS_CODES } from 'node:http';

/**
 * RFC 9457 problem details, for a client that asks for them (docs/api.md "Problem details"); every other client
 * gets DRF's bodies, byte for byte.
 */

/** The media type of a problem details answer (RFC 9457 §3). */
export const PROBLEM_JSON = 'application/problem+json';

/** The text DRF's ValidationError says when it has no detail of its own: the `detail` of a 400 with field errors. */
const INVALID_INPUT = 'Invalid input.';

/** Whether an Accept field names the problem type at all; most do not, and are answered after this one test. */
const NAMES_PROBLEM = /application\/problem\+json/i;

/**
 * Whether a request whose `Accept` is `accept` gets its errors as problem details: when it names
 * `application/problem+json` with a weight above 0 and at least the weight it gives JSON (`application/json`, else
 * `application/*`, else `*\/*`, the most specific range that matches). So `application/problem+json` and
 * `application/json, application/problem+json` ask for them; `*\/*`, no Accept, or
 * `application/json, application/problem+json;q=0.5` do not.
 */
export function prefersProblem(accept: string | undefined): boolean {
  if (accept === undefined || !NAMES_PROBLEM.test(accept)) return false;
  let problem = 0;
  let json = { specificity: -1, weight: 0 };
  for (const member of accept.split(',')) {
    const [range = '', ...parameters] = member.split(';');
    const type = range.trim().toLowerCase();
    const weight = weightOf(parameters);
    if (type === PROBLEM_JSON) problem = Math.max(problem, weight);
    const specificity = JSON_RANGES.indexOf(type);
    if (specificity > json.specificity) json = { specificity, weight };
  }
  return problem > 0 && problem >= json.weight;
}

/** The ranges that match `application/json`, least specific first. */
const JSON_RANGES = ['*/*', 'application/*', 'application/json'];

/** A member's `q` (RFC 9110 §12.4.2): 1 when absent; an unreadable one counts as 0. */
function weightOf(parameters: readonly string[]): number {
  for (const parameter of parameters) {
    const [name = '', value = ''] = parameter.split('=');
    if (name.trim().toLowerCase() !== 'q') continue;
    const weight = Number(value.trim());
    return value.trim() !== '' && weight >= 0 && weight <= 1 ? weight : 0;
  }
  return 1;
}

/**
 * An error's DRF body as problem details (RFC 9457 §3.1) of type `about:blank`: `title` is the status's phrase,
 * `detail` DRF's text; a body of field errors (a 400 that did not validate) keeps them whole as `errors`, with DRF's
 * `Invalid input.` as its detail.
 */
export function problemOf(status: number, body: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const problem: Record<string, unknown> = { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status };
  if (typeof body.detail === 'string') problem.detail = body.detail;
  else Object.assign(problem, { detail: INVALID_INPUT, errors: body });
  return problem;
}
