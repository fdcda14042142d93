import { encodeCursor, type CursorBinding } from '../../../src/pagination/cursor-codec.js';

export interface DepthCursor {
  /** The `cursor` value of a page of `GET /api/tasks/` (ordering=id) that starts near task `tasks`. */
  token: string;
  /** How it was obtained, for the report. */
  how: string;
}

// Without an `ordering` parameter the list binds its cursors to the default one, `id`.
const LIST: CursorBinding = { list: '/api/tasks/', ordering: 'asc', orderingParam: 'id' };

/**
 * A cursor that continues the ascending walk of `/api/tasks/` near its end: the page after task
 * `tasks - 11` (tasks `tasks-10`..`tasks-1`, with a `next`), as a client that had followed `next`
 * from the first page would hold. It is made with the service's own cursor codec and secret once
 * that codec is shown to make exactly the token the service hands out (the first page's `next`),
 * and the page it opens is checked. Should the codec not match, the `next` links are followed
 * from the first page, 100 tasks a page, until the end is near.
 */
export async function depthCursor(base: string, secret: string, tasks: number): Promise<DepthCursor> {
  const first = await getPage(`${base}/api/tasks/?cursor=`);
  const handedOut = cursorOf(first.next);
  const minted = encodeCursor({ key: 10, direction: 'forward' }, LIST, secret);
  if (handedOut === minted) {
    const key = tasks - 11;
    const token = encodeCursor({ key, direction: 'forward' }, LIST, secret);
    const page = await getPage(`${base}/api/tasks/?cursor=${token}`);
    if (page.results[0]?.id !== key + 1 || page.next === null)
      throw new Error(`the depth cursor opened ${JSON.stringify(page).slice(0, 300)}`);
    return {
      token,
      how: `the \`next\` cursor after task ${key} (page ${key + 1}–${key + 10}), made with the service's cursor codec and secret, which reproduce the first page's \`next\` token byte for byte`,
    };
  }
  let page = await getPage(`${base}/api/tasks/?cursor=&page_size=100`);
  let walked = 1;
  while (page.next !== null && (page.results.at(-1)?.id ?? 0) < tasks - 110) {
    page = await getPage(page.next);
    walked += 1;
  }
  const token = cursorOf(page.next);
  const last = page.results.at(-1)?.id;
  // The walk's cursor keeps page_size=100 in its link; the row asks with the default size.
  return {
    token,
    how: `the \`next\` cursor after task ${last}, reached by following \`next\` through ${walked} pages of 100 from the first page`,
  };
}

interface Page {
  next: string | null;
  results: Array<{ id: number }>;
}

async function getPage(url: string): Promise<Page> {
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`GET ${url}: ${response.status} ${await response.text()}`);
  return (await response.json()) as Page;
}

function cursorOf(link: string | null): string {
  const token = link === null ? null : new URL(link).searchParams.get('cursor');
  if (!token) throw new Error(`no cursor in the link ${link}`);
  return token;
}
