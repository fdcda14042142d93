import type { Load } from '../harness/send.js';

export interface Row {
  name: string;
  /** The request as the table shows it. */
  request: string;
  load: Load;
  /** The flood: refusals are expected, and Redis commands are counted per refused request. */
  flood?: boolean;
}

export interface RowTargets {
  bare: string;
  /** The bare Koa app answering the same bytes. */
  bareKoa: string;
  /** The service instance with ACCESS_LOG=off. */
  quiet: string;
  service: string;
  /** The service instance whose anonymous limit is tiny. */
  flood: string;
  /** Instances like the service, with shadow rules for anon and user (never refusing), and with THROTTLE_WATCH=off. */
  shadowed: string;
  unwatched: string;
  /** An instance like the service with REDIS_AUTO_PIPELINING=on. */
  pipelined: string;
  readerToken: string;
  writerToken: string;
  tasks: number;
  depthCursor: string;
  /** The wrk Lua script that makes each request a POST with a JSON body. */
  postScript: string;
}

/** Page 1 on the service itself, the row the others are compared with. */
export const PAGE_1_ROW = 'page 1, anonymous';
/** Page 1 with every view of who is throttled on plus shadow rules, and with the watch off (docs/benchmarks.md). */
export const SHADOWED_ROW = 'page 1, anonymous, shadow rules too';
export const UNWATCHED_ROW = 'page 1, anonymous, THROTTLE_WATCH=off';
export const PIPELINED_ROW = 'page 1, anonymous, REDIS_AUTO_PIPELINING=on';

/** How many rows `buildRows` makes (for the time estimate printed before anything starts). */
export const ROW_COUNT = 18;

/** Every row of the table, in the order it is printed; the rounds run them rotated. */
export function buildRows(t: RowTargets): Row[] {
  const depthPage = Math.floor(t.tasks / 10) - 1;
  const get = (name: string, path: string, headers?: Record<string, string>, request = `GET ${path}`): Row => ({
    name,
    request,
    load: { url: `${t.service}${path}`, headers },
  });
  return [
    { name: 'bare node:http, page-1 bytes from memory', request: 'GET / (2 workers)', load: { url: `${t.bare}/` } },
    { name: 'bare Koa, one middleware, the same bytes', request: 'GET / (2 workers)', load: { url: `${t.bareKoa}/` } },
    get(PAGE_1_ROW, '/api/tasks/'),
    {
      name: 'page 1, anonymous, ACCESS_LOG=off',
      request: 'GET /api/tasks/',
      load: { url: `${t.quiet}/api/tasks/` },
    },
    {
      name: SHADOWED_ROW,
      request: 'GET /api/tasks/',
      load: { url: `${t.shadowed}/api/tasks/` },
    },
    {
      name: UNWATCHED_ROW,
      request: 'GET /api/tasks/',
      load: { url: `${t.unwatched}/api/tasks/` },
    },
    {
      name: PIPELINED_ROW,
      request: 'GET /api/tasks/',
      load: { url: `${t.pipelined}/api/tasks/` },
    },
    get(
      'page 1, authenticated',
      '/api/tasks/',
      { Authorization: `Bearer ${t.readerToken}` },
      'GET /api/tasks/ + Bearer',
    ),
    get('cursor, first page', '/api/tasks/?cursor='),
    get(
      `cursor at depth ${t.tasks.toLocaleString('en-US')}`,
      `/api/tasks/?cursor=${t.depthCursor}`,
      undefined,
      'GET /api/tasks/?cursor=<depth N>',
    ),
    get('one task', '/api/tasks/1/'),
    get('limit/offset 5000', '/api/tasks/?limit=10&offset=5000'),
    get('page 990', '/api/tasks/?page=990'),
    get(`page at depth ${t.tasks.toLocaleString('en-US')}`, `/api/tasks/?page=${depthPage}`),
    get('rate limits', '/api/rate-limits/'),
    get('health', '/healthz'),
    {
      name: 'writes, authenticated',
      request: 'POST /api/tasks/ + Bearer, JSON',
      load: {
        url: `${t.service}/api/tasks/`,
        headers: { Authorization: `Bearer ${t.writerToken}` },
        script: t.postScript,
      },
    },
    {
      name: '429 flood, one anonymous client',
      request: 'GET /api/tasks/ (anon 1/hour)',
      load: { url: `${t.flood}/api/tasks/` },
      flood: true,
    },
  ];
}

/** The body every write row request carries. */
export const POST_SCRIPT = `wrk.method = "POST"
wrk.body = '{"title":"Written by the read-path benchmark","description":"one of many"}'
wrk.headers["Content-Type"] = "application/json"
`;
