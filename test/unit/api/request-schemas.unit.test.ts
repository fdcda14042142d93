import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { readCredentials } from '../../../src/api/auth/credentials.input.js';
import { buildDocument } from '../../../src/api/openapi/document.js';
import { declaredOperations } from '../../../src/api/declared-operations.js';
import { parseTaskInput } from '../../../src/api/tasks/task.input.js';
import { daysBetween, parseReportInput } from '../../../src/reports/report.input.js';

// The request bodies of the API document (GET /api/schema/) against the parsers the server
// validates with (docs/architecture.md "API document"). The parsers keep DRF's leniency: numbers
// as text, "true"/1 as booleans, text trimmed. So each body is also put in its canonical form,
// and for every body of a large cross product of edge values:
//   - a body the document accepts, the parser accepts;
//   - the parser accepts a body exactly when the document accepts its canonical form (and, for
//     reports, the range rule the document states in words holds);
//   - what the parser returns is that canonical form.
// A limit, a pattern or a type changed on one side only fails here.

type Body = Record<string, unknown>;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const ABSENT = Symbol('absent');
const MAX_DAYS = 366;

const ajv = addFormats(new Ajv2020({ strict: false, allErrors: false }));
ajv.addSchema(buildDocument(declaredOperations()), 'openapi');
const schemaOf = (name: string): ValidateFunction => ajv.getSchema(`openapi#/components/schemas/${name}`)!;

/** Edge values of a text field of at most `max` characters (or none). */
function textValues(max = 300): unknown[] {
  return [
    ...['', ' ', ' \t\n', '\u00a0', '\ufeff', 'a', ' a ', 'Ünïcödé', 'a\u0000b', '\u0000', ' \u0000 '],
    ...[
      'x'.repeat(max),
      'x'.repeat(max + 1),
      ` ${'x'.repeat(max)} `,
      '\u{1F600}'.repeat(max),
      '\u{1F600}'.repeat(max + 1),
    ],
    ...[7, 0, 1.5, -1, true, false, null, [], {}, ['a'], 'true', '1', 'off'],
  ];
}
const BOOLEANS: unknown[] = [
  true,
  false,
  'true',
  'True',
  'TRUE',
  '1',
  1,
  0,
  'yes',
  'on',
  'no',
  'off',
  'false',
  '0',
  'maybe',
  2,
  null,
  [],
  '',
  ' true',
];
const DATES: unknown[] = [
  ...['2026-11-01', '2026-11-30', '2024-02-29', '2026-02-29', '2026-02-30', '0000-01-01', '0001-01-01', '9999-12-31'],
  ...[' 2026-11-01 ', '2026-11-1', '2026-13-01', '20261101', 20261101, null, '', '2026-11-01T00:00:00Z'],
];
const NOT_OBJECTS: unknown[] = [null, [], 'title', 7, true];

/** Every body made of one value per field (ABSENT leaves the field out). */
function* bodies(fields: Record<string, unknown[]>): Generator<Body> {
  const names = Object.keys(fields);
  const at = names.map(() => 0);
  const choices = names.map((name) => [ABSENT, ...fields[name]!]);
  for (;;) {
    const body: Body = {};
    names.forEach((name, i) => {
      const value = choices[i]![at[i]!];
      if (value !== ABSENT) body[name] = value;
    });
    yield body;
    let i = 0;
    while (i < names.length && ++at[i]! === choices[i]!.length) at[i++] = 0;
    if (i === names.length) return;
  }
}

const canonicalText = (value: unknown, trim = true): unknown =>
  typeof value === 'number' ? String(value) : typeof value === 'string' && trim ? value.trim() : value;
const TRUE = new Set<unknown>([true, 'true', 'True', 'TRUE', '1', 1, 'yes', 'on']);
const FALSE = new Set<unknown>([false, 'false', 'False', 'FALSE', '0', 0, 'no', 'off']);
const canonicalBoolean = (value: unknown): unknown => (TRUE.has(value) ? true : FALSE.has(value) ? false : value);

/** The body with each present field put through `canonical[field]`. */
function canonicalize(body: Body, canonical: Record<string, (value: unknown) => unknown>): Body {
  return Object.fromEntries(Object.entries(body).map(([name, value]) => [name, canonical[name]!(value)]));
}

function accepts<T>(parse: () => T): { ok: true; value: T } | { ok: false } {
  try {
    return { ok: true, value: parse() };
  } catch {
    return { ok: false };
  }
}

const schemas = suite('the request bodies of the API document, against the parsers');

schemas('tasks: TaskInput (POST, PUT) and TaskPatch (PATCH) describe parseTaskInput', () => {
  const canonical = { title: canonicalText, description: canonicalText, completed: canonicalBoolean };
  let compared = 0;
  let accepted = 0;
  for (const [partial, name] of [
    [false, 'TaskInput'],
    [true, 'TaskPatch'],
  ] as const) {
    const validate = schemaOf(name);
    for (const body of bodies({ title: textValues(200), description: textValues(10_000), completed: BOOLEANS })) {
      const parsed = accepts(() => parseTaskInput(body, partial));
      const canon = canonicalize(body, canonical);
      const label = `${name} ${JSON.stringify(body).slice(0, 120)}`;
      if (validate(body)) assert.ok(parsed.ok, `the document accepts what the parser refuses: ${label}`);
      assert.is(
        parsed.ok,
        validate(canon),
        `the parser ${parsed.ok ? 'accepts' : 'refuses'} a body whose canonical form the document ${parsed.ok ? 'refuses' : 'accepts'}: ${label}`,
      );
      if (parsed.ok) {
        const defaults = partial ? {} : { description: '', completed: false };
        assert.equal(parsed.value, { ...defaults, ...canon }, label);
        accepted++;
      }
      compared++;
    }
    for (const body of NOT_OBJECTS) assert.is(validate(body), accepts(() => parseTaskInput(body, partial)).ok);
  }
  assert.ok(
    accepted > 1_000 && compared - accepted > 1_000,
    `both sides exercised: ${accepted} of ${compared} accepted`,
  );
});

schemas('reports: ReportInput describes parseReportInput, with the range rule its description states', () => {
  const validate = schemaOf('ReportInput');
  assert.match(JSON.stringify(validate.schema), 'not before `from`, at most REPORT_MAX_DAYS days');
  // Dates are trimmed; the owner is text like a task's title (a number is taken as its text).
  const trimmed = (value: unknown) => (typeof value === 'string' ? value.trim() : value);
  const canonical = { from: trimmed, to: trimmed, owner: canonicalText };
  let accepted = 0;
  for (const body of bodies({ from: DATES, to: DATES, owner: textValues(150) })) {
    const parsed = accepts(() => parseReportInput(body, MAX_DAYS));
    const canon = canonicalize(body, canonical);
    const inRange = (b: Body) => {
      const days = typeof b.from === 'string' && typeof b.to === 'string' ? daysBetween(b.from, b.to) + 1 : NaN;
      return days >= 1 && days <= MAX_DAYS;
    };
    const label = JSON.stringify(body).slice(0, 160);
    if (validate(body) && inRange(body)) assert.ok(parsed.ok, `the document accepts what the parser refuses: ${label}`);
    assert.is(parsed.ok, validate(canon) && inRange(canon), label);
    if (parsed.ok) {
      assert.equal(parsed.value, { ...canon, owner: canon.owner ?? null }, label);
      accepted++;
    }
  }
  assert.ok(accepted > 100, `reports accepted: ${accepted}`);
  for (const body of NOT_OBJECTS) assert.is(validate(body), accepts(() => parseReportInput(body, MAX_DAYS)).ok);
});

schemas('logins: Credentials describes readCredentials (the username trimmed, the password as sent)', () => {
  const validate = schemaOf('Credentials');
  const canonical = { username: canonicalText, password: (value: unknown) => canonicalText(value, false) };
  let accepted = 0;
  for (const body of bodies({ username: textValues(), password: textValues() })) {
    const read = readCredentials(body);
    const ok = read.errors === undefined;
    const canon = canonicalize(body, canonical);
    const label = JSON.stringify(body).slice(0, 160);
    if (validate(body)) assert.ok(ok, `the document accepts what the parser refuses: ${label}`);
    assert.is(ok, validate(canon), label);
    if (ok) {
      assert.equal({ username: read.username, password: read.password }, canon, label);
      accepted++;
    }
  }
  assert.ok(accepted > 100, `logins accepted: ${accepted}`);
});

schemas.run();
