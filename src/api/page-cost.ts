import type { IncomingMessage } from 'node:http';
import type { Config } from '../settings/config.js';
import { readLimit, readPageSize } from '../pagination/params.js';
import { parseQuery } from '../pagination/query-string.js';

/** Rows of a page that cost one unit of the throttle: a page of up to 100 rows costs 1, of 101–200 costs 2. */
const ROWS_PER_UNIT = 100;

/**
 * A list route's cost (docs/throttling.md "Cost: requests that weigh more"): one unit per ROWS_PER_UNIT rows of the
 * page asked for (`page_size` or `limit`, clamped to MAX_PAGE_SIZE as the page is), so at the default
 * MAX_PAGE_SIZE=100 every page costs 1, and a deployment that allows larger pages charges for them. A size the
 * page would refuse with a 400 costs 1. Reads the query only when there is one, and only when some page can cost
 * more than 1.
 */
export function pageCost(
  config: Pick<Config, 'PAGE_SIZE' | 'MAX_PAGE_SIZE'>,
): number | ((req: IncomingMessage) => number) {
  const sizes = { pageSize: config.PAGE_SIZE, maxPageSize: config.MAX_PAGE_SIZE };
  // No page weighs more than a unit: the route's requests cost 1 each, and nothing is read per request.
  if (sizes.maxPageSize <= ROWS_PER_UNIT) return 1;
  return (req) => {
    const url = req.url ?? '';
    const at = url.indexOf('?');
    if (at === -1) return Math.ceil(sizes.pageSize / ROWS_PER_UNIT);
    const query = parseQuery(url.slice(at + 1));
    const size = query.has('limit') ? readLimit(query, sizes) : readPageSize(query, sizes);
    return size.ok ? Math.ceil(size.value / ROWS_PER_UNIT) : 1;
  };
}
