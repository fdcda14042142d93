import { parsePythonInt } from './python-int.js';
import { readLastValue, type QueryParams } from './query-string.js';
import type { PageSizes, PaginationFailure } from './types.js';

/** A parsed query parameter, or the 400 that refuses it. */
export type ParamOutcome<T> = { ok: true; value: T } | PaginationFailure;

const MAX_OFFSET = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Reads `page_size` (page-number and cursor styles): absent → `pageSize`; an integer ≥ 1 is
 * clamped to `maxPageSize`; anything else → 400 naming the parameter.
 */
export function readPageSize(query: QueryParams, settings: PageSizes): ParamOutcome<number> {
  return readSize(query, 'page_size', settings);
}

/** Reads `limit` (limit/offset style) with the same rules as `page_size`. */
export function readLimit(query: QueryParams, settings: PageSizes): ParamOutcome<number> {
  return readSize(query, 'limit', settings);
}

/** Reads `offset`: absent → 0; an integer from 0 to 2^53−1; anything else → 400 naming it. */
export function readOffset(query: QueryParams): ParamOutcome<number> {
  const raw = readLastValue(query, 'offset');
  if (raw === undefined) return { ok: true, value: 0 };
  const value = parsePythonInt(raw);
  if (value === null || value < 0n || value > MAX_OFFSET) {
    return refuse(`Invalid "offset": expected an integer from 0 to ${Number.MAX_SAFE_INTEGER}.`);
  }
  return { ok: true, value: Number(value) };
}

function readSize(query: QueryParams, name: string, settings: PageSizes): ParamOutcome<number> {
  const raw = readLastValue(query, name);
  if (raw === undefined) return { ok: true, value: settings.pageSize };
  const value = parsePythonInt(raw);
  if (value === null || value < 1n) return refuse(`Invalid "${name}": expected an integer of at least 1.`);
  return { ok: true, value: value > BigInt(settings.maxPageSize) ? settings.maxPageSize : Number(value) };
}

function refuse(detail: string): PaginationFailure {
  return { ok: false, status: 400, detail };
}
