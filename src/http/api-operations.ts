import { authOperations } from './auth.routes.js';
import { docsOperations } from './docs.operations.js';
import { eventOperations } from './events.routes.js';
import { healthOperations } from './health.routes.js';
import type { Operation } from './openapi/operation.js';
import { rateLimitOperations } from './rate-limits.routes.js';
import { reportOperations } from './reports.routes.js';
import { rootOperations } from './root.routes.js';
import { statsOperations } from './stats.routes.js';
import { taskOperations } from './tasks.operations.js';

/**
 * Every operation the API serves, in the order of the document: what `GET /api/schema/` and
 * `npm run client` describe. A route registered without being listed here fails
 * test/int/openapi.int.test.ts. The docs page lists the tags in the order they first appear here:
 * the tasks first, then auth, events, reports, meta and health (docs/api.md "For integrators").
 */
const taskList = Object.values(taskOperations).filter((op) => op.path === '/api/tasks/');
const oneTask = Object.values(taskOperations).filter((op) => op.path !== '/api/tasks/');

export const apiOperations: readonly Operation[] = [
  ...taskList,
  // A fixed path before the template that would also match it (`/api/tasks/{id}/`).
  ...Object.values(statsOperations),
  ...oneTask,
  ...Object.values(authOperations),
  ...Object.values(eventOperations),
  ...Object.values(reportOperations),
  ...Object.values(rootOperations),
  ...Object.values(docsOperations),
  ...Object.values(rateLimitOperations),
  ...Object.values(healthOperations),
];
