import type { Migration, MigrationProvider } from 'kysely';
import * as initial from './20261122000100_initial.js';
import * as reportsReadModel from './20261122000200_reports_read_model.js';
import * as taskRanges from './20261124000100_task_ranges.js';
import * as reportSeq from './20261126000100_report_seq.js';
import * as eventsRecordedAt from './20261127000100_events_recorded_at.js';
import * as userAdmin from './20261127000200_user_admin.js';
import * as idempotencyResource from './20261128000100_idempotency_resource.js';
import * as limitPolicies from './20261202000100_limit_policies.js';

/** Every migration, by timestamped name. Listed statically so a bundled build needs no file scan. */
export const migrationProvider: MigrationProvider = {
  async getMigrations(): Promise<Record<string, Migration>> {
    return {
      '20261122000100_initial': initial,
      '20261122000200_reports_read_model': reportsReadModel,
      '20261124000100_task_ranges': taskRanges,
      '20261126000100_report_seq': reportSeq,
      '20261127000100_events_recorded_at': eventsRecordedAt,
      '20261127000200_user_admin': userAdmin,
      '20261128000100_idempotency_resource': idempotencyResource,
      '20261202000100_limit_policies': limitPolicies,
    };
  },
};
