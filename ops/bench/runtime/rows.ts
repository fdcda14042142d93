import { PAGE_1_ROW } from '../read-path/rows.js';
import type { Load } from '../harness/send.js';
import type { Tree } from '../harness/service.js';

/** One runtime's processes, and what the write row sends. */
export interface Targets {
  trees: Record<Server, Tree>;
  writerToken: string;
  /** The read-path bench's wrk Lua script that makes each request a POST with a JSON body. */
  postScript: string;
}

export type Server = 'bare' | 'bareKoa' | 'service';

export interface Row {
  name: string;
  /** The request as the table shows it. */
  request: string;
  /** Which of the runtime's processes answers it. */
  server: Server;
  path: string;
  /** A POST with the writer's token and the read-path bench's body. */
  write?: boolean;
  /** The status every answer must have. */
  status: number;
}

/** The rows, as the read-path bench loads them; each runs on both runtimes. */
export const ROWS: Row[] = [
  {
    name: 'bare node:http, page-1 bytes from memory',
    request: 'GET / (2 workers)',
    server: 'bare',
    path: '/',
    status: 200,
  },
  {
    name: 'bare Koa, one middleware, the same bytes',
    request: 'GET / (2 workers)',
    server: 'bareKoa',
    path: '/',
    status: 200,
  },
  { name: PAGE_1_ROW, request: 'GET /api/tasks/', server: 'service', path: '/api/tasks/', status: 200 },
  { name: 'health', request: 'GET /healthz', server: 'service', path: '/healthz', status: 200 },
  {
    name: 'writes, authenticated',
    request: 'POST /api/tasks/ + Bearer, JSON',
    server: 'service',
    path: '/api/tasks/',
    write: true,
    status: 201,
  },
];

/** What wrk sends for `row` to the runtime of `targets`. */
export function loadOf(row: Row, targets: Targets): Load {
  const url = `${targets.trees[row.server].base}${row.path}`;
  if (!row.write) return { url };
  return { url, headers: { Authorization: `Bearer ${targets.writerToken}` }, script: targets.postScript };
}

/** Sends the row's request once, so a row that answers the wrong status stops the run before measuring. */
export async function checkRow(row: Row, targets: Targets): Promise<void> {
  const load = loadOf(row, targets);
  const response = await fetch(load.url, {
    method: row.write ? 'POST' : 'GET',
    headers: { ...load.headers, ...(row.write ? { 'Content-Type': 'application/json' } : {}) },
    body: row.write ? '{"title":"Written by the runtime benchmark"}' : undefined,
  });
  await response.arrayBuffer();
  if (response.status !== row.status) throw new Error(`${row.name}: ${load.url} answered ${response.status}`);
}
