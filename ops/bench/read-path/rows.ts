import type { Load } from '../harness/send.js';

/** A row of the table: what it loads, and which server answers it. */
export interface RowSpec {
  name: string;
  /** The request as the table shows it. */
  request: string;
  /** What answers: the bare servers (`bare`, `bareKoa`) or a service instance, by its settings' name. */
  server: string;
  path: string;
  /** With the reader's token; `writer`: a POST with the writer's token and a JSON body (the wrk script). */
  auth?: 'reader' | 'writer';
  /** The flood: refusals are expected, and Redis commands are counted per refused request. */
  flood?: boolean;
}

export type Row = RowSpec & { load: Load };

export interface RowTargets {
  /** Where each server of the rows answers. */
  bases: Record<string, string>;
  readerToken?: string;
  writerToken: string;
  tasks: number;
  depthCursor?: string;
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

/** Every row of the table, in the order it is printed (`tasks` and the depth cursor name the deep ones). */
export function rowSpecs(tasks: number, depthCursor = ''): RowSpec[] {
  const depth = tasks.toLocaleString('en-US');
  const get = (name: string, path: string, server = 'service', request = `GET ${path}`) => ({
    name,
    request,
    server,
    path,
  });
  return [
    get('bare node:http, page-1 bytes from memory', '/', 'bare', 'GET / (2 workers)'),
    get('bare Koa, one middleware, the same bytes', '/', 'bareKoa', 'GET / (2 workers)'),
    get(PAGE_1_ROW, '/api/tasks/'),
    get('page 1, anonymous, ACCESS_LOG=off', '/api/tasks/', 'quiet'),
    get(SHADOWED_ROW, '/api/tasks/', 'shadowed'),
    get(UNWATCHED_ROW, '/api/tasks/', 'unwatched'),
    get(PIPELINED_ROW, '/api/tasks/', 'pipelined'),
    { ...get('page 1, authenticated', '/api/tasks/', 'service', 'GET /api/tasks/ + Bearer'), auth: 'reader' },
    get('cursor, first page', '/api/tasks/?cursor='),
    get(`cursor at depth ${depth}`, `/api/tasks/?cursor=${depthCursor}`, 'service', 'GET /api/tasks/?cursor=<depth N>'),
    get('one task', '/api/tasks/1/'),
    get('limit/offset 5000', '/api/tasks/?limit=10&offset=5000'),
    get('page 990', '/api/tasks/?page=990'),
    get(`page at depth ${depth}`, `/api/tasks/?page=${Math.floor(tasks / 10) - 1}`),
    get('rate limits', '/api/rate-limits/'),
    get('health', '/healthz'),
    { ...get('writes, authenticated', '/api/tasks/', 'service', 'POST /api/tasks/ + Bearer, JSON'), auth: 'writer' },
    { ...get('429 flood, one anonymous client', '/api/tasks/', 'flood', 'GET /api/tasks/ (anon 1/hour)'), flood: true },
  ];
}

/** What wrk sends for `spec` to the servers of `t`. */
export function loadOf(spec: RowSpec, t: RowTargets): Load {
  const url = `${t.bases[spec.server]}${spec.path}`;
  if (spec.auth === 'writer')
    return { url, headers: { Authorization: `Bearer ${t.writerToken}` }, script: t.postScript };
  return spec.auth === 'reader' ? { url, headers: { Authorization: `Bearer ${t.readerToken}` } } : { url };
}

/** Every row of the table with its load; the rounds run them rotated. */
export const buildRows = (t: RowTargets): Row[] =>
  rowSpecs(t.tasks, t.depthCursor).map((spec) => ({ ...spec, load: loadOf(spec, t) }));

/** Sends the row's request once, so a row that answers the wrong status stops the run before measuring. */
export async function checkRow(row: RowSpec, load: Load): Promise<void> {
  const post = row.auth === 'writer';
  const response = await fetch(load.url, {
    method: post ? 'POST' : 'GET',
    headers: { ...load.headers, ...(post ? { 'Content-Type': 'application/json' } : {}) },
    body: post ? '{"title":"Written by a benchmark"}' : undefined,
  });
  await response.arrayBuffer();
  const expected = row.flood ? [200, 429] : post ? [201] : [200];
  if (!expected.includes(response.status)) throw new Error(`${row.name}: ${load.url} answered ${response.status}`);
}

/** The body every write row request carries. */
export const POST_SCRIPT = `wrk.method = "POST"
wrk.body = '{"title":"Written by the read-path benchmark","description":"one of many"}'
wrk.headers["Content-Type"] = "application/json"
`;
