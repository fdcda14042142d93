import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { allTasks, createPacelineClient, type Task } from '../../../clients/typescript/client.js';
import { declaredOperations } from '../../../src/api/declared-operations.js';
import { buildDocument } from '../../../src/api/openapi/document.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

// The typed client of docs/api.md "For integrators": types generated from the API document
// (`npm run client`), checked in, and an openapi-fetch client over them, against the running server.

let app: TestApp;

const Client = suite('the typed client: generated types and an openapi-fetch client');

Client.before(async () => {
  app = await startTestApp({}, 'typed-client');
});
Client.after(() => app.close());

// That the checked-in types are those of the code's own document is a lint check (ops/lint/documents.ts);
// what the server serves must be that document, bar the origin it names as its server.
Client('the live document is the one `npm run client` generates the types from, the server aside', async () => {
  const live = await request(app.base, 'GET', '/api/schema/');
  assert.is(live.status, 200);
  const { servers: _, ...served } = live.body as Record<string, unknown>;
  const { servers: __, ...built } = buildDocument(declaredOperations());
  assert.equal(served, JSON.parse(JSON.stringify(built)), "the served document is the code's own");
});

Client('pages through every task with cursor links, each exactly once, while tasks are written', async () => {
  const alice = createPacelineClient(app.base, await app.login('alice'));
  const bob = createPacelineClient(app.base, await app.login('bob'));
  const before = new Map<number, string>();
  for (let i = 0; i < 46; i += 1) {
    const { data, response } = await (i % 2 ? bob : alice).POST('/api/tasks/', {
      body: { title: `Task ${i}`, completed: i % 5 === 0 },
    });
    assert.is(response.status, 201);
    before.set(data!.id, data!.title);
  }
  // A wrong field is a compile error, and the server refuses the body it would have sent.
  // @ts-expect-error `titel` is not a field of TaskInput
  const misspelt = await alice.POST('/api/tasks/', { body: { titel: 'typo' } });
  assert.is(misspelt.response.status, 400);
  assert.equal(misspelt.error, { title: ['This field is required.'] });

  const seen: Task[] = [];
  const anonymous = createPacelineClient(app.base);
  for await (const task of allTasks(anonymous, 7)) {
    seen.push(task);
    // a write between pages: tasks created during the walk come after it, and none twice
    if (seen.length % 7 === 0 && seen.length < 30)
      await bob.POST('/api/tasks/', { body: { title: `During ${seen.length}` } });
  }
  const ids = seen.map((task) => task.id);
  assert.is(new Set(ids).size, ids.length, 'no task twice');
  assert.equal(
    ids.filter((id) => before.has(id)),
    [...before.keys()].sort((a, b) => a - b),
  );
  for (const task of seen.filter((t) => before.has(t.id))) assert.is(task.title, before.get(task.id));
  assert.is(seen.length, before.size + 4, 'and the four written meanwhile, after them');
  assert.ok(seen.every((task) => typeof task.completed === 'boolean' && ['alice', 'bob'].includes(task.owner)));
});

Client.run();
