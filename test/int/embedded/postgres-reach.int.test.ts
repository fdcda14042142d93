import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';
import { ensureReachable } from '../../../src/embedded/server-account.js';

// A clone in a directory the `postgres` account cannot enter (a mktemp -d, mode 0700, or /root):
// as root, the embedded PostgreSQL that `npm start` and `npm test` both start stops with one line
// that names the directory and the command that opens it, never an EACCES stack
// (docs/operations.md "When a store is down"). Not as root, the server runs as the current user.

const test = suite('an embedded PostgreSQL under a directory only its owner may enter');
let closed = '';

test.before(async () => {
  closed = await mkdtemp(join(tmpdir(), 'paceline-closed-'));
  await chmod(closed, 0o700);
});
test.after(async () => {
  await rm(closed, { recursive: true, force: true });
});

test('starts as the current user, or as root stops with one line naming the directory', async () => {
  const started = startEmbeddedPostgres({
    dataDir: join(closed, 'pg'),
    port: await findFreePort(),
    persistent: false,
  });
  if (process.getuid?.() !== 0) {
    const server = await started;
    assert.match(server.url, /^postgres:\/\//);
    return server.stop();
  }
  const error = await started.then(
    async (server) => {
      await server.stop();
      return undefined;
    },
    (reason: Error) => reason,
  );
  assert.ok(error, 'the start is refused');
  assert.is(
    error.message,
    `PostgreSQL runs as the "postgres" user, which cannot enter ${closed}: run "chmod o+x ${closed}" ` +
      'or put the data directory elsewhere',
  );
});

test('binaries out of reach are named the same way, by the directory that blocks them', async () => {
  const bin = join(closed, 'clone', 'node_modules', 'bin');
  await mkdir(bin, { recursive: true });
  const nobody = { name: 'nobody', uid: 65534, gid: 65534 };
  assert.throws(
    () => ensureReachable(bin, nobody, 'PostgreSQL runs as the "postgres" user', 'put Paceline elsewhere'),
    (error: Error) =>
      error.message ===
      `PostgreSQL runs as the "postgres" user, which cannot enter ${closed}: run "chmod o+x ${closed}" ` +
        'or put Paceline elsewhere',
  );
  await chmod(closed, 0o701);
  ensureReachable(bin, nobody, 'PostgreSQL runs as the "postgres" user', 'put Paceline elsewhere');
  await chmod(closed, 0o700);
});

test.run();
