import { paginateByCursor } from './cursor.js';
import { paginateByLimitOffset } from './limit-offset.js';
import { paginateByPageNumber } from './page-number.js';
import { parseQuery } from './query-string.js';
import { selectStyle } from './style.js';
import type { PageRequest, PageSource, PaginateOutcome, PaginationSettings } from './types.js';

/**
 * Paginates a collection in the style the query string asks for: page-number by
 * default, limit/offset when `limit` or `offset` is present, cursor when `cursor` is present.
 * Links are absolute, built from `request.url`, and keep every other query parameter (keys
 * sorted, as DRF writes them). The query is parsed once (`request.query` when the caller did). Returns the body to
 * send, or `{ok: false, status, detail}`:
 * 400 for mixed styles or a malformed `limit`/`offset`/`page_size`, 404 for an invalid page or
 * cursor. Errors thrown by `source` propagate.
 */
export async function paginate<T>(
  source: PageSource<T>,
  request: PageRequest,
  settings: PaginationSettings,
): Promise<PaginateOutcome<T>> {
  const query = request.query ?? parseQuery(request.url.search);
  const choice = selectStyle(query);
  if (!choice.ok) return choice;
  const parsed = { ...request, query };
  switch (choice.style) {
    case 'cursor':
      return paginateByCursor(source, parsed, settings);
    case 'limit-offset':
      return paginateByLimitOffset(source, parsed, settings);
    case 'page-number':
      return paginateByPageNumber(source, parsed, settings);
  }
}
