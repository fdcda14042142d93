import { encodeQuery, parseQuery, type QueryParams } from './query-string.js';

/** A request URL with its query already parsed: links are built from the parsed value. */
export interface LinkBase {
  url: URL;
  query: QueryParams;
}

/** Query edits for a link: a value replaces every value of the key, null removes the key. */
export type QueryEdits = Readonly<Record<string, string | number | null>>;

/**
 * Builds an absolute link from the request URL with some query keys replaced or removed, the way
 * DRF does: parse the query keeping blank values, edit, then write it back with keys sorted and
 * repeated values in their order. No `?` when nothing remains; the fragment is not kept.
 */
export function buildLink(base: URL | LinkBase, edits: QueryEdits): string {
  const url = base instanceof URL ? base : base.url;
  const query = new Map(base instanceof URL ? parseQuery(base.search) : base.query);
  for (const [key, value] of Object.entries(edits)) {
    if (value === null) query.delete(key);
    else query.set(key, [String(value)]);
  }
  const search = encodeQuery(query);
  return `${url.protocol}//${url.host}${url.pathname}${search === '' ? '' : `?${search}`}`;
}

/** DRF's `replace_query_param`: `url` with every `key` value replaced by `value`. */
export function replaceQueryParam(url: URL, key: string, value: string | number): string {
  return buildLink(url, { [key]: value });
}

/** DRF's `remove_query_param`: `url` without `key`. */
export function removeQueryParam(url: URL, key: string): string {
  return buildLink(url, { [key]: null });
}
