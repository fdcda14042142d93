import { buildLink, type LinkBase } from './links.js';
import { readLimit, readOffset } from './params.js';
import type { ParsedPageRequest, PageSource, PaginateOutcome, PaginationSettings } from './types.js';

/**
 * Limit/offset style (DRF's LimitOffsetPagination): `limit` defaults to `pageSize` and is clamped
 * to `maxPageSize`, `offset` defaults to 0; malformed values → 400. An offset at or past the end
 * is a 200 with empty results. Links always carry the effective `limit`; `previous` steps back
 * one limit from the requested offset and drops `offset` when that would be 0 or less.
 */
export async function paginateByLimitOffset<T>(
  source: PageSource<T>,
  request: ParsedPageRequest,
  settings: PaginationSettings,
): Promise<PaginateOutcome<T>> {
  const limit = readLimit(request.query, settings);
  if (!limit.ok) return limit;
  const offset = readOffset(request.query);
  if (!offset.ok) return offset;
  const { count, items } = await source.page(offset.value, limit.value, request.ordering);
  return {
    ok: true,
    body: {
      count,
      next: buildNextLink(request, limit.value, offset.value, count),
      previous: buildPreviousLink(request, limit.value, offset.value),
      results: items,
    },
  };
}

function buildNextLink(base: LinkBase, limit: number, offset: number, count: number): string | null {
  if (offset + limit >= count) return null;
  return buildLink(base, { limit, offset: offset + limit });
}

function buildPreviousLink(base: LinkBase, limit: number, offset: number): string | null {
  if (offset <= 0) return null;
  return buildLink(base, { limit, offset: offset - limit <= 0 ? null : offset - limit });
}
