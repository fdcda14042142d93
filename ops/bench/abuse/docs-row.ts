import { burst } from '../../../test/helpers/burst.js';
import type { RowResult } from './report.js';
import { abuse, rowOf, type Bench } from './window.js';

/** The docs page and its files, and the document it loads. */
const ASSETS = [
  '/api/docs/',
  '/api/docs/swagger-ui.css',
  '/api/docs/swagger-ui-bundle.js',
  '/api/docs/init.js',
  '/api/docs/favicon-32x32.png',
  '/api/schema/',
];
const BUNDLE = '/api/docs/swagger-ui-bundle.js';
/** "Long-lived": a browser keeps the file at least a day without asking again. */
const LONG_LIVED_S = 86_400;

interface Revalidation {
  path: string;
  cacheControl: string;
  etag: string;
  lastModified: string;
  ifNoneMatch: number;
  ifModifiedSince: number;
}

/** How a browser revalidating `path` fares: the validators it is given and the answers to using them. */
async function revalidate(base: string, path: string, address: string): Promise<Revalidation> {
  const headers = { 'X-Forwarded-For': address };
  const first = await fetch(`${base}${path}`, { headers });
  await first.arrayBuffer();
  const etag = first.headers.get('etag') ?? '';
  const lastModified = first.headers.get('last-modified') ?? '';
  const again = async (extra: Record<string, string>) => {
    const answer = await fetch(`${base}${path}`, { headers: { ...headers, ...extra } });
    await answer.arrayBuffer();
    return answer.status;
  };
  return {
    path,
    cacheControl: first.headers.get('cache-control') ?? '(none)',
    etag: etag || '(none)',
    lastModified: lastModified || '(none)',
    ifNoneMatch: etag ? await again({ 'If-None-Match': etag }) : first.status,
    ifModifiedSince: await again({ 'If-Modified-Since': lastModified || new Date().toUTCString() }),
  };
}

/** The URLs the docs page links its files by (a versioned one carries `?v=<tag>`), else the bare paths. */
async function linkedPaths(base: string): Promise<string[]> {
  const page = await (await fetch(`${base}/api/docs/`, { headers: { 'X-Forwarded-For': '10.6.2.1' } })).text();
  return ASSETS.map((path) => {
    const name = path.split('/').pop() ?? '';
    const link =
      name === '' ? null : new RegExp(`(?:src|href)="([^"]*${name.replace(/\./g, '\\.')}\\?v=[^"]+)"`).exec(page);
    if (link === null) return path;
    const url = new URL(link[1]!.replace(/&amp;/g, '&'), `${base}/api/docs/`);
    return url.pathname + url.search;
  });
}

const maxAge = (cacheControl: string) => Number(/max-age=(\d+)/.exec(cacheControl)?.[1] ?? 0);

/** Row 6: swagger-ui-bundle.js 300 times from one address, then a revalidation of every file. */
export async function runDocsRow(bench: Bench): Promise<RowResult> {
  const paths = await linkedPaths(bench.guarded.base);
  const bundle = paths.find((path) => path.startsWith(BUNDLE)) ?? BUNDLE;
  const measured = await abuse(bench, 'get', () =>
    burst(bench.guarded.base, 300, 16, () => ({ path: bundle, headers: { 'X-Forwarded-For': '10.6.0.1' } })),
  );
  const checks = [];
  for (const [i, path] of paths.entries()) checks.push(await revalidate(bench.guarded.base, path, `10.6.1.${i}`));
  const files = checks.filter(
    (c) => !c.path.startsWith('/api/docs/?') && c.path !== '/api/docs/' && c.path !== '/api/schema/',
  );
  const { bodyBytes, seconds } = measured.window.value;
  const row = rowOf('6. docs assets × 300', `GET ${bundle} × 300 (the URL the page links)`, measured, 'get');
  row.goal = `the page's files: 304 to If-None-Match, max-age ≥ ${LONG_LIVED_S.toLocaleString('en-US')} s`;
  row.met = files.every((c) => c.ifNoneMatch === 304 && maxAge(c.cacheControl) >= LONG_LIVED_S);
  row.facts.push(
    `${(bodyBytes / 1e6).toFixed(0)} MB of body sent in ${seconds.toFixed(2)} s (${(bodyBytes / 1e6 / seconds).toFixed(0)} MB/s).`,
    'Revalidation, file by file (status to If-None-Match with its ETag / to If-Modified-Since with its Last-Modified, ' +
      'or the current date when it has none): ' +
      checks
        .map(
          (c) =>
            `\`${c.path}\` Cache-Control \`${c.cacheControl}\`, ETag ${c.etag === '(none)' ? 'none' : 'yes'}, ` +
            `Last-Modified ${c.lastModified === '(none)' ? 'none' : 'yes'} → ${c.ifNoneMatch} / ${c.ifModifiedSince}`,
        )
        .join('; ') +
      '.',
  );
  return row;
}
