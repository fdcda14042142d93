import { z } from 'zod';
import { defineOperation, type RequestHeader } from '../openapi/operation.js';
import { errorSchema, eventPages, taskInput, taskPages, taskPatch, taskSchema } from '../openapi/schemas.js';

const id = { id: z.int().min(1) };
const conditional: RequestHeader[] = ['If-Match', 'If-None-Match'];
const read = { access: 'optional', tag: 'tasks' } as const;
const write = { access: 'required', tag: 'tasks' } as const;
const task = (description: string) => ({ description, body: taskSchema, headers: ['ETag' as const] });
const notModified = {
  description: 'An `If-None-Match` tag is still current.',
  headers: ['ETag' as const, 'Cache-Control' as const],
};
const failed = { description: 'A precondition failed (`If-Match`, `If-None-Match`).', body: errorSchema };
const forbidden = { description: 'Only the owner may change or delete a task.', body: errorSchema };

/** The task routes as registered and documented (docs/architecture.md "API document"). */
export const taskOperations = {
  list: defineOperation({
    ...read,
    method: 'get',
    path: '/api/tasks/',
    operationId: 'listTasks',
    summary: 'List tasks',
    list: { envelopes: taskPages, ordering: 'id', cached: true },
    headers: ['If-None-Match'],
    responses: { 304: notModified },
  }),
  create: defineOperation({
    ...write,
    method: 'post',
    path: '/api/tasks/',
    operationId: 'createTask',
    summary: 'Create a task',
    headers: ['Idempotency-Key'],
    body: taskInput,
    responses: {
      201: {
        ...task('Created; a replay (same `Idempotency-Key`) repeats the first answer.'),
        headers: ['ETag', 'Location', 'Idempotent-Replayed'],
      },
      422: { description: 'The `Idempotency-Key` was used with another body or endpoint.', body: errorSchema },
    },
  }),
  retrieve: defineOperation({
    ...read,
    method: 'get',
    path: '/api/tasks/:id/',
    operationId: 'getTask',
    summary: 'Get a task',
    params: id,
    headers: conditional,
    responses: { 200: { ...task('The task.'), headers: ['ETag', 'Cache-Control'] }, 304: notModified, 412: failed },
  }),
  update: defineOperation({
    ...write,
    method: 'patch',
    path: '/api/tasks/:id/',
    operationId: 'updateTask',
    summary: 'Change some fields of a task',
    params: id,
    headers: conditional,
    body: taskPatch,
    responses: { 200: task('The changed task.'), 403: forbidden, 412: failed },
  }),
  replace: defineOperation({
    ...write,
    method: 'put',
    path: '/api/tasks/:id/',
    operationId: 'replaceTask',
    summary: 'Replace a task',
    params: id,
    headers: conditional,
    body: taskInput,
    responses: { 200: task('The replaced task.'), 403: forbidden, 412: failed },
  }),
  destroy: defineOperation({
    ...write,
    method: 'delete',
    path: '/api/tasks/:id/',
    operationId: 'deleteTask',
    summary: 'Delete a task',
    params: id,
    headers: conditional,
    responses: { 204: { description: 'Deleted.' }, 403: forbidden, 412: failed },
  }),
  history: defineOperation({
    ...read,
    method: 'get',
    path: '/api/tasks/:id/events/',
    operationId: 'listTaskEvents',
    summary: "A task's history",
    params: id,
    list: { envelopes: eventPages, ordering: 'version', cached: true },
    headers: ['If-None-Match'],
    responses: { 304: notModified },
  }),
};
