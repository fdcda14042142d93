import { z } from 'zod';
import type { OwnerCounts } from '../../events/projections/read-model.js';
import { reportInputSchema } from '../../reports/report.input.js';
import type { EventView } from '../events/event.view.js';
import { KEYED_BY } from '../../throttle/index.js';
import type { ReportResource } from '../reports/report.view.js';
import { credentialsInputSchema } from '../auth/credentials.input.js';
import { taskInputSchema, taskPatchSchema } from '../tasks/task.input.js';
import type { TaskResource } from '../tasks/task.view.js';

/**
 * The bodies of the API document (docs/architecture.md "API document"), each named once in one
 * of two registries: `responses` (converted as zod's output: every key required, no others) and
 * `requests` (as zod's input: optional keys, unknown keys allowed, as the parsers ignore them).
 * The view types are checked against these at compile time (see `_ViewsMatch`).
 */
type Meta = { id: string; description?: string };
export const responses = z.registry<Meta>();
export const requests = z.registry<Meta>();

export const named = <T extends z.ZodType>(
  registry: typeof responses,
  id: string,
  schema: T,
  description?: string,
): T => {
  registry.add(schema, { id, description });
  // Property descriptions (`.describe()`) live in zod's global registry; the conversion reads that one.
  z.globalRegistry.add(schema, { id, description });
  return schema;
};

const dateTime = z.iso.datetime();
const link = z.url().nullable();
const count = z.number().int().min(0);

export const errorSchema = named(
  responses,
  'Error',
  z.object({ detail: z.string() }),
  'Every error but a validation error: `{"detail": "..."}`, with DRF\'s texts.',
);
export const validationErrorSchema = named(
  responses,
  'ValidationError',
  z.record(z.string(), z.array(z.string())),
  'A 400 for a body that does not validate: each bad field (or `non_field_errors`) with its messages.',
);

export const taskSchema = named(
  responses,
  'Task',
  z.object({
    id: z.number().int().min(1),
    title: z.string(),
    description: z.string(),
    completed: z.boolean(),
    owner: z.string(),
    created_at: dateTime,
    updated_at: dateTime,
    version: z.number().int().min(1),
  }),
);

const eventSchema = named(
  responses,
  'Event',
  z.object({
    position: z.number().int().min(1),
    task_id: z.number().int().min(1),
    version: z.number().int().min(1),
    type: z.string(),
    data: z.record(z.string(), z.unknown()),
    metadata: z.record(z.string(), z.unknown()),
    recorded_at: dateTime,
  }),
);

const reportParams = z.object({ from: z.iso.date(), to: z.iso.date(), owner: z.string().nullable() });
const tally = { created: count, completed: count, reopened: count, deleted: count };
export const reportSchema = named(
  responses,
  'Report',
  z.object({
    id: z.uuid(),
    status: z.enum(['pending', 'running', 'done', 'failed']),
    params: reportParams,
    created_at: dateTime,
    started_at: dateTime.nullable(),
    finished_at: dateTime.nullable(),
    attempts: count,
    result: reportParams
      .extend({
        open_at_start: count,
        days: z.array(z.object({ date: z.iso.date(), ...tally, open_at_end: count })),
        totals: z.object(tally),
        as_of_position: count,
        as_of: dateTime,
      })
      .nullable(),
    error: z.string().nullable(),
  }),
);

/** The three list envelopes (docs/architecture.md "Pagination"), one per style, for `item`. */
export function envelopes(name: string, item: z.ZodType) {
  const links = { next: link, previous: link, results: z.array(item) };
  return [
    named(
      responses,
      `${name}PageNumberPage`,
      z.object({ count, ...links }),
      `Page-number style (default; \`page\`, \`page_size\`).`,
    ),
    named(
      responses,
      `${name}LimitOffsetPage`,
      z.object({ count, ...links }),
      'Limit/offset style (`limit`, `offset`).',
    ),
    named(
      responses,
      `${name}CursorPage`,
      z.object(links),
      'Cursor style (`cursor`, `page_size`): no `count`; follow `next`.',
    ),
  ] as const;
}
export const taskPages = envelopes('Task', taskSchema);
export const eventPages = envelopes('Event', eventSchema);
export const reportPages = envelopes('Report', reportSchema);

export const feedSchema = named(
  responses,
  'EventFeed',
  z.object({ next: z.url(), results: z.array(eventSchema) }),
  'Always a `next` link: poll it.',
);
export const tokenSchema = named(
  responses,
  'Token',
  z.object({ token: z.string().regex(/^[0-9a-f]{64}$/), expires_at: dateTime }),
);
export const statsSchema = named(
  responses,
  'TaskStats',
  z.object({
    as_of_position: count,
    last_position: count,
    results: z.array(z.object({ owner: z.string(), open: count, completed: count })),
  }),
);
export const rateLimitsSchema = named(
  responses,
  'RateLimits',
  z.array(
    z.object({
      scope: z.string(),
      rate: z.string(),
      keyed_by: z.enum(KEYED_BY),
      enforced: z.boolean().describe('False when the scope runs wholly in shadow: counted, never refused.'),
      shadow_rate: z.string().nullable().describe('A rate tried beside `rate` that never refuses; null when none.'),
      remaining: z
        .number()
        .int()
        .nullable()
        .describe("The caller's requests left in this scope's window; null when the scope does not apply to it."),
      reset_seconds: z
        .number()
        .int()
        .nullable()
        .describe('Seconds until `remaining` next grows (as the RateLimit field’s `t`); null with `remaining`.'),
      plan: z
        .string()
        .nullable()
        .describe(
          "The caller's plan (`default`: the settings' rates), which sets `rate` for it unless an override does; " +
            'null for an anonymous caller or a scope that does not count it.',
        ),
      override_until: z
        .string()
        .nullable()
        .describe("When the override that sets this scope's `rate` for the caller ends (ISO 8601); null when none."),
    }),
  ),
  "The limits enforced, with the caller's own budget in each; empty while THROTTLE_ENABLED is off.",
);
export const rootSchema = named(
  responses,
  'ApiRoot',
  z.record(z.string(), z.url()),
  'Absolute links to every collection.',
);
export const healthSchema = named(responses, 'Health', z.object({ status: z.literal('ok') }));
export const readinessSchema = named(
  responses,
  'Readiness',
  z.union([
    z.object({
      status: z.enum(['ready', 'unavailable']),
      checks: z.object({ database: z.enum(['ok', 'failing']), redis: z.enum(['ok', 'failing']) }),
      causes: z.object({ database: z.string().optional(), redis: z.string().optional() }).optional(),
    }),
    z.object({ status: z.literal('stopping') }),
  ]),
  '`stopping` once the host has been told to stop (DRAIN_DELAY_MS): balancers take it out while it still serves.',
);

export const taskInput = named(requests, 'TaskInput', taskInputSchema);
export const taskPatch = named(requests, 'TaskPatch', taskPatchSchema);
export const reportInput = named(requests, 'ReportInput', reportInputSchema);
export const credentialsSchema = named(requests, 'Credentials', credentialsInputSchema);

/** True when A and B are the same type (each assignable to the other). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
/** A view that changes without its schema (or the reverse) does not compile. */
export type _ViewsMatch = [
  Assert<Same<z.infer<typeof taskSchema>, TaskResource>>,
  Assert<Same<z.infer<typeof eventSchema>, EventView>>,
  Assert<Same<z.infer<typeof reportSchema>, ReportResource>>,
  Assert<Same<z.infer<typeof statsSchema>, OwnerCounts>>,
];
