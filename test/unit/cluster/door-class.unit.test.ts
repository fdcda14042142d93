import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { classOf } from '../../../src/cluster/door.js';

// docs/throttling.md "Past capacity: admission and shedding": the door admits new connections by the class their
// first request's head tells, as the workers classify requests by their route.

const test = suite("a new connection's class at the door");

const head = (line: string, ...fields: string[]) =>
  Buffer.from(`${line} HTTP/1.1\r\nHost: a\r\n${fields.map((f) => `${f}\r\n`).join('')}\r\n`, 'latin1');

test('probes are never shed; docs first, then anonymous, authenticated reads, authenticated writes last', () => {
  assert.is(classOf(head('GET /readyz')), 'health');
  assert.is(classOf(head('OPTIONS /healthz')), 'health');
  assert.is(classOf(head('GET /api/schema/', 'Authorization: Bearer x')), 0);
  assert.is(classOf(head('GET /api/docs/redoc.js')), 0);
  assert.is(classOf(head('GET /api/tasks/?page=2')), 1);
  assert.is(classOf(head('POST /api/auth/token/', 'Content-Length: 2')), 1);
  assert.is(classOf(head('GET /api/tasks/', 'authorization: Bearer x')), 2);
  assert.is(classOf(head('HEAD /api/events/', 'Authorization: Token x')), 2);
  assert.is(classOf(head('POST /api/tasks/', 'Authorization: Bearer x', 'Content-Length: 2')), 3);
  assert.is(classOf(head('DELETE /api/tasks/7/', 'Authorization: Bearer x')), 3);
});

test('an Authorization in the body, not the head, makes no authenticated request', () => {
  const text = 'POST /api/tasks/ HTTP/1.1\r\nHost: a\r\nContent-Length: 24\r\n\r\n\r\nAuthorization: Bearer x';
  assert.is(classOf(Buffer.from(text, 'latin1')), 1);
});

test.run();
