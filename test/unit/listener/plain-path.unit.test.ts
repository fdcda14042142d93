import { createRequire } from 'node:module';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { plainPath } from '../../../src/listener/classify.js';

// plainPath (src/listener/classify.ts) copies the fast path of parseurl, which Koa reads `ctx.path` with, so
// that the early refusal finds the route Koa would. Here the copy is held to the original: the parseurl that
// Koa itself resolves, fed the same request targets.

const fromKoa = createRequire(createRequire(import.meta.url).resolve('koa'));
const parseurl = fromKoa('parseurl') as (req: { url?: string }) => { pathname: string | null } | undefined;

/** The path Koa routes `url` by. */
const koaPath = (url: string | undefined) => parseurl({ url })?.pathname;

const Copy = suite('the early refusal reads a request path as Koa does');

Copy('plain targets, with a query, //, %-escapes or unicode: the same path as parseurl', () => {
  for (const url of [
    '/',
    '/api/tasks/',
    '/api/tasks/?page=2',
    '/api/tasks/?',
    '/api/tasks/?a=1?b=2',
    '/api/tasks?cursor=x/y',
    '//api/tasks/',
    '//evil.example/api/tasks/',
    '/api/%74asks/',
    '/api/tasks/1%2F/',
    '/api/tasks/%zz/',
    '/api/tâches/?q=é',
    '/api/\u3000/',
    '/api/\u2028/',
    '/api\\tasks/',
    '/api/\u000b/',
  ]) {
    const path = plainPath(url);
    assert.type(path, 'string', JSON.stringify(url));
    assert.is(path, koaPath(url), JSON.stringify(url));
  }
});

Copy('targets parseurl reads with Node URL parser are left to the app, where the path can differ', () => {
  const naive = (url: string) => url.split('?')[0];
  // Their paths differ from the fast path's reading: a fragment is cut, spaces and controls are escaped.
  for (const url of ['/api/tasks/#top', '/api/tasks/#?q', '/api/ tasks/', '/api/\ttasks/', '/api/\ntasks/', '/a\rb']) {
    assert.is(plainPath(url), undefined, JSON.stringify(url));
    assert.is.not(koaPath(url), naive(url), JSON.stringify(url));
  }
  // Read the slow way though the path comes out the same: refused too (the app answers them, only later).
  for (const url of ['/api/tasks/?q#f', '/api/\ftasks/', '/api/\u00a0/', '/api/\ufeff/']) {
    assert.is(plainPath(url), undefined, JSON.stringify(url));
  }
});

Copy('targets that are not a plain path are left to the app: absolute form, *, empty, a bare query', () => {
  for (const url of ['http://localhost/api/tasks/', 'HTTP://h/x', '*', '', '?page=2', undefined]) {
    assert.is(plainPath(url), undefined, JSON.stringify(url));
  }
  assert.is(koaPath('http://localhost/api/tasks/'), '/api/tasks/', 'Koa routes an absolute target by its path');
});

Copy('every character in a path, one at a time: where plainPath reads a path, it is parseurl’s', () => {
  let read = 0;
  const characters = [...Array(0x100).keys(), 0x2028, 0x3000, 0xfeff, 0xfffd, 0x1f600].map((c) =>
    String.fromCodePoint(c),
  );
  for (const c of characters) {
    for (const url of [`/a${c}b/`, `/a/?q=${c}`, `/${c}`]) {
      const path = plainPath(url);
      if (path === undefined) continue;
      assert.is(path, koaPath(url), JSON.stringify(url));
      read += 1;
    }
  }
  assert.ok(read > 700, `${read} targets read`);
});

Copy.run();
