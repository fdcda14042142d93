import type { Selectable } from 'kysely';
import type { ReportsTable } from '../../../db/database.js';
import type { ReportParams } from '../../reports/report.input.js';
import type { ReportResult } from '../../reports/aggregate.js';

export type ReportStatus = ReportsTable['status'];

/** A report as the API shows it; every key is always present, null until it applies. */
export interface ReportResource {
  id: string;
  status: ReportStatus;
  params: ReportParams;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  attempts: number;
  result: ReportResult | null;
  error: string | null;
}

export function viewReport(row: Omit<Selectable<ReportsTable>, 'seq'>): ReportResource {
  return {
    id: row.id,
    status: row.status,
    // jsonb keeps keys in its own order; answer them in the order the request used.
    params: { from: row.params.from, to: row.params.to, owner: row.params.owner },
    created_at: row.created_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    finished_at: row.finished_at?.toISOString() ?? null,
    attempts: row.attempts,
    result: (row.result as ReportResult | null) ?? null,
    error: row.error,
  };
}

/** The path of a report's resource. */
export function reportPath(id: string): string {
  return `/api/reports/${id}/`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `text` can be a report id (a lower-case UUID), so anything else is a plain 404. */
export function isReportId(text: string | undefined): text is string {
  return text !== undefined && UUID.test(text);
}
