import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { FirstRequest } from '../../../src/cluster/first-request.js';

// docs/throttling.md "Past capacity: admission and shedding": the primary's door reads a connection's first
// request until it has arrived whole, however the network cut it into chunks.

const test = suite('the door reads a first request whole');

/** Feeds `text` cut at `cuts`; returns the state after each piece and the bytes at the end. */
function feed(text: string, cuts: number[], limit = 1_000) {
  const request = new FirstRequest(limit);
  const states: string[] = [];
  let from = 0;
  for (const cut of [...cuts, text.length]) {
    states.push(request.add(Buffer.from(text.slice(from, cut), 'latin1')));
    from = cut;
  }
  return { states, bytes: request.bytes().toString('latin1'), request };
}

const GET = 'GET /api/tasks/ HTTP/1.1\r\nHost: a\r\n\r\n';
const POST = 'POST /api/tasks/ HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n{"title":1}';

test('a head cut anywhere, even inside its blank line, is whole only at its end', () => {
  for (let cut = 1; cut < GET.length; cut += 1) {
    const { states, bytes } = feed(GET, [cut]);
    assert.equal(states, ['head', 'whole'], `cut at ${cut}`);
    assert.is(bytes, GET);
  }
});

test('a body by Content-Length is whole when all of it came, cut anywhere', () => {
  for (let cut = 1; cut < POST.length; cut += 1) {
    const { states, bytes } = feed(POST, [cut]);
    assert.is(states.at(-1), 'whole', `cut at ${cut}`);
    assert.not.ok(states.slice(0, -1).includes('whole'), `not before its end, cut at ${cut}`);
    assert.is(bytes, POST);
  }
});

test('a chunked body is whole at its last chunk, its end cut anywhere', () => {
  const text = 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n';
  for (let cut = text.indexOf('hello'); cut < text.length; cut += 1) {
    const { states } = feed(text, [cut]);
    assert.is(states.at(-1), 'whole', `cut at ${cut}`);
    assert.not.ok(states.slice(0, -1).includes('whole'), `cut at ${cut}`);
  }
});

test('a body over the limit, by its Content-Length, is handed over at once (the worker answers 413)', () => {
  const { states } = feed('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n{"a', [], 1_000);
  assert.equal(states, ['whole']);
});

test('Expect: 100-continue is handed over with its head: the client sends nothing before its worker answers', () => {
  const head = 'POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n';
  const { states, bytes } = feed(head, [20]);
  assert.equal(states, ['head', 'whole']);
  assert.is(bytes, head);
});

test.run();
