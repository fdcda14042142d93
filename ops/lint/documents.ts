// Repository checks, run by `npm run lint` (node --import tsx ops/lint/documents.ts): what is written
// down beside the code agrees with it. The generated types of the typed client are those the code's
// API document gives, the Grafana dashboard imports as is, and docs/operations.md names what a backup
// holds. Nothing is started: the API document is built from the routes' declarations, as
// `npm run client` builds it. That the running server serves that same document is
// test/int/api/typed-client.int.test.ts's part.
// A failed check prints its suite, test and message, and the script exits non-zero.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { generateTypes, TYPES_FILE } from '../../clients/typescript/generate.js';
import { BACKED_UP, REBUILT } from '../../src/backup/backup-tables.js';
import { dashboard as source } from '../grafana/dashboard.js';

// The paths below are the repository's, whichever folder the script is started from.
process.chdir(fileURLToPath(new URL('../../', import.meta.url)));

// The dashboard's JSON is read loosely, as the tests read JSON bodies (eslint.config.js).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const Client = suite('the typed client (docs/api.md "For integrators")');

Client('the checked-in types are those of the API document (run `npm run client` after changing a route)', async () => {
  const expected = await generateTypes();
  const checkedIn = readFileSync(TYPES_FILE, 'utf8');
  if (checkedIn !== expected) {
    const lines = checkedIn.split('\n');
    const at = expected.split('\n').findIndex((line, i) => line !== lines[i]);
    assert.unreachable(
      `clients/typescript/schema.d.ts differs from the document at line ${at + 1}: run npm run client`,
    );
  }
});

const Dashboard = suite('ops/grafana/dashboard.ts');

// That every panel's query returns data from a real Prometheus is test/cluster/cluster/prometheus.test.ts's part.
Dashboard('the dashboard imports as is: a datasource variable, used by every panel and query', () => {
  // As Grafana imports it: the JSON `node ops/grafana/dashboard.ts` writes.
  const dashboard: Loose = JSON.parse(JSON.stringify(source));
  const variable = dashboard.templating.list.find((v: Loose) => v.name === 'datasource');
  assert.is(variable?.type, 'datasource');
  assert.is(variable?.query, 'prometheus');
  assert.ok(Array.isArray(dashboard.__inputs));
  for (const panel of dashboard.panels.filter((p: Loose) => p.type !== 'row')) {
    assert.is(panel.datasource?.uid, '${datasource}', panel.title);
    for (const target of panel.targets)
      assert.is(target.datasource?.uid, '${datasource}', `${panel.title} ${target.refId}`);
  }
  const titles = dashboard.panels.map((p: Loose) => p.title).join('\n');
  const wanted = [
    /admitted vs throttled/,
    /throttle ratio/i,
    /top routes by 429/i,
    /status class/,
    /latency percentiles/i,
    /throttle check latency/i,
    /store errors/,
    /appended/,
    /batch size/,
    /queue depth/,
    /restarts/i,
    /top throttled clients/i,
    /distinct throttled clients/i,
    /near-limit ratio/i,
    /shadow vs enforced/i,
    /against its scope's limit/i,
    /settings reloads/i,
    /in progress against the learnt limit/i,
    /queued requests/i,
    /shed per second by class and reason/i,
    /queue time p99 by class/i,
    /abandoned in the queue/i,
    /throttle deciding locally/i,
  ];
  for (const title of wanted) assert.match(titles, title);
});

const Backup = suite('docs/operations.md "Backup and restore" names what a backup holds');
const backupSection = () =>
  /\n## Backup and restore\n([\s\S]*?)\n## /.exec(readFileSync('docs/operations.md', 'utf8'))?.[1] ?? '';
const backedUp = BACKED_UP.map((table) => table.name);

/** The `code` names in the list item of the section that starts with `**lead**`. */
function namedIn(lead: string): string[] {
  const item =
    backupSection()
      .split('\n- ')
      .find((text) => text.startsWith(`**${lead}**`)) ?? '';
  return [...item.split('\n\n')[0]!.matchAll(/`(\w+)`/g)].map((match) => match[1]!);
}

Backup('"In the file" names every table the export writes, "Rebuilt on import" every projection', () => {
  assert.equal(namedIn('In the file').sort(), [...backedUp].sort());
  assert.equal(namedIn('Rebuilt on import').sort(), [...REBUILT].sort());
});

Backup("the export's and the import's examples count the tables the export writes, in its order", () => {
  const examples = [...backupSection().matchAll(/; (users \d+(?:,\s+\w+ \d+)*)/g)];
  assert.is(examples.length, 2);
  for (const [, counts] of examples) {
    const tables = counts!.split(/,\s+/).map((count) => count.split(' ')[0]);
    assert.equal(tables, backedUp);
  }
});

Client.run();
Dashboard.run();
Backup.run();
