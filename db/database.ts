import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Json<T = unknown> = ColumnType<T, string, string>;
type NullableJson<T = unknown> = ColumnType<T | null, string | null | undefined, string | null>;

export interface UsersTable {
  id: Generated<number>;
  username: string;
  password_hash: string;
  created_at: Timestamp;
  /** Set while the user is disabled: its login is refused and its tokens are revoked. */
  disabled_at: NullableTimestamp;
  /** The user's plan of limits (docs/throttling.md "Plans and overrides"): `default` is the settings' rates. */
  plan: ColumnType<string, string | undefined, string>;
}

export interface TokensTable {
  token_hash: string;
  user_id: number;
  created_at: Timestamp;
  expires_at: Timestamp;
  /** Set when revoked (logout, `token:revoke`, `user:disable`); the row goes when it expires. */
  revoked_at: NullableTimestamp;
}

/** One change an operator made to a user (docs/operations.md "Users"). */
export interface UserAuditTable {
  id: Generated<number>;
  at: Timestamp;
  user_id: number | null;
  username: string;
  action: 'created' | 'password-set' | 'disabled' | 'enabled' | 'tokens-revoked';
  tokens_revoked: ColumnType<number, number | undefined, number>;
  /** Who ran the command: `account@host`. */
  actor: string;
}

/** Rates one user, address or prefix has instead of its plan's until `until` (docs/throttling.md "Plans and overrides"). */
export interface LimitOverridesTable {
  id: Generated<number>;
  target_kind: 'user' | 'address';
  user_id: number | null;
  /** An address or CIDR prefix, as the operator gave it. */
  address: string | null;
  /** Scope to rate text: `{"user": "1000/min"}`. */
  rates: ColumnType<Record<string, string>, string, string>;
  until: Timestamp;
  reason: string;
  created_by: string;
  created_at: ColumnType<Date, Date | undefined, never>;
  /** Set when an operator removed it, or a newer override for the same client replaced it. */
  removed_at: NullableTimestamp;
}

/** One change an operator made to a plan or an override: who, when, why, before and after. */
export interface LimitAuditTable {
  id: Generated<number>;
  at: ColumnType<Date, Date | undefined, never>;
  actor: string;
  action: 'plan-set' | 'override-set' | 'override-removed';
  target: string;
  reason: string | null;
  before: ColumnType<unknown, string | null, never>;
  after: ColumnType<unknown, string | null, never>;
}

/** The source of truth: one row per change, in commit order. */
export interface EventsTable {
  position: number;
  stream_id: number;
  version: number;
  type: string;
  data: Json<Record<string, unknown>>;
  metadata: Json<Record<string, unknown>>;
  recorded_at: Timestamp;
}

/** Projection of the task streams; rebuildable from `events`. */
export interface TasksTable {
  id: number;
  title: string;
  description: string;
  completed: boolean;
  owner_id: number;
  owner: string;
  created_at: Timestamp;
  updated_at: Timestamp;
  version: number;
}

/** Named counters maintained by the append transaction (task count, last id, last position). */
export interface CountersTable {
  name: string;
  value: number;
}

/** Live tasks per range of ids (range = floor(id / RANGE_SIZE)); kept by the append transaction, rebuildable. */
export interface TaskRangesTable {
  range_id: number;
  live: number;
}

/**
 * One `Idempotency-Key` record: since 20261128000100 the created resource (`resource`); before,
 * the rendered answer (`status`, `body`, `resource_path`). A row holds one or the other.
 */
export interface IdempotencyKeysTable {
  user_id: number;
  key: string;
  request_hash: string;
  status: number | null;
  body: NullableJson;
  resource_path: string | null;
  resource: NullableJson;
  created_at: Timestamp;
}

/** One report request and its outcome; the BullMQ job that computes it has the same id. */
export interface ReportsTable {
  id: string;
  user_id: number;
  status: 'pending' | 'running' | 'done' | 'failed';
  params: Json<{ from: string; to: string; owner: string | null }>;
  result: ColumnType<unknown, string | null | undefined, string | null>;
  error: string | null;
  attempts: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
  /** Creation order (an identity column): the key of the report list. */
  seq: Generated<number>;
}

/** Asynchronous read model: live tasks per owner, open and completed. Rebuildable from `events`. */
export interface OwnerTaskCountsTable {
  owner: string;
  open: number;
  completed: number;
}

/** How far each asynchronous projection has applied the event log. */
export interface ProjectionCheckpointsTable {
  name: string;
  position: number;
  updated_at: Timestamp;
}

export interface Database {
  users: UsersTable;
  tokens: TokensTable;
  user_audit: UserAuditTable;
  limit_overrides: LimitOverridesTable;
  limit_audit: LimitAuditTable;
  events: EventsTable;
  tasks: TasksTable;
  counters: CountersTable;
  task_ranges: TaskRangesTable;
  idempotency_keys: IdempotencyKeysTable;
  reports: ReportsTable;
  owner_task_counts: OwnerTaskCountsTable;
  projection_checkpoints: ProjectionCheckpointsTable;
}
