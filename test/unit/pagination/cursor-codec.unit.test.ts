import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { decodeCursor, encodeCursor, type CursorBinding } from '../../../src/pagination/cursor-codec.js';
import { paginate } from '../../../src/pagination/paginate.js';
import type { Ordering, PageSource } from '../../../src/pagination/types.js';

type Task = { id: number; title: string };
const SECRET = 'test-secret';
const settings = { pageSize: 10, maxPageSize: 100, cursorSecret: SECRET };
const ascending: CursorBinding = { list: '/api/tasks/', ordering: 'asc', orderingParam: 'id' };
const descending: CursorBinding = { list: '/api/tasks/', ordering: 'desc', orderingParam: '-id' };
const INVALID = { ok: false, status: 404, detail: 'Invalid cursor' };

const tasks: Task[] = Array.from({ length: 25 }, (_, index) => ({ id: index + 1, title: `Task ${index + 1}` }));
const source: PageSource<Task> = {
  page: () => Promise.reject(new Error('cursor pagination must not count')),
  async seek(key, limit, ordering) {
    const sorted = ordering === 'asc' ? tasks : [...tasks].reverse();
    return sorted
      .filter((task) => key === null || (ordering === 'asc' ? task.id > key : task.id < key))
      .slice(0, limit);
  },
  keyOf: (task) => task.id,
};

function open(token: string, ordering: Ordering = 'asc', orderingParam = ordering === 'asc' ? 'id' : '-id') {
  const url = new URL(`http://127.0.0.1:18000/api/tasks/?cursor=${encodeURIComponent(token)}`);
  return paginate(source, { url, ordering, orderingParam }, settings);
}

const Codec = suite('cursor tokens round-trip and are opaque and URL-safe');

Codec('key, direction and binding survive encoding', () => {
  for (const key of [0, 1, 10, -7, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]) {
    for (const direction of ['forward', 'backward'] as const) {
      for (const binding of [
        ascending,
        descending,
        { list: '/api/tasks/7/events/', ordering: 'asc', orderingParam: '' } as const,
        { list: '', ordering: 'desc', orderingParam: 'créé' } as const,
      ]) {
        const token = encodeCursor({ key, direction }, binding, SECRET);
        assert.match(token, /^[A-Za-z0-9_-]+$/);
        assert.equal(decodeCursor(token, binding, SECRET), { key, direction });
      }
    }
  }
});

Codec('the same position gives the same token; any difference gives another', () => {
  const token = encodeCursor({ key: 10, direction: 'forward' }, ascending, SECRET);
  assert.is(encodeCursor({ key: 10, direction: 'forward' }, ascending, SECRET), token);
  assert.is.not(encodeCursor({ key: 10, direction: 'backward' }, ascending, SECRET), token);
  assert.is.not(encodeCursor({ key: 11, direction: 'forward' }, ascending, SECRET), token);
  assert.is.not(encodeCursor({ key: 10, direction: 'forward' }, ascending, 'other-secret'), token);
});

Codec('a valid token opens the page it points at', async () => {
  const outcome = await open(encodeCursor({ key: 10, direction: 'forward' }, ascending, SECRET));
  assert.ok(outcome.ok);
  assert.equal(
    outcome.body.results.map((task) => task.id),
    [11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
  );
});

const Tampering = suite('tampered or foreign cursors are 404 Invalid cursor');

Tampering('flipping any bit of any byte', async () => {
  const bytes = Buffer.from(encodeCursor({ key: 10, direction: 'forward' }, ascending, SECRET), 'base64url');
  for (let index = 0; index < bytes.length; index += 1) {
    for (const bit of [0x01, 0x80]) {
      const flipped = Buffer.from(bytes);
      flipped[index] = (flipped[index] ?? 0) ^ bit;
      assert.equal(await open(flipped.toString('base64url')), INVALID, `byte ${index} bit ${bit}`);
    }
  }
});

Tampering('changing the key or the direction and keeping the old signature', async () => {
  const bytes = Buffer.from(encodeCursor({ key: 10, direction: 'forward' }, ascending, SECRET), 'base64url');
  const moved = Buffer.from(bytes);
  moved.writeBigInt64BE(20n, 2);
  assert.equal(await open(moved.toString('base64url')), INVALID);
  const turned = Buffer.from(bytes);
  turned.writeUInt8(1, 1);
  assert.equal(await open(turned.toString('base64url')), INVALID);
});

Tampering('a cursor made for -id used with id, or for another ordering', async () => {
  const forDescending = encodeCursor({ key: 10, direction: 'forward' }, descending, SECRET);
  assert.ok((await open(forDescending, 'desc')).ok);
  assert.equal(await open(forDescending, 'asc', 'id'), INVALID);
  assert.equal(await open(forDescending, 'asc', '-id'), INVALID);
  assert.equal(await open(forDescending, 'desc', 'id'), INVALID);
  const unnamed = encodeCursor(
    { key: 10, direction: 'forward' },
    { list: '/api/tasks/', ordering: 'asc', orderingParam: '' },
    SECRET,
  );
  assert.equal(await open(unnamed, 'desc', ''), INVALID);
});

Tampering(
  "a cursor made for another list: another task's history, or the task list with its path spelled otherwise",
  async () => {
    for (const list of ['/api/tasks/3/events/', '/api/tasks', '/api/events/']) {
      assert.equal(
        await open(encodeCursor({ key: 10, direction: 'forward' }, { ...ascending, list }, SECRET)),
        INVALID,
        list,
      );
    }
  },
);

Tampering('truncated, padded, non-canonical, foreign-secret and oversized tokens', async () => {
  const token = encodeCursor({ key: 10, direction: 'forward' }, ascending, SECRET);
  const lastChar = token.slice(-1);
  const sibling = token.slice(0, -1) + (lastChar === 'A' ? 'B' : 'A');
  const candidates = [
    token.slice(0, -1),
    token.slice(0, -4),
    token.slice(0, 8),
    `${token}=`,
    `${token}A`,
    sibling,
    Buffer.from(token, 'base64url').toString('base64'),
    encodeCursor({ key: 10, direction: 'forward' }, ascending, 'other-secret'),
    encodeCursor(
      { key: 10, direction: 'forward' },
      { list: '/api/tasks/', ordering: 'asc', orderingParam: 'id'.repeat(400) },
      SECRET,
    ),
    'garbage',
    'cD0xMA',
  ];
  for (const candidate of candidates) assert.equal(await open(candidate), INVALID, candidate);
});

Tampering(
  'a version 1 cursor (made before cursors were bound to their list) still opens its page; version 2 is what is made',
  async () => {
    const { createHmac } = await import('node:crypto');
    const payload = Buffer.alloc(10 + 2);
    payload.writeUInt8(1, 0);
    payload.writeBigInt64BE(10n, 2);
    payload.write('id', 10);
    const mac = createHmac('sha256', SECRET).update(payload).digest().subarray(0, 16);
    const outcome = await open(Buffer.concat([payload, mac]).toString('base64url'));
    assert.ok(outcome.ok);
    assert.equal(outcome.body.results.map((task) => task.id).slice(0, 2), [11, 12]);
    assert.is(Buffer.from(encodeCursor({ key: 10, direction: 'forward' }, ascending, SECRET), 'base64url')[0], 2);
  },
);

Codec.run();
Tampering.run();
