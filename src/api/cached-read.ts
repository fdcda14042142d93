import { createHmac } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Context, Middleware } from 'koa';
import type { Database } from '../../db/database.js';
import type { Deps } from '../deps.js';
import { AppError } from '../base/errors.js';
import type { FreshAnswer } from '../read-cache/read-cache.js';
import { readSnapshot } from '../stores/read-replicas.js';
import { requestOrigin } from '../server/request-url.js';

/** What a cacheable read renders from one snapshot: the body, and its tag when it has its own. */
export interface Rendered {
  body: unknown;
  etag?: string;
}

/**
 * Starts reading the published head as the request arrives, so the GET travels with the
 * throttle's call of the same turn instead of after it. Put it before the route's guard.
 */
export function readHeadAhead(deps: Pick<Deps, 'readCache'>): Middleware {
  return (ctx, next) => {
    if (deps.readCache) ctx.state.head = deps.readCache.channel.read(() => !ctx.res.writableEnded);
    return next();
  };
}

/** A read under way: its cache key and the head published when it started (null: unknown). */
export interface ReadStart {
  key: string;
  published: number | null;
}

/**
 * The cache key of this request (the absolute URL its links are built from) and the published
 * head. `viewer` names whom the answer is for when it depends on who asks (a task's history):
 * answers for different viewers are kept, and tagged, apart.
 */
export async function startRead(ctx: Context, deps: Deps, viewer?: string): Promise<ReadStart> {
  const url = readKey(requestOrigin(ctx, deps.config), ctx.originalUrl, deps.config);
  const key = viewer === undefined ? url : `${url} for ${viewer}`;
  return { key, published: await publishedHead(ctx, deps) };
}

/** The cache key of an answer for everyone at `origin` + `target`: the page sizes are part of the answer (a reload
 * may change them), so they are part of the key. */
export function readKey(origin: string, target: string, config: Pick<Deps['config'], 'PAGE_SIZE' | 'MAX_PAGE_SIZE'>) {
  return `${config.PAGE_SIZE}/${config.MAX_PAGE_SIZE} ${origin}${target}`;
}

/** The head published when this request arrived (null: unknown, or no read cache). */
export async function publishedHead(ctx: Context, deps: Pick<Deps, 'readCache'>): Promise<number | null> {
  const cache = deps.readCache;
  return cache ? await (ctx.state.head ?? cache.channel.read()) : null;
}

/**
 * The answer to a read: kept by this process when it is current, else rendered from one
 * REPEATABLE READ snapshot together with that snapshot's head (docs/architecture.md, "Read
 * cache"). Errors thrown by `render` (404) propagate and are not kept.
 */
export async function readAnswer(
  deps: Deps,
  read: ReadStart,
  render: (db: Kysely<Database>) => Promise<Rendered>,
): Promise<FreshAnswer> {
  const cache = deps.readCache;
  const compute = () => renderFromSnapshot(deps, read, render);
  if (!cache) return compute();
  return cache.lookup(read.key, read.published) ?? cache.fill(read.key, read.published, compute);
}

/**
 * A list: a strong tag derived from the snapshot's head and the cache key (the request URL, and
 * the `viewer` when given, see `startRead`); `If-None-Match` naming a tag still current is `304`
 * without touching PostgreSQL.
 */
export async function sendList(
  ctx: Context,
  deps: Deps,
  render: (db: Kysely<Database>) => Promise<Rendered>,
  viewer?: string,
): Promise<void> {
  const read = await startRead(ctx, deps, viewer);
  const asked = ctx.get('If-None-Match');
  const current =
    read.published === null ? undefined : currentListTag(asked, read.key, read.published, deps.cursorSecret);
  if (current) return sendNotModified(ctx, current);
  const answer = await readAnswer(deps, read, render);
  // RFC 9110 §13.1.2: If-None-Match compares weakly, and `*` matches any current answer.
  if (asked.split(',').some((tag) => tag.trim() === '*' || tag.trim().replace(/^W\//, '') === answer.etag))
    return sendNotModified(ctx, answer.etag);
  sendRead(ctx, answer);
}

/** 200 with the answer's bytes, its tag, and `no-cache`: any write may change it, so revalidate. */
export function sendRead(ctx: Context, answer: FreshAnswer): void {
  ctx.status = 200;
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('ETag', answer.etag);
  ctx.type = 'application/json; charset=utf-8';
  ctx.body = answer.body;
}

export function sendNotModified(ctx: Context, etag: string): void {
  ctx.status = 304;
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('ETag', etag);
}

/**
 * The answer rendered from one REPEATABLE READ snapshot with that snapshot's head: a replica's
 * when one has replayed the published head (docs/architecture.md, "Read replicas"), else the primary's.
 * A refusal of `render` (an AppError: a 404) leaves the snapshot as a value, so the store never
 * takes it for a failing replica, and is thrown here.
 */
async function renderFromSnapshot(
  deps: Deps,
  read: ReadStart,
  render: (db: Kysely<Database>) => Promise<Rendered>,
): Promise<FreshAnswer> {
  const answer = await readSnapshot(deps, read.published, async (trx, head) => {
    let rendered: Rendered;
    try {
      rendered = await render(trx);
    } catch (error) {
      if (error instanceof AppError) return error;
      throw error;
    }
    const etag = rendered.etag ?? listTag(head, read.key, deps.cursorSecret);
    return { head, body: ownBuffer(JSON.stringify(rendered.body)), etag };
  });
  if (answer instanceof AppError) throw answer;
  return answer;
}

/**
 * The bytes of `text` in memory of their own: a small Buffer.from() is a slice of a shared 8 KiB
 * pool, which a kept answer would hold whole, beyond what the cache's budget counts.
 */
function ownBuffer(text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  bytes.write(text);
  return bytes;
}

/**
 * A list's strong tag: the head of the snapshot it was read from and a MAC of that head with the
 * cache key under `secret`. Only a rendered answer hands one out, so a client cannot make up a
 * tag for a head it was never answered at (a future head would pass as current and get `304`
 * for an answer it may not see, such as a deleted task's history: docs/security.md "Who can see what").
 */
function listTag(head: number, key: string, secret: string): string {
  return `"L${head}.${mac(head, key, secret)}"`;
}

function mac(head: number, key: string, secret: string): string {
  return createHmac('sha256', secret).update(`list-tag ${head} ${key}`).digest('base64url').slice(0, 16);
}

const LIST_TAG = /^\s*(?:W\/)?"L(\d+)\.([A-Za-z0-9_-]{16})"\s*$/;

/**
 * The tag in `If-None-Match` that is this URL's list tag read at a head at or above the published
 * one: nothing acknowledged since, so the page the client holds is the page it would get.
 */
function currentListTag(header: string, key: string, published: number, secret: string): string | undefined {
  if (!header) return undefined;
  for (const tag of header.split(',')) {
    const match = LIST_TAG.exec(tag);
    const head = Number(match?.[1]);
    if (match !== null && head >= published && match[2] === mac(head, key, secret))
      return tag.trim().replace(/^W\//, '');
  }
  return undefined;
}
