import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { buildLink, removeQueryParam, replaceQueryParam } from '../../../src/pagination/links.js';
import { parsePythonInt } from '../../../src/pagination/python-int.js';
import {
  encodeQuery,
  parseQuery,
  quotePlus,
  readLastValue,
  unquotePlus,
} from '../../../src/pagination/query-string.js';

const B = 'http://127.0.0.1:18000';
const url = (search: string) => new URL(`${B}/api/tasks/${search}`);

const Links = suite('links are rebuilt the way DRF rebuilds them');

Links('replacing a key sorts the keys and keeps repeated values in their order', () => {
  assert.is(
    replaceQueryParam(url('?zeta=1&page=2&alpha=y&alpha=x'), 'page', 3),
    `${B}/api/tasks/?alpha=y&alpha=x&page=3&zeta=1`,
  );
});

Links('removing the only key leaves no question mark', () => {
  assert.is(removeQueryParam(url('?page=2'), 'page'), `${B}/api/tasks/`);
  assert.is(removeQueryParam(url('?zeta=1&page=2&alpha=y&alpha=x'), 'page'), `${B}/api/tasks/?alpha=y&alpha=x&zeta=1`);
  assert.is(removeQueryParam(url('?foo=bar'), 'page'), `${B}/api/tasks/?foo=bar`);
});

Links('replacing a repeated key leaves one value', () => {
  assert.is(replaceQueryParam(url('?page=1&page=2'), 'page', 3), `${B}/api/tasks/?page=3`);
});

Links('blank values and keys without "=" are kept as blank values', () => {
  assert.is(replaceQueryParam(url('?b=&a&page=1'), 'page', 2), `${B}/api/tasks/?a=&b=&page=2`);
});

Links('values are re-encoded with quote_plus', () => {
  assert.is(
    replaceQueryParam(url('?q=a%20b+c&s=x/y*z~_.-'), 'page', 2),
    `${B}/api/tasks/?page=2&q=a+b+c&s=x%2Fy%2Az~_.-`,
  );
  assert.is(
    replaceQueryParam(url('?q=caf%C3%A9&r=%E2%9C%93'), 'page', 2),
    `${B}/api/tasks/?page=2&q=caf%C3%A9&r=%E2%9C%93`,
  );
  assert.is(replaceQueryParam(url('?q=100%25'), 'page', 2), `${B}/api/tasks/?page=2&q=100%25`);
});

Links('a broken escape stays literal and bad UTF-8 becomes U+FFFD, as in Python', () => {
  assert.is(replaceQueryParam(url('?q=%zz&r=%C3'), 'page', 2), `${B}/api/tasks/?page=2&q=%25zz&r=%EF%BF%BD`);
});

Links('scheme, host and port come from the URL; the fragment is not kept', () => {
  assert.is(
    replaceQueryParam(new URL('https://example.com:8080/api/tasks/?page=2#x'), 'page', 3),
    'https://example.com:8080/api/tasks/?page=3',
  );
});

Links('buildLink applies several edits at once', () => {
  assert.is(
    buildLink(url('?offset=5&foo=bar&limit=1000'), { limit: 100, offset: null }),
    `${B}/api/tasks/?foo=bar&limit=100`,
  );
});

const Query = suite('query strings are read like Python reads them');

Query('parse_qs with blank values: "+" is a space, empty fields are skipped, only "&" separates', () => {
  const query = parseQuery('?a=1&&a=2&b&c=x+y;d=1&=v');
  assert.equal(
    [...query.entries()],
    [
      ['a', ['1', '2']],
      ['b', ['']],
      ['c', ['x y;d=1']],
      ['', ['v']],
    ],
  );
  assert.is(readLastValue(query, 'a'), '2');
  assert.is(readLastValue(query, 'z'), undefined);
});

Query('keys are sorted by code point', () => {
  const query = new Map([
    ['\u{1F600}', ['1']],
    ['\uFF21', ['2']],
    ['B', ['3']],
    ['a', ['4']],
  ]);
  assert.is(encodeQuery(query), 'B=3&a=4&%EF%BC%A1=2&%F0%9F%98%80=1');
});

Query('quote_plus and unquote round-trip', () => {
  assert.is(quotePlus("a b!'()*é"), 'a+b%21%27%28%29%2A%C3%A9');
  assert.is(unquotePlus('a+b%21%27%28%29%2A%C3%A9'), "a b!'()*é");
  assert.is(unquotePlus('%2B2'), '+2');
});

const Ints = suite("integers are parsed like Python's int()");

Ints('accepts what int() accepts', () => {
  const cases: Array<[string, bigint]> = [
    ['2', 2n],
    ['02', 2n],
    ['+2', 2n],
    [' 2', 2n],
    ['2\t\n', 2n],
    ['-1', -1n],
    ['1_0', 10n],
    ['\u00a0 7 \u3000', 7n],
    ['\u0662', 2n],
    ['\u{1D7DC}', 4n],
    ['99999999999999999999', 99999999999999999999n],
  ];
  for (const [text, value] of cases) assert.is(parsePythonInt(text), value, JSON.stringify(text));
});

Ints('refuses what int() refuses', () => {
  for (const text of [
    '',
    ' ',
    'abc',
    '1.0',
    '1e3',
    '0x10',
    '_1',
    '1_',
    '1__0',
    '+-1',
    '1 2',
    '١.0',
    '9'.repeat(4301),
  ]) {
    assert.is(parsePythonInt(text), null, JSON.stringify(text.slice(0, 20)));
  }
});

Links.run();
Query.run();
Ints.run();
