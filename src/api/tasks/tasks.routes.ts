import type { Context } from 'koa';
import type { Kysely } from 'kysely';
import type { Database } from '../../../db/database.js';
import type { Deps } from '../../deps.js';
import { Errors } from '../../base/errors.js';
import type { CommandOutcome, TaskState } from '../../events/domain/task.events.js';
import type { RenderedAnswer } from '../../idempotency/idempotency.js';
import { findTask, streamFacts, taskEventsSource, tasksSource } from '../../events/store/task.queries.js';
import { readBody } from '../body.js';
import type { ResourceRouter, RouteParts } from '../router.js';
import { readAnswer, readHeadAhead, sendList, sendNotModified, sendRead, startRead } from '../cached-read.js';
import { renderPage } from '../paginated.js';
import { audienceOf, viewEvent } from '../events/event.view.js';
import { etagOf, etagOfBody, matchesEtag, readIfMatch, readIfNoneMatch } from '../conditional.js';
import { readIdempotencyClaim, sendAnswer, sendReplay } from '../idempotency-key.js';
import { taskPath, viewTask, type TaskResource } from './task.view.js';
import { parseTaskInput } from './task.input.js';
import { requireUser } from '../users.js';
import { route } from '../openapi/operation.js';
import { taskOperations } from './tasks.operations.js';
import { statsRoutes } from './stats.routes.js';
import { pageCost } from '../page-cost.js';

/** The task collection: list, create, retrieve, change, delete, and each task's history. */
export function taskRoutes(router: ResourceRouter, parts: RouteParts): void {
  const { deps, guard } = parts;
  const { commands } = deps;

  const ahead = readHeadAhead(deps);
  const ops = taskOperations;
  // A unit per 100 rows of a page, so 1 by default (docs/throttling.md "Cost: requests that weigh more").
  route(router, ops.list, ahead, guard({ cost: pageCost(deps.config) }), (ctx) =>
    sendList(ctx, deps, (db) => renderPage(ctx, deps, tasksSource(db), viewTask)),
  );
  route(router, ops.create, guard(), createTask(deps));
  statsRoutes(router, parts);

  route(router, ops.retrieve, ahead, guard(), async (ctx) => {
    const id = parseId(ctx.params.id);
    const answer = await readAnswer(deps, await startRead(ctx, deps), async (db) => {
      const task = await findTask(db, id);
      if (!task) throw Errors.notFound();
      return { body: viewTask(task), etag: etagOf(task) };
    });
    // RFC 9110 §13.2.2: If-Match first, then If-None-Match (304 for a read)
    const accepted = readIfMatch(ctx);
    if (accepted && !accepted.some((version) => etagOf({ id, version }) === answer.etag))
      throw Errors.preconditionFailed(answer.etag, 'If-Match');
    if (matchesEtag(ctx.get('If-None-Match'), answer.etag)) return sendNotModified(ctx, answer.etag);
    sendRead(ctx, answer);
  });
  route(router, ops.update, guard(), changeTask(deps, false));
  route(router, ops.replace, guard(), changeTask(deps, true));

  route(router, ops.destroy, guard(), async (ctx) => {
    const user = requireUser(ctx);
    const outcome = await commands.execute({
      type: 'DeleteTask',
      actor: actorOf(ctx, user),
      taskId: parseId(ctx.params.id),
      expectedVersion: readIfMatch(ctx),
      excludedVersion: readIfNoneMatch(ctx),
    });
    if (!outcome.ok) throw rejectionError(outcome, ctx);
    ctx.status = 204;
  });

  // A history's answer depends on who asks (docs/security.md "Who can see what"): a deleted task's is the
  // owner's alone, and only the owner sees ids of people and requests. Kept and tagged per viewer.
  route(router, ops.history, ahead, guard(), async (ctx) => {
    const taskId = parseId(ctx.params.id);
    const viewer = ctx.state.user?.id;
    const render = async (db: Kysely<Database>) => {
      const audience = audienceOf((await streamFacts(db, [taskId])).get(taskId), viewer);
      if (audience === 'redacted') throw Errors.notFound();
      return renderPage(ctx, deps, taskEventsSource(db, taskId), (event) => viewEvent(event, audience), 'version');
    };
    await sendList(ctx, deps, render, viewer === undefined ? 'anonymous' : `user ${viewer}`);
  });

  router.refuseOtherMethods(() => guard(), 'read');
}

/** POST: 201 with `Location` and `ETag`; a repeated `Idempotency-Key` replays the first answer. */
function createTask(deps: Deps) {
  return async (ctx: Context) => {
    const user = requireUser(ctx);
    const fields = parseTaskInput(await readBody(ctx, deps.config.BODY_LIMIT_BYTES), false) as Required<
      ReturnType<typeof parseTaskInput>
    >;
    const idempotency = readIdempotencyClaim(ctx, fields);
    const outcome = await deps.commands.execute({ type: 'CreateTask', actor: actorOf(ctx, user), fields, idempotency });
    if (outcome.ok && outcome.replayed) sendReplay(ctx, deps.config, outcome.replayed, answerCreated);
    else sendAnswer(ctx, deps.config, answerCreated(expectTask(outcome)));
    const etag = etagOfBody(ctx.body);
    if (etag) ctx.set('ETag', etag);
  };
}

/** PATCH (`replace` false) or PUT: the owner's change, conditional on `If-Match` and `If-None-Match` when given. */
function changeTask(deps: Deps, replace: boolean) {
  return async (ctx: Context) => {
    const user = requireUser(ctx);
    const taskId = parseId(ctx.params.id);
    const fields = parseTaskInput(await readBody(ctx, deps.config.BODY_LIMIT_BYTES), !replace);
    const outcome = await deps.commands.execute({
      type: 'ChangeTask',
      actor: actorOf(ctx, user),
      taskId,
      fields,
      expectedVersion: readIfMatch(ctx),
      excludedVersion: readIfNoneMatch(ctx),
    });
    if (!outcome.ok) throw rejectionError(outcome, ctx);
    respondWithTask(ctx, viewTask(expectTask(outcome)));
  };
}

function respondWithTask(ctx: Context, task: TaskResource) {
  ctx.status = 200;
  ctx.set('ETag', etagOf(task));
  ctx.body = task;
}

/**
 * A create's answer: 201 with the task and its `Location`. A replay is rendered by this function
 * too, from the task as the idempotency record kept it, so it repeats the first answer's bytes.
 */
function answerCreated(task: TaskState): RenderedAnswer {
  return { status: 201, body: viewTask(task), resourcePath: taskPath(task.id) };
}

function actorOf(ctx: Context, user: { id: number; username: string }) {
  return { userId: user.id, username: user.username, requestId: ctx.state.requestId };
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
