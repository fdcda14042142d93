import { spawn } from 'node:child_process';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { request } from './http.js';
import { scriptArgs } from './node-script.js';

/** A task a writer process created: its id and when (Date.now()) the 201 had been read. */
export interface Created {
  id: number;
  at: number;
}

export interface WriterOptions {
  durationMs: number;
  concurrency: number;
  maxPosts: number;
}

/**
 * Starts one writer process per token (see writer-process.ts), each POSTing to `base` for a
 * bounded time. `firstCreated` resolves at the first 201 of any of them; `finished` with every
 * 201 and every other answer once all have exited. A writer still running 30 s after its time
 * is killed by pid.
 */
export function spawnWriters(base: string, tokens: string[], options: WriterOptions) {
  let markFirst: () => void = () => {};
  const firstCreated = new Promise<void>((resolve) => (markFirst = resolve));
  const runs = tokens.map((token, index) => {
    const child = spawn(process.execPath, scriptArgs('test/helpers/writer-process.ts'), {
      env: {
        ...process.env,
        WRITER_BASE: base,
        WRITER_TOKEN: token,
        WRITER_LABEL: `w${index}`,
        WRITER_CONCURRENCY: String(options.concurrency),
        WRITER_DURATION_MS: String(options.durationMs),
        WRITER_MAX_POSTS: String(options.maxPosts),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const created: Created[] = [];
    const failures: string[] = [];
    let pending = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines.filter((l) => l.trim() !== '')) {
        const record = JSON.parse(line) as Partial<Created> & { status?: number; text?: string; done?: boolean };
        if (record.id !== undefined) {
          created.push(record as Created);
          markFirst();
        } else if (!record.done) failures.push(`writer ${index}: ${record.status} ${record.text}`);
      }
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const killer = setTimeout(() => child.kill('SIGKILL'), options.durationMs + 30_000);
    return new Promise<{ created: Created[]; failures: string[] }>((resolve) => {
      child.once('exit', (code) => {
        clearTimeout(killer);
        if (code !== 0) failures.push(`writer ${index} exited with ${code}: ${stderr.slice(-500)}`);
        resolve({ created, failures });
      });
    });
  });
  const finished = Promise.all(runs).then((all) => ({
    created: all.flatMap((r) => r.created),
    failures: all.flatMap((r) => r.failures),
  }));
  // A writer that fails before its first 201 must not leave readers waiting.
  void finished.then(() => markFirst());
  return { firstCreated, finished };
}

/** One cursor walk from `?cursor=` to the page whose `next` is null. */
export interface Walk {
  ordering: 'id' | '-id';
  /** Ids of tasks committed before the walk's first request. */
  existing: number[];
  seen: number[];
  pages: number;
  /** Date.now() just before the request of the last page was sent. */
  lastPageStartedAt: number;
  reachedEnd: boolean;
}

/**
 * Walks the task list with the cursor, recording what existed at the start and what was seen;
 * with `token`, as that user (whose throttle scope may be wider than an anonymous client's).
 */
export async function walkWithCursor(
  base: string,
  db: Kysely<Database>,
  ordering: Walk['ordering'],
  pageSize: number,
  maxPages = 5_000,
  token?: string,
): Promise<Walk> {
  const existing = (await db.selectFrom('tasks').select('id').execute()).map((row) => row.id);
  const walk: Walk = { ordering, existing, seen: [], pages: 0, lastPageStartedAt: 0, reachedEnd: false };
  let path: string | null = `/api/tasks/?cursor=&ordering=${ordering}&page_size=${pageSize}`;
  while (path !== null && walk.pages < maxPages) {
    walk.lastPageStartedAt = Date.now();
    const response = await request(base, 'GET', path, { token });
    if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${response.text}`);
    walk.pages += 1;
    walk.seen.push(...(response.body.results as Array<{ id: number }>).map((task) => task.id));
    const next = response.body.next as string | null;
    path = next === null ? null : new URL(next).pathname + new URL(next).search;
  }
  walk.reachedEnd = path === null;
  return walk;
}

/**
 * What a walk promised and did not keep: order strictly monotonic in its direction (so no
 * duplicates), every task that existed at its start seen, and (ascending) every task whose 201
 * was read before the walk sent its last request.
 */
export function checkWalk(walk: Walk, created: readonly Created[]): string[] {
  const problems: string[] = [];
  const name = `walk ${walk.ordering} (${walk.pages} pages)`;
  if (!walk.reachedEnd) problems.push(`${name} did not reach the end`);
  const step = walk.ordering === 'id' ? 1 : -1;
  walk.seen.forEach((id, i) => {
    if (i > 0 && (id - walk.seen[i - 1]!) * step <= 0) problems.push(`${name}: ${walk.seen[i - 1]} then ${id}`);
  });
  const seen = new Set(walk.seen);
  const missedExisting = walk.existing.filter((id) => !seen.has(id));
  if (missedExisting.length > 0)
    problems.push(`${name} missed tasks that existed at its start: ${missedExisting.slice(0, 10)}`);
  if (walk.ordering === 'id') {
    const missedAcked = created.filter((c) => c.at < walk.lastPageStartedAt && !seen.has(c.id)).map((c) => c.id);
    if (missedAcked.length > 0)
      problems.push(`${name} missed tasks acknowledged before its last page: ${missedAcked.slice(0, 10)}`);
  }
  return problems;
}

/**
 * Polls, in one statement (one snapshot), the count and the largest id of the tasks and the
 * count and the largest position of the events, until `done()`. With ids and positions handed
 * out 1, 2, 3... and no deletes, count < max means one is visible while a smaller one is not.
 */
export async function pollIdVisibility(
  db: Kysely<Database>,
  done: () => boolean,
): Promise<{ polls: number; problems: string[] }> {
  const problems: string[] = [];
  let polls = 0;
  while (!done()) {
    const { rows } = await sql<{ tasks: number; top_id: number; events: number; top_position: number }>`select
      (select count(*) from tasks)::int as tasks, (select coalesce(max(id), 0) from tasks)::int as top_id,
      (select count(*) from events)::int as events, (select coalesce(max(position), 0) from events)::int as top_position`.execute(
      db,
    );
    const row = rows[0]!;
    polls += 1;
    if (row.tasks !== row.top_id && problems.length < 10)
      problems.push(`${row.tasks} tasks visible but id ${row.top_id} among them`);
    if (row.events !== row.top_position && problems.length < 10)
      problems.push(`${row.events} events visible but position ${row.top_position} among them`);
  }
  return { polls, problems };
}
