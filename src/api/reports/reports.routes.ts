import { z } from 'zod';
import { Errors } from '../../base/errors.js';
import { parseReportInput } from '../../reports/report.input.js';
import { createReport, findReport, userReportsSource, type ReportRecord } from '../../reports/reports.repository.js';
import { firstLineOf } from '../../stores/store-errors.js';
import { isReportId, reportPath, viewReport } from './report.view.js';
import { readBody } from '../body.js';
import { renderPage } from '../paginated.js';
import type { ResourceRouter, RouteParts } from '../router.js';
import { readIdempotencyClaim, sendAnswer, sendReplay } from '../idempotency-key.js';
import { requireUser } from '../users.js';
import { defineOperation, route } from '../openapi/operation.js';
import { errorSchema, reportInput, reportPages, reportSchema } from '../openapi/schemas.js';

const reports = { tag: 'reports', access: 'required' } as const;
const reportOperations = {
  create: defineOperation({
    ...reports,
    method: 'post',
    path: '/api/reports/',
    operationId: 'createReport',
    summary: 'Request a report',
    description: 'Throttled by the `reports` scope. Poll the `Location` until `status` is `done` or `failed`.',
    headers: ['Idempotency-Key'],
    body: reportInput,
    responses: {
      202: { description: 'Recorded and queued.', body: reportSchema, headers: ['Location', 'Idempotent-Replayed'] },
      422: { description: 'The `Idempotency-Key` was used with another body or endpoint.', body: errorSchema },
    },
  }),
  list: defineOperation({
    ...reports,
    method: 'get',
    path: '/api/reports/',
    operationId: 'listReports',
    summary: 'My reports',
    list: { envelopes: reportPages, ordering: 'created_at' },
    responses: {},
  }),
  retrieve: defineOperation({
    ...reports,
    method: 'get',
    path: '/api/reports/:id/',
    operationId: 'getReport',
    summary: 'A report of mine',
    params: { id: z.uuid() },
    responses: { 200: { description: 'The report.', body: reportSchema } },
  }),
};

/**
 * Reports (docs/architecture.md "HTTP API"): `POST /api/reports/` records a pending report and enqueues its
 * aggregation, answering 202 with `Location`; it is throttled by the `reports` scope alone and
 * honours `Idempotency-Key`. `GET /api/reports/{id}/` polls it under the general rates; only its
 * creator sees it. `GET /api/reports/` lists one's own reports in creation order, paginated like
 * every list (`?ordering=created_at` or `-created_at`).
 */
export function reportRoutes(router: ResourceRouter, { deps, guard }: RouteParts): void {
  const { config, db } = deps;

  route(router, reportOperations.create, guard({ scope: 'reports' }), async (ctx) => {
    const user = requireUser(ctx);
    const params = parseReportInput(await readBody(ctx, config.BODY_LIMIT_BYTES), config.REPORT_MAX_DAYS);
    const idempotency = readIdempotencyClaim(ctx, params);
    const outcome = await createReport(db, { userId: user.id, params, idempotency, now: deps.clock.now() });
    if (!outcome.ok) throw Errors.idempotencyMismatch();
    if (outcome.replayed) return sendReplay(ctx, config, outcome.replayed, acceptReport);
    // The report is recorded; should Redis be down, the jobs child's sweeper enqueues it later.
    await deps.reportQueue?.enqueue(outcome.report.id).catch((error: unknown) => {
      // One line with the cause, no stack: the report is safe, only its queueing waits.
      deps.logger.warn(
        { reportId: outcome.report.id, cause: firstLineOf(error) },
        'report recorded but not enqueued; the sweeper will retry',
      );
    });
    sendAnswer(ctx, config, acceptReport(outcome.report));
  });

  route(router, reportOperations.list, guard(), async (ctx) => {
    const user = requireUser(ctx);
    ctx.body = (await renderPage(ctx, deps, userReportsSource(db, user.id), viewReport, 'created_at')).body;
  });

  route(router, reportOperations.retrieve, guard(), async (ctx) => {
    const user = requireUser(ctx);
    const id = ctx.params.id;
    const report = isReportId(id) ? await findReport(db, id, user.id) : undefined;
    if (!report) throw Errors.notFound();
    ctx.body = viewReport(report);
  });

  router.refuseOtherMethods(() => guard(), 'none');
}

/**
 * A fresh report request's answer: 202 with the pending report and its `Location`. A replay is
 * rendered by this function too, from the report as the idempotency record kept it.
 */
function acceptReport(report: ReportRecord) {
  return { status: 202, body: viewReport(report), resourcePath: reportPath(report.id) };
}
