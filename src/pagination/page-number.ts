import { buildLink, type LinkBase } from './links.js';
import { readPageSize } from './params.js';
import { parsePythonInt } from './python-int.js';
import { readLastValue } from './query-string.js';
import type { ParsedPageRequest, PageSource, PaginateOutcome, PaginationSettings } from './types.js';

const INVALID_PAGE = { ok: false, status: 404, detail: 'Invalid page.' } as const;
// `page=last` learns the count from page 1 first; a concurrent write can move the last page, so re-read.
const LAST_PAGE_READS = 3;

type Read<T> = { number: number; count: number; items: T[] };

/**
 * Page-number style (DRF's PageNumberPagination): `page` is 1-based (parsed like Python's `int()`)
 * or `last`; `page_size` as in `readPageSize`. A page beyond the last, below 1 or not an integer →
 * 404 `Invalid page.`; page 1 of an empty collection is a 200 with `count: 0`.
 */
export async function paginateByPageNumber<T>(
  source: PageSource<T>,
  request: ParsedPageRequest,
  settings: PaginationSettings,
): Promise<PaginateOutcome<T>> {
  const size = readPageSize(request.query, settings);
  if (!size.ok) return size;
  const raw = readLastValue(request.query, 'page') ?? '1';
  const read =
    raw === 'last' ? await readLastPage(source, size.value, request) : await readPage(source, raw, size.value, request);
  if (read === null) return INVALID_PAGE;
  return { ok: true, body: shapeBody(read, size.value, request) };
}

async function readPage<T>(
  source: PageSource<T>,
  raw: string,
  size: number,
  request: ParsedPageRequest,
): Promise<Read<T> | null> {
  const number = parsePythonInt(raw);
  if (number === null || number < 1n) return null;
  const offset = (number - 1n) * BigInt(size);
  // Counts are JS numbers, so such an offset is past the end of any collection.
  if (offset > BigInt(Number.MAX_SAFE_INTEGER)) return null;
  const { count, items } = await source.page(Number(offset), size, request.ordering);
  if (number > BigInt(countPages(count, size))) return null;
  return { number: Number(number), count, items };
}

async function readLastPage<T>(
  source: PageSource<T>,
  size: number,
  request: ParsedPageRequest,
): Promise<Read<T> | null> {
  let number = 1;
  let read = await source.page(0, size, request.ordering);
  for (let attempt = 1; attempt < LAST_PAGE_READS && countPages(read.count, size) !== number; attempt += 1) {
    number = countPages(read.count, size);
    read = await source.page((number - 1) * size, size, request.ordering);
  }
  return number <= countPages(read.count, size) ? { number, ...read } : null;
}

/** Django's Paginator.num_pages with allow_empty_first_page: never less than 1. */
function countPages(count: number, size: number): number {
  return Math.max(1, Math.ceil(count / size));
}

function shapeBody<T>(read: Read<T>, size: number, base: LinkBase) {
  const { number, count, items } = read;
  const next = number < countPages(count, size) ? buildLink(base, { page: number + 1 }) : null;
  const previous = number <= 1 ? null : buildLink(base, { page: number === 2 ? null : number - 1 });
  return { count, next, previous, results: items };
}
