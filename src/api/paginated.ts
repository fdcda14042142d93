import type { Context } from 'koa';
import type { Deps } from '../deps.js';
import { AppError } from '../base/errors.js';
import { paginate } from '../pagination/paginate.js';
import { parseQuery, readLastValue } from '../pagination/query-string.js';
import type { PageSource } from '../pagination/types.js';
import { requestUrl } from '../server/request-url.js';

/**
 * Renders a list request's page of `source` in the style the query string asks for.
 * `orderingKey` names the sort field in `?ordering=` (`id` or `-id` for tasks). The query string
 * is parsed once, here; pagination and its links work from the parsed value.
 */
export async function renderPage<T, V>(
  ctx: Context,
  deps: Deps,
  source: PageSource<T>,
  view: (item: T) => V,
  orderingKey = 'id',
): Promise<{ body: unknown }> {
  const query = parseQuery(ctx.querystring);
  const orderingParam = readLastValue(query, 'ordering') ?? orderingKey;
  const ordering = orderingParam === orderingKey ? 'asc' : orderingParam === `-${orderingKey}` ? 'desc' : undefined;
  if (!ordering)
    throw new AppError(400, { detail: `Invalid ordering "${orderingParam}": use ${orderingKey} or -${orderingKey}.` });
  const settings = {
    pageSize: deps.config.PAGE_SIZE,
    maxPageSize: deps.config.MAX_PAGE_SIZE,
    cursorSecret: deps.cursorSecret,
  };
  const outcome = await paginate(
    source,
    { url: requestUrl(ctx, deps.config), query, ordering, orderingParam },
    settings,
  );
  if (!outcome.ok) throw new AppError(outcome.status, { detail: outcome.detail });
  return { body: { ...outcome.body, results: outcome.body.results.map(view) } };
}
