import { z } from 'zod';
import type { TaskFields } from '../../events/domain/task.events.js';
import { charField, readCharField } from '../../base/char-field.js';
import { Errors, requireObject } from '../../base/errors.js';

const TITLE_MAX = 200;
const DESCRIPTION_MAX = 10_000;

/**
 * The body `parseTaskInput` accepts, for the API document (docs/architecture.md "API document"):
 * the same limits. The parser also takes what DRF coerces (a number as a title, `"true"` or `1`
 * as a boolean, text whose trimmed form fits); the document names the canonical forms.
 */
export const taskInputSchema = z.object({
  title: charField({ max: TITLE_MAX }).describe('Trimmed; may not be blank.'),
  description: charField({ max: DESCRIPTION_MAX, allowBlank: true })
    .optional()
    .describe('Trimmed; "" when absent on create or replace.'),
  completed: z.boolean().optional().describe('false when absent on create or replace.'),
});

/** A PATCH body: every field optional. */
export const taskPatchSchema = taskInputSchema.partial();

type FieldErrors = Record<string, string[]>;

/**
 * Validates a task body with DRF's rules and texts. `partial` (PATCH) makes every field
 * optional; otherwise `title` is required and the others take their defaults. Unknown fields and
 * `id` are ignored. Throws a 400 whose body maps each bad field to its messages.
 */
export function parseTaskInput(body: unknown, partial: boolean): Partial<TaskFields> {
  const input = requireObject(body);
  const errors: FieldErrors = {};
  const fields: Partial<TaskFields> = {};
  const title = readCharField(input, 'title', { required: !partial, max: TITLE_MAX }, errors);
  if (title !== undefined) fields.title = title;
  const description = readCharField(input, 'description', { allowBlank: true, max: DESCRIPTION_MAX }, errors);
  if (description !== undefined) fields.description = description;
  else if (!partial) fields.description = '';
  const completed = readBoolean(input, 'completed', errors);
  if (completed !== undefined) fields.completed = completed;
  else if (!partial) fields.completed = false;
  if (Object.keys(errors).length > 0) throw Errors.validation(errors);
  return fields;
}

const TRUE = new Set([true, 'true', 'True', 'TRUE', '1', 1, 'yes', 'on']);
const FALSE = new Set([false, 'false', 'False', 'FALSE', '0', 0, 'no', 'off']);

function readBoolean(input: Record<string, unknown>, name: string, errors: FieldErrors): boolean | undefined {
  if (!(name in input)) return undefined;
  const value = input[name];
  if (value === null) return fail(errors, name, 'This field may not be null.');
  if (TRUE.has(value as never)) return true;
  if (FALSE.has(value as never)) return false;
  return fail(errors, name, 'Must be a valid boolean.');
}

function fail(errors: FieldErrors, name: string, ...messages: string[]): undefined {
  errors[name] = messages;
  return undefined;
}
