import { z } from 'zod';

/**
 * A text field as DRF's CharField reads it: numbers taken as their text, trimmed unless
 * `trim: false`, not blank unless `allowBlank`, no NUL (PostgreSQL text cannot hold one), at most
 * `max` characters. `required` and `allowNull` say what an absent field and `null` mean.
 */
export interface CharRule {
  required?: boolean;
  allowNull?: boolean;
  allowBlank?: boolean;
  trim?: boolean;
  max?: number;
}

/** No NUL anywhere. */
const NO_NUL = /^[^\u0000]*$/;
/** No NUL, and at least one character that is not white space: the trimmed text is not blank. */
const NOT_BLANK = /^[^\u0000]*[^\s\u0000][^\u0000]*$/;

/**
 * The schema of a text field for the API document (docs/architecture.md "API document"), in its
 * canonical form (a string). `test/unit/api/request-schemas.unit.test.ts` checks that every body the
 * document accepts, the parsers (`readCharField`) accept.
 */
export function charField(rule: CharRule = {}): z.ZodString {
  const text = z.string().regex(rule.allowBlank ? NO_NUL : NOT_BLANK);
  return rule.max === undefined ? text : text.max(rule.max);
}

/**
 * Reads `input[name]` by `rule` with DRF's texts. Returns the text, or `undefined` when the field
 * is absent, `null` (where allowed) or invalid; an invalid field's messages go into `errors`.
 */
export function readCharField(
  input: Record<string, unknown>,
  name: string,
  rule: CharRule,
  errors: Record<string, string[]>,
): string | undefined {
  if (!(name in input)) return rule.required ? fail(errors, name, 'This field is required.') : undefined;
  const value = input[name];
  if (value === null) return rule.allowNull ? undefined : fail(errors, name, 'This field may not be null.');
  if (typeof value !== 'string' && typeof value !== 'number') return fail(errors, name, 'Not a valid string.');
  const text = rule.trim === false ? String(value) : String(value).trim();
  if (!rule.allowBlank && text.trim() === '') return fail(errors, name, 'This field may not be blank.');
  // Every validator reports, as DRF's run_validators does.
  const messages = [
    ...(rule.max !== undefined && [...text].length > rule.max
      ? [`Ensure this field has no more than ${rule.max} characters.`]
      : []),
    ...(text.includes('\u0000') ? ['Null characters are not allowed.'] : []),
  ];
  return messages.length > 0 ? fail(errors, name, ...messages) : text;
}

function fail(errors: Record<string, string[]>, name: string, ...messages: string[]): undefined {
  errors[name] = messages;
  return undefined;
}
