import { authOperations, authRoutes } from './auth/auth.routes.js';
import { docsOperations } from './docs/docs.operations.js';
import { docsRoutes } from './docs/docs.routes.js';
import { rootOperations, rootRoutes } from './docs/root.routes.js';
import { eventOperations, eventRoutes } from './events/events.routes.js';
import { healthOperations, healthRoutes } from './health/health.routes.js';
import type { Operation } from './openapi/operation.js';
import { rateLimitOperations, rateLimitRoutes } from './rate-limits/rate-limits.routes.js';
import { reportOperations, reportRoutes } from './reports/reports.routes.js';
import type { Resource } from './router.js';
import { statsOperations } from './tasks/stats.routes.js';
import { taskOperations as tasks } from './tasks/tasks.operations.js';
import { taskRoutes } from './tasks/tasks.routes.js';

/**
 * The API, declared once (docs/architecture.md "The request's journey"): the app mounts these resources
 * in this order, and the API document (`GET /api/schema/`, `npm run client`) lists their operations in
 * the same order; a route can only be declared with an operation its resource lists. The docs page
 * lists the tags in the order they first appear: the tasks first, then auth, events, reports, meta and
 * health (docs/api.md "For integrators").
 */
export const resources: readonly Resource[] = [
  {
    operations: [
      tasks.list,
      tasks.create,
      statsOperations.stats,
      tasks.retrieve,
      tasks.update,
      tasks.replace,
      tasks.destroy,
      tasks.history,
    ],
    routes: taskRoutes,
  },
  { operations: Object.values(authOperations), routes: authRoutes },
  { operations: Object.values(eventOperations), routes: eventRoutes },
  { operations: Object.values(reportOperations), routes: reportRoutes },
  { operations: Object.values(rootOperations), routes: rootRoutes },
  { operations: Object.values(docsOperations), routes: docsRoutes },
  { operations: Object.values(rateLimitOperations), routes: rateLimitRoutes },
  { operations: Object.values(healthOperations), routes: healthRoutes },
];

/** Every operation the API serves, in the order of the document. */
export const apiOperations: readonly Operation[] = resources.flatMap((resource) => resource.operations);
