import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import type { CommandOutcome, ExcludedVersion, TaskState } from '../events/task.events.js';
import { findTask, streamExists, taskEventsSource, tasksSource } from '../events/task.queries.js';
import { taskPath, viewTask } from '../events/task.view.js';
import { readBody } from './body.js';
import type { Guard } from './guard.js';
import { createRouter, refuseOtherMethods } from './router.js';
import { respondWithPage } from './paginated.js';
import { absoluteUrl } from './request-url.js';
import { readIdempotencyClaim } from './idempotency.js';
import { parseTaskInput } from './task.input.js';
import { requireUser } from './users.js';

/** The task collection: list, create, retrieve, change, delete, and each task's history. */
export function taskRoutes(deps: Deps, guard: Guard): Router {
  const router = createRouter();
  const { db, commands } = deps;

  router.get('/api/tasks/', guard(), (ctx) => respondWithPage(ctx, deps, tasksSource(db), viewTask));
  router.post('/api/tasks/', guard(), createTask(deps));

  router.get('/api/tasks/:id/', guard(), async (ctx) => {
    const task = await findTask(db, parseId(ctx.params.id));
    if (!task) throw Errors.notFound();
    // RFC 9110 §13.2.2: If-Match first, then If-None-Match (304 for a read)
    if (readIfMatch(ctx)?.includes(task.version) === false) throw Errors.preconditionFailed(etagOf(task), 'If-Match');
    if (matchesEtag(ctx.get('If-None-Match'), task)) {
      ctx.status = 304;
      ctx.set('ETag', etagOf(task));
      return;
    }
    respondWithTask(ctx, deps, 200, viewTask(task));
  });
  router.patch('/api/tasks/:id/', guard(), changeTask(deps, false));
  router.put('/api/tasks/:id/', guard(), changeTask(deps, true));

  router.delete('/api/tasks/:id/', guard(), async (ctx) => {
    const user = requireUser(ctx);
    const outcome = await commands.execute({
      type: 'DeleteTask', actor: actorOf(ctx, user), taskId: parseId(ctx.params.id), expectedVersion: readIfMatch(ctx), excludedVersion: readIfNoneMatch(ctx),
    });
    if (!outcome.ok) throw rejectionError(outcome, ctx);
    ctx.status = 204;
  });

  router.get('/api/tasks/:id/events/', guard(), async (ctx) => {
    const taskId = parseId(ctx.params.id);
    if (!(await streamExists(db, taskId))) throw Errors.notFound();
    await respondWithPage(ctx, deps, taskEventsSource(db, taskId), (e) => e, 'version');
  });

  return refuseOtherMethods(router, () => guard(), 'read');
}

/** POST: 201 with `Location` and `ETag`; a repeated `Idempotency-Key` replays the first answer. */
function createTask(deps: Deps) {
  return async (ctx: Context) => {
    const user = requireUser(ctx);
    const fields = parseTaskInput(await readBody(ctx, deps.config.BODY_LIMIT_BYTES, true), false) as Required<ReturnType<typeof parseTaskInput>>;
    const idempotency = readIdempotencyClaim(ctx, fields);
    const outcome = await deps.commands.execute({ type: 'CreateTask', actor: actorOf(ctx, user), fields, idempotency });
    if (outcome.ok && outcome.replayed) {
      ctx.set('Idempotent-Replayed', 'true');
      respondWithTask(ctx, deps, outcome.replayed.status, outcome.replayed.body as { id: number; version: number });
      return;
    }
    respondWithTask(ctx, deps, 201, viewTask(expectTask(outcome)));
  };
}

/** PATCH (`replace` false) or PUT: the owner's change, conditional on `If-Match` and `If-None-Match` when given. */
function changeTask(deps: Deps, replace: boolean) {
  return async (ctx: Context) => {
    const user = requireUser(ctx);
    const taskId = parseId(ctx.params.id);
    const fields = parseTaskInput(await readBody(ctx, deps.config.BODY_LIMIT_BYTES, true), !replace);
    const outcome = await deps.commands.execute({
      type: 'ChangeTask', actor: actorOf(ctx, user), taskId, fields, expectedVersion: readIfMatch(ctx), excludedVersion: readIfNoneMatch(ctx),
    });
    if (!outcome.ok) throw rejectionError(outcome, ctx);
    respondWithTask(ctx, deps, 200, viewTask(expectTask(outcome)));
  };
}

function respondWithTask(ctx: Context, deps: Pick<Deps, 'config'>, status: number, task: { id: number; version: number }) {
  ctx.status = status;
  ctx.set('ETag', etagOf(task));
  if (status === 201) ctx.set('Location', absoluteUrl(ctx, deps.config.TRUST_PROXY_HOPS, taskPath(task.id)));
  ctx.body = task;
}

function actorOf(ctx: Context, user: { id: number; username: string }) {
  return { userId: user.id, username: user.username, requestId: ctx.state.requestId as string };
}

function expectTask(outcome: CommandOutcome): TaskState {
  if (!outcome.ok) throw rejectionError(outcome);
  if (!outcome.task) throw new Error('command produced no task');
  return outcome.task;
}

/** The HTTP answer to a rejected command; `If-Match: *` on a missing task is 412 (RFC 9110 §13.1.1). */
function rejectionError(outcome: Extract<CommandOutcome, { ok: false }>, ctx?: Context) {
  switch (outcome.error) {
    case 'not_found':
      return ctx?.get('If-Match').trim() === '*' ? Errors.preconditionFailedMissing() : Errors.notFound();
    case 'forbidden':
      return Errors.forbidden();
    case 'version_conflict': {
      // the condition that failed: If-Match when it does not name the current version, else If-None-Match
      const current = etagOf({ id: Number(ctx?.params.id), version: outcome.currentVersion });
      const failed = ctx && readIfMatch(ctx)?.includes(outcome.currentVersion) === false ? 'If-Match' : 'If-None-Match';
      return Errors.preconditionFailed(current, failed);
    }
    case 'idempotency_mismatch':
      return Errors.idempotencyMismatch();
  }
}

function parseId(raw: string | undefined): number {
  if (!raw || !/^\d{1,15}$/.test(raw)) throw Errors.notFound();
  return Number(raw);
}

/** Strong validator: the task id and its version. */
export function etagOf(task: { id: number; version: number }): string {
  return `"${task.id}-${task.version}"`;
}

function matchesEtag(header: string, task: TaskState): boolean {
  if (!header) return false;
  const tag = etagOf(task);
  return header.split(',').some((t) => t.trim() === '*' || t.trim().replace(/^W\//, '') === tag);
}

/**
 * The versions an `If-None-Match` header refuses for a write (RFC 9110 §13.1.2, weak comparison):
 * every tag `"<id>-<version>"` or `W/"<id>-<version>"` of this task in its list; `*` refuses any,
 * since the task exists. No header: unconditional.
 */
function readIfNoneMatch(ctx: Context): ExcludedVersion | undefined {
  const header = ctx.get('If-None-Match').trim();
  if (!header) return undefined;
  return header === '*' ? '*' : versionsNamed(header, ctx, true);
}

/**
 * The versions an `If-Match` header accepts: every strong tag `"<id>-<version>"` of this task in
 * its list. Weak, malformed or other tasks' tags never match (RFC 9110 §13.1.1), so a header
 * with none of ours accepts nothing and the change gets 412. `*` or no header: unconditional.
 */
function readIfMatch(ctx: Context): number[] | undefined {
  const header = ctx.get('If-Match').trim();
  if (!header || header === '*') return undefined;
  return versionsNamed(header, ctx, false);
}

const STRONG_TAGS = /(?:^|,)\s*"(\d+)-(\d+)"\s*(?=,|$)/g;
const ANY_TAGS = /(?:^|,)\s*(?:W\/)?"(\d+)-(\d+)"\s*(?=,|$)/g;

/** The versions of the path's task that a list of entity tags names; `weak` also counts `W/` tags. */
function versionsNamed(header: string, ctx: Context, weak: boolean): number[] {
  const id = Number(ctx.params.id);
  return [...header.matchAll(weak ? ANY_TAGS : STRONG_TAGS)].filter((m) => Number(m[1]) === id).map((m) => Number(m[2]));
}

