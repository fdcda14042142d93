import type { CheckResult, RunContext } from '../context.js';
import type { Tasks } from './tasks.js';

/** Seven requests a round: a create, an update and a delete, each read back on a new connection. */
const ROUNDS = 3;

/**
 * Read your writes across the balancer (docs/verify.md "Read your writes"): after each acknowledged create,
 * update and delete, a read on a new connection (which a balancer may send to any host) must show it.
 */
export async function checkReadYourWrites(ctx: RunContext, tasks: Tasks): Promise<CheckResult> {
  const began = Date.now();
  const reader = ctx.client('ryw-reader', { token: tasks.token });
  const stale: Record<string, unknown>[] = [];
  const writer = ctx.client('ryw-writer', { token: tasks.token });
  const fresh = (path: string, f: string) => reader.sendPolitely({ path, fresh: true, f });
  for (let round = 0; round < ROUNDS; round++) {
    const id = await tasks.create(`ryw ${round}`);
    if (id === undefined) continue;
    const title = tasks.titles.get(id)!;
    const read = await fresh(`api/tasks/${id}/`, 'read after create');
    if (read.status !== 200 || (read.body as { title?: string }).title !== title)
      stale.push({ round, after: 'create', id, read: read.op, status: read.status });
    const list = await fresh('api/tasks/?cursor=&ordering=-id&page_size=50', 'list after create');
    const ids = ((list.body as { results?: { id: number }[] } | undefined)?.results ?? []).map((t) => t.id);
    if (!ids.includes(id)) stale.push({ round, after: 'create (list)', id, read: list.op, status: list.status });
    const renamed = `${title} renamed`;
    const patch = await writer.sendPolitely({
      method: 'PATCH',
      path: `api/tasks/${id}/`,
      body: { title: renamed },
      f: 'update',
    });
    if (patch.status === 200) {
      const after = await fresh(`api/tasks/${id}/`, 'read after update');
      if ((after.body as { title?: string } | undefined)?.title !== renamed)
        stale.push({ round, after: 'update', id, read: after.op, status: after.status });
    }
    if (await tasks.deleteOne(id)) {
      const gone = await fresh(`api/tasks/${id}/`, 'read after delete');
      if (gone.status !== 404) stale.push({ round, after: 'delete', id, read: gone.op, status: gone.status });
    }
  }
  const base = { name: 'ryw' as const, requests: ctx.history.countFor('ryw'), seconds: (Date.now() - began) / 1000 };
  if (stale.length > 0) {
    return {
      ...base,
      verdict: 'violated',
      summary: `${stale.length} reads on new connections missed an acknowledged write`,
      evidence: { stale },
    };
  }
  return {
    ...base,
    verdict: 'holds',
    summary: `${ROUNDS} creates, updates and deletes were each seen by the next read on a new connection`,
    evidence: { rounds: ROUNDS },
  };
}
