import { z } from 'zod';
import { charField, readCharField } from '../base/char-field.js';
import { Errors, requireObject } from '../base/errors.js';

/** What a report covers: whole UTC days from `from` to `to` inclusive, optionally one owner's tasks. */
export interface ReportParams {
  from: string;
  to: string;
  owner: string | null;
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_FORMAT = 'Date has wrong format. Use one of these formats instead: YYYY-MM-DD.';
/** A username (150 characters at most, as Django's); null or absent: every owner. */
const OWNER_RULE = { allowNull: true, max: 150 };

/** A day of the calendar (zod's ISO date) from year 1 on: DRF's DateField takes no year 0. */
const calendarDay = z
  .string()
  .regex(new RegExp(`^(?!0000)${z.regexes.date.source.slice(1)}`))
  .meta({ format: 'date' });

/** The body `parseReportInput` accepts, for the API document: the same formats and limits. */
export const reportInputSchema = z.object({
  from: calendarDay.describe('First UTC day (YYYY-MM-DD).'),
  to: calendarDay.describe('Last UTC day, inclusive; not before `from`, at most REPORT_MAX_DAYS days in all.'),
  owner: charField(OWNER_RULE).nullable().optional().describe("One owner's tasks; null or absent: every owner."),
});

/**
 * Validates `{"from": "2026-11-01", "to": "2026-11-30", "owner": "alice"}` with DRF's texts:
 * both dates required as YYYY-MM-DD, `to` not before `from`, at most `maxDays` days in all;
 * `owner` optional (null or absent = every owner). Throws a 400 mapping each bad field to its
 * messages.
 */
export function parseReportInput(body: unknown, maxDays: number): ReportParams {
  const input = requireObject(body);
  const errors: Record<string, string[]> = {};
  const from = readDate(input, 'from', errors);
  const to = readDate(input, 'to', errors);
  const owner = readCharField(input, 'owner', OWNER_RULE, errors);
  if (from !== undefined && to !== undefined) {
    const days = daysBetween(from, to) + 1;
    if (days < 1) errors.to = ['Ensure this date is on or after "from".'];
    else if (days > maxDays) errors.to = [`Ensure the range spans no more than ${maxDays} days.`];
  }
  if (Object.keys(errors).length > 0) throw Errors.validation(errors);
  return { from: from!, to: to!, owner: owner ?? null };
}

/** Whole days from `from` to `to` (YYYY-MM-DD, UTC); negative when `to` is earlier. */
export function daysBetween(from: string, to: string): number {
  return Math.round((Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000);
}

function readDate(input: Record<string, unknown>, name: string, errors: Record<string, string[]>): string | undefined {
  if (!(name in input)) return void (errors[name] = ['This field is required.']);
  const value = input[name];
  if (value === null) return void (errors[name] = ['This field may not be null.']);
  if (typeof value !== 'string' || !isCalendarDate(value.trim())) return void (errors[name] = [DATE_FORMAT]);
  return value.trim();
}

function isCalendarDate(text: string): boolean {
  const match = DATE.exec(text);
  if (!match) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  // Not Date.UTC: it reads years 0–99 as 1900–1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}
