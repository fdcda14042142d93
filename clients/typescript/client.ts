/**
 * A typed client of the Paceline API (docs/api.md "For integrators"): openapi-fetch over the types
 * `npm run client` generates from the API document. Every path, parameter and body is checked by
 * the compiler; answers are typed by status.
 *
 *   const api = createPacelineClient('http://localhost:8000', token);
 *   const { data, error } = await api.POST('/api/tasks/', { body: { title: 'Write the docs' } });
 *   for await (const task of allTasks(api)) console.log(task.id, task.title);
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type { components, paths };
export type Task = components['schemas']['Task'];
export type PacelineClient = Client<paths>;

/** A client for the server at `baseUrl`, sending `token` (from POST /api/auth/token/) when given. */
export function createPacelineClient(baseUrl: string, token?: string, fetch?: typeof globalThis.fetch): PacelineClient {
  return createClient<paths>({
    baseUrl,
    headers: token ? { Authorization: `Bearer ${token}` } : {},
    ...(fetch ? { fetch } : {}),
  });
}

/**
 * Every task, oldest first, by cursor pages of `pageSize` following each `next` link: a walk
 * that sees every task that existed when it started exactly once, whatever is written meanwhile
 * (docs/pagination.md "Guarantees under concurrent writes"). Throws on an error answer, with its status.
 */
export async function* allTasks(client: PacelineClient, pageSize = 100): AsyncGenerator<Task> {
  let cursor = '';
  for (;;) {
    const { data, error, response } = await client.GET('/api/tasks/', {
      params: { query: { cursor, page_size: pageSize } },
    });
    if (!data) throw new Error(`GET /api/tasks/ answered ${response.status}: ${JSON.stringify(error)}`);
    yield* data.results;
    if (!data.next) return;
    cursor = new URL(data.next).searchParams.get('cursor') ?? '';
  }
}
