import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { planMigrateDown, type MigrationState } from '../../../db/migration-admin.js';
import { parseHeader, parseTrailer, rowLine, tableOfLine } from '../../../src/backup/backup-format.js';

const Format = suite('a backup file’s lines');

Format('a row line names its table, and only a row line does', () => {
  const line = rowLine('events', '{"position":1}');
  assert.is(line, '{"table":"events","row":{"position":1}}\n');
  assert.is(tableOfLine(line.trimEnd()), 'events');
  assert.is(tableOfLine('{"trailer":{}}'), undefined);
  assert.is(tableOfLine('{"table":"Users; drop","row":{}}'), undefined);
});

Format('a header is refused with the reason a person can act on', () => {
  assert.is(parseHeader(undefined), 'it is not a Paceline backup (no header line)');
  assert.is(parseHeader('{"format":"other"}'), 'it is not a Paceline backup (no header line)');
  assert.is(
    parseHeader('{"format":"paceline-backup","version":2}'),
    'it is a Paceline backup of format 2, which this release does not read',
  );
  assert.is(parseHeader('{"format":"paceline-backup","version":1,"position":"x"}'), 'its header is damaged');
  const header = {
    format: 'paceline-backup',
    version: 1,
    position: 3,
    taken_at: '2026-11-25T00:00:00.000Z',
    migrations: ['a'],
    tables: { events: ['position'] },
    sequences: {},
    rows: { events: 3 },
  };
  assert.equal(parseHeader(JSON.stringify(header)), header);
});

Format('a trailer is read only from a whole trailer line', () => {
  const trailer = { rows: { events: 1 }, lines: 2, sha256: 'ab' };
  assert.equal(parseTrailer(JSON.stringify({ trailer })), trailer);
  assert.is(parseTrailer('{"trailer":{"rows":{},"lines":2'), undefined);
  assert.is(parseTrailer('{"table":"events","row":{}}'), undefined);
});

const Down = suite('what migrate:down would undo');
const at = new Date('2026-11-25T00:00:00Z');
const states: MigrationState[] = [
  { name: 'a', appliedAt: at, known: true },
  { name: 'b', appliedAt: at, known: true },
  { name: 'c', appliedAt: at, known: true },
  { name: 'd', known: true },
];
const names = (plan: ReturnType<typeof planMigrateDown>) => (plan.ok ? plan.undo.map((s) => s.name) : plan.reason);

Down('the last applied migration, or every one after --to, newest first', () => {
  assert.equal(names(planMigrateDown(states)), ['c']);
  assert.equal(names(planMigrateDown(states, 'a')), ['c', 'b']);
  assert.equal(names(planMigrateDown(states, 'c')), []);
});

Down('a pending or unknown --to, no migration applied, or one of a newer release is refused', () => {
  assert.is(names(planMigrateDown(states, 'd')), '"d" is not an applied migration (applied: a, b, c)');
  assert.is(names(planMigrateDown([{ name: 'a', known: true }])), 'no migration is applied');
  assert.is(
    names(planMigrateDown([...states, { name: 'e', appliedAt: at, known: false }])),
    'the database has migrations this release does not know (e): undo them with the release that added them',
  );
});

Format.run();
Down.run();
