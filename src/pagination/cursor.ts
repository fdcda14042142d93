import { decodeCursor, encodeCursor, type CursorBinding, type CursorPosition } from './cursor-codec.js';
import { buildLink } from './links.js';
import { readPageSize } from './params.js';
import { readLastValue } from './query-string.js';
import type { Ordering, ParsedPageRequest, PageSource, PaginateOutcome, PaginationSettings } from './types.js';

const INVALID_CURSOR = { ok: false, status: 404, detail: 'Invalid cursor' } as const;

type CursorPage<T> = { results: T[]; next: CursorPosition | null; previous: CursorPosition | null };

/**
 * Cursor style: `cursor` empty = first page, otherwise a token from a previous `next`/`previous`
 * link; `page_size` as in `readPageSize`. Each page is one `seek` of size+1 rows, the extra row
 * telling whether more exist in that direction. Envelope without `count`. A token that does not
 * verify for this ordering → 404 `Invalid cursor`.
 */
export async function paginateByCursor<T>(
  source: PageSource<T>,
  request: ParsedPageRequest,
  settings: PaginationSettings,
): Promise<PaginateOutcome<T>> {
  const size = readPageSize(request.query, settings);
  if (!size.ok) return size;
  const binding: CursorBinding = {
    list: request.url.pathname,
    ordering: request.ordering,
    orderingParam: request.orderingParam ?? '',
  };
  const token = readLastValue(request.query, 'cursor') ?? '';
  const position = token === '' ? null : decodeCursor(token, binding, settings.cursorSecret);
  if (token !== '' && position === null) return INVALID_CURSOR;
  const page =
    position?.direction === 'backward'
      ? await readBackward(source, position.key, size.value, request.ordering)
      : await readForward(source, position?.key ?? null, size.value, request.ordering);
  const buildCursorLink = (target: CursorPosition | null) =>
    target === null ? null : buildLink(request, { cursor: encodeCursor(target, binding, settings.cursorSecret) });
  return {
    ok: true,
    body: { next: buildCursorLink(page.next), previous: buildCursorLink(page.previous), results: page.results },
  };
}

async function readForward<T>(
  source: PageSource<T>,
  after: number | null,
  size: number,
  ordering: Ordering,
): Promise<CursorPage<T>> {
  const rows = await source.seek(after, size + 1, ordering);
  const results = rows.slice(0, size);
  const first = results[0];
  const last = results[results.length - 1];
  const next = rows.length > size && last !== undefined ? startAfter(source.keyOf(last)) : null;
  if (after === null) return { results, next, previous: null };
  // An empty page still links back to the page that ends with `after` itself.
  const previous = startBefore(first === undefined ? shiftKey(after, ordering, 1) : source.keyOf(first));
  return { results, next, previous };
}

async function readBackward<T>(
  source: PageSource<T>,
  before: number,
  size: number,
  ordering: Ordering,
): Promise<CursorPage<T>> {
  const rows = await source.seek(before, size + 1, ordering === 'asc' ? 'desc' : 'asc');
  const results = rows.slice(0, size).reverse();
  const first = results[0];
  const last = results[results.length - 1];
  const previous = rows.length > size && first !== undefined ? startBefore(source.keyOf(first)) : null;
  // An empty page still links forward to the page that starts with `before` itself.
  const next = startAfter(last === undefined ? shiftKey(before, ordering, -1) : source.keyOf(last));
  return { results, next, previous };
}

function startAfter(key: number): CursorPosition {
  return { key, direction: 'forward' };
}

function startBefore(key: number): CursorPosition {
  return { key, direction: 'backward' };
}

/** The key `steps` places further along `ordering`: keys are integers, so "before K+1" ≡ "up to K". */
function shiftKey(key: number, ordering: Ordering, steps: number): number {
  return ordering === 'asc' ? key + steps : key - steps;
}
