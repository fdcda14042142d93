import type { Context } from 'koa';
import type { ExcludedVersion } from '../events/domain/task.events.js';

/**
 * Conditional requests on a task (RFC 9110 §13): its entity tag, and what `If-Match` and
 * `If-None-Match` name. Tags are strong, `"<id>-<version>"`.
 */

/** Strong validator: the task id and its version. */
export function etagOf(task: { id: number; version: number }): string {
  return `"${task.id}-${task.version}"`;
}

/** The tag of a stored answer's body when it is a task (a replayed create), else undefined. */
export function etagOfBody(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { id, version } = body as Record<string, unknown>;
  return typeof id === 'number' && typeof version === 'number' ? etagOf({ id, version }) : undefined;
}

/** Whether an `If-None-Match` header names `tag` (weak comparison) or is `*`. */
export function matchesEtag(header: string, tag: string): boolean {
  if (!header) return false;
  return header.split(',').some((t) => t.trim() === '*' || t.trim().replace(/^W\//, '') === tag);
}

/**
 * The versions an `If-None-Match` header refuses for a write (RFC 9110 §13.1.2, weak comparison):
 * every tag `"<id>-<version>"` or `W/"<id>-<version>"` of this task in its list; `*` refuses any,
 * since the task exists. No header: unconditional.
 */
export function readIfNoneMatch(ctx: Context): ExcludedVersion | undefined {
  const header = ctx.get('If-None-Match').trim();
  if (!header) return undefined;
  return header === '*' ? '*' : versionsNamed(header, ctx, true);
}

/**
 * The versions an `If-Match` header accepts: every strong tag `"<id>-<version>"` of this task in
 * its list. Weak, malformed or other tasks' tags never match (RFC 9110 §13.1.1), so a header
 * with none of ours accepts nothing and the change gets 412. `*` or no header: unconditional.
 */
export function readIfMatch(ctx: Context): number[] | undefined {
  const header = ctx.get('If-Match').trim();
  if (!header || header === '*') return undefined;
  return versionsNamed(header, ctx, false);
}

const STRONG_TAGS = /(?:^|,)\s*"(\d+)-(\d+)"\s*(?=,|$)/g;
const ANY_TAGS = /(?:^|,)\s*(?:W\/)?"(\d+)-(\d+)"\s*(?=,|$)/g;

/** The versions of the path's task that a list of entity tags names; `weak` also counts `W/` tags. */
function versionsNamed(header: string, ctx: Context, weak: boolean): number[] {
  const id = Number(ctx.params.id);
  return [...header.matchAll(weak ? ANY_TAGS : STRONG_TAGS)]
    .filter((m) => Number(m[1]) === id)
    .map((m) => Number(m[2]));
}
