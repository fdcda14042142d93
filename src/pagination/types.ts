import type { QueryParams } from './query-string.js';

/** Walk order of a collection, by the item's integer sort key (task id, event version...). */
export type Ordering = 'asc' | 'desc';

/** Page-size limits: the default size and the largest a client may ask for. */
export interface PageSizes {
  pageSize: number;
  maxPageSize: number;
}

/** Page-size limits and the key that signs cursors; built from the service configuration. */
export interface PaginationSettings extends PageSizes {
  cursorSecret: string;
}

/** What a collection must offer; implemented over SQL by the caller. */
export interface PageSource<T> {
  /**
   * Exact total count and the rows at [offset, offset+limit) in `ordering`, read consistently.
   * `limit` may be 0 when only the count is wanted.
   */
  page(offset: number, limit: number, ordering: Ordering): Promise<{ count: number; items: T[] }>;
  /**
   * Keyset read: up to `limit` rows strictly after `key` (key null = from the start) walking in
   * `ordering`, in walk order. One index range scan. For a backward page the caller passes the
   * opposite ordering.
   */
  seek(key: number | null, limit: number, ordering: Ordering): Promise<T[]>;
  /** The integer sort key of an item; unique within the collection. */
  keyOf(item: T): number;
}

/** The list body: with `count` for page-number and limit/offset, without it for cursor pages. */
export type Envelope<T> =
  | { count: number; next: string | null; previous: string | null; results: T[] }
  | { next: string | null; previous: string | null; results: T[] };

/** Refusal of a request; the route turns it into a `{detail}` response with this status. */
export type PaginationFailure = { ok: false; status: 400 | 404; detail: string };

/** What `paginate` answers: a body to send, or a refusal. Plain data, no HTTP objects. */
export type PaginateOutcome<T> = { ok: true; body: Envelope<T> } | PaginationFailure;

/** The request as the pagination module sees it. */
export interface PageRequest {
  /** Absolute: scheme, host, path and query as the client should see them. */
  url: URL;
  /** `url`'s query, when the caller has parsed it already (it is then not parsed again). */
  query?: QueryParams;
  ordering: Ordering;
  /** The ordering as the client asked for it (e.g. `id`, `-id`); bound into cursors. */
  orderingParam?: string;
}

/** A page request whose query has been parsed: what each style works from. */
export type ParsedPageRequest = PageRequest & { query: QueryParams };
