import type { CheckResult, RunContext } from '../context.js';
import type { Tasks } from './tasks.js';

const ROUNDS = 3;
/** Concurrent sends of one create; one more follows once they are answered. */
const RETRIES = 3;

/**
 * Idempotency under retries (docs/verify.md "Idempotency"): concurrent POSTs of one create with one
 * `Idempotency-Key`, each on its own connection, and one more after they are answered, make one task.
 */
export async function checkIdempotency(ctx: RunContext, tasks: Tasks): Promise<CheckResult> {
  const began = Date.now();
  const client = ctx.client('idempotency', { token: tasks.token });
  const rounds: Record<string, unknown>[] = [];
  const made: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const title = ctx.title(`idempotent ${round}`);
    const headers = { 'Idempotency-Key': `${ctx.runId}-${round}` };
    const send = () =>
      client.sendPolitely({
        method: 'POST',
        path: 'api/tasks/',
        body: { title },
        headers,
        fresh: true,
        f: 'create once',
      });
    const answers = await Promise.all(Array.from({ length: RETRIES }, send));
    answers.push(await send());
    const ids = new Set(
      answers.filter((a) => a.status === 201 || a.status === 200).map((a) => (a.body as { id: number }).id),
    );
    const listed = await tasksTitled(client, title);
    made.push(...ids, ...listed);
    rounds.push({ round, statuses: answers.map((a) => a.status), answeredIds: [...ids], tasksWithTitle: listed });
  }
  await tasks.cleanUp(made);
  const base = {
    name: 'idempotency' as const,
    evidence: { rounds },
    requests: ctx.history.countFor('idempotency'),
    seconds: (Date.now() - began) / 1000,
  };
  const bad = rounds.filter(
    (r) => (r.answeredIds as number[]).length > 1 || (r.tasksWithTitle as number[]).length !== 1,
  );
  if (bad.length > 0)
    return {
      ...base,
      verdict: 'violated',
      summary: `${bad.length} of ${ROUNDS} retried creates did not make exactly one task`,
    };
  return {
    ...base,
    verdict: 'holds',
    summary: `${ROUNDS} creates retried ${RETRIES + 1} times each made exactly one task`,
  };
}

/** The ids of the newest tasks with this title (the run's tasks are among the newest). */
async function tasksTitled(client: ReturnType<RunContext['client']>, title: string): Promise<number[]> {
  const page = await client.sendPolitely({ path: 'api/tasks/?cursor=&ordering=-id&page_size=100', f: 'find created' });
  const results = (page.body as { results?: { id: number; title: string }[] } | undefined)?.results ?? [];
  return results.filter((task) => task.title === title).map((task) => task.id);
}
