import { z } from 'zod';

/** No NUL anywhere: PostgreSQL text cannot hold one. */
const NO_NUL = /^[^\u0000]*$/;
/** No NUL, and at least one character that is not white space: the trimmed text is not blank. */
const NOT_BLANK = /^[^\u0000]*[^\s\u0000][^\u0000]*$/;

/**
 * The schema of a text field as the request parsers read it (DRF's CharField: trimmed, not blank
 * unless `allowBlank`, no NUL, at most `max` characters), for the API document
 * (docs/architecture.md "API document"). `test/unit/request-schemas.unit.test.ts` checks that every
 * body the document accepts, the parsers accept.
 */
export function charField(rule: { max?: number; allowBlank?: boolean } = {}): z.ZodString {
  const text = z.string().regex(rule.allowBlank ? NO_NUL : NOT_BLANK);
  return rule.max === undefined ? text : text.max(rule.max);
}
