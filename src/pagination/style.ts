import type { QueryParams } from './query-string.js';
import type { PaginationFailure } from './types.js';

/** The three pagination styles of the list endpoints. */
export type PaginationStyle = 'page-number' | 'limit-offset' | 'cursor';

/** The style a request asked for, or the 400 for a request that mixes styles. */
export type StyleChoice = { ok: true; style: PaginationStyle } | PaginationFailure;

const PAGE_NUMBER_PARAMS = ['page', 'page_size'] as const;
const LIMIT_OFFSET_PARAMS = ['limit', 'offset'] as const;
const CURSOR_CLASHES = ['page', 'limit', 'offset'] as const;

/**
 * Picks the style from the query string: `cursor` present (even empty) → cursor; `limit` and/or
 * `offset` present → limit/offset; otherwise page-number. `cursor` with `page`, `limit` or
 * `offset`, and `page` or `page_size` with `limit`/`offset`, are refused with a detail naming the
 * parameters present on each side. (`page_size` belongs to both page-number and cursor.)
 */
export function selectStyle(query: QueryParams): StyleChoice {
  if (query.has('cursor')) {
    const others = CURSOR_CLASHES.filter((name) => query.has(name));
    return others.length === 0 ? { ok: true, style: 'cursor' } : refuseCombination(['cursor'], others);
  }
  const limitOffset = LIMIT_OFFSET_PARAMS.filter((name) => query.has(name));
  if (limitOffset.length === 0) return { ok: true, style: 'page-number' };
  const pageNumber = PAGE_NUMBER_PARAMS.filter((name) => query.has(name));
  return pageNumber.length === 0 ? { ok: true, style: 'limit-offset' } : refuseCombination(pageNumber, limitOffset);
}

function refuseCombination(left: readonly string[], right: readonly string[]): PaginationFailure {
  const quote = (names: readonly string[]) => names.map((name) => `"${name}"`).join('/');
  return {
    ok: false,
    status: 400,
    detail: `Cannot combine ${quote(left)} with ${quote(right)}: choose one pagination style.`,
  };
}
