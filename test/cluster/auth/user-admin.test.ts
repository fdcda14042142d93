import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { ENTRY, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request, type TestResponse } from '../../helpers/http.js';

// docs/operations.md "Users": the user commands against two hosts sharing PostgreSQL and Redis.
// Each host's worker remembers a token once it has served it (docs/architecture.md "Read cache"),
// so a refusal on both hosts right after the command shows every host was told at once.

const test = suite('user administration from the CLI, seen by every host');
let hosts: RunningCluster[] = [];
let stores: Record<string, string> = {};
let dropDatabase: () => Promise<void> = async () => {};

const REVOKED = 'Bearer realm="api", error="invalid_token", error_description="The token has been revoked"';
const REFUSED_LOGIN = { non_field_errors: ['Unable to log in with provided credentials.'] };

/** Runs `npm run cli -- …` as an operator would, against the hosts' stores. */
async function cli(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [ENTRY.cli, ...args], {
    env: {
      ...process.env,
      ...stores,
      DATA_DIR: join(process.env.TEST_TMP_DIR ?? '/tmp', 'user-admin-cli'),
      LOG_LEVEL: 'silent',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let [stdout, stderr] = ['', ''];
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, stdout, stderr };
}

const login = (password: string, host = hosts[0]!) =>
  request(host.base, 'POST', '/api/auth/token/', { body: { username: 'alice', password } });

/** The token's answer on every host. */
const everyHost = (token: string): Promise<TestResponse[]> =>
  Promise.all(hosts.map((host) => request(host.base, 'GET', '/api/tasks/', { token })));

function assertRevoked(responses: TestResponse[]): void {
  for (const [i, response] of responses.entries()) {
    assert.is(response.status, 401, `host ${i + 1}: ${response.text}`);
    assert.equal(response.body, { detail: 'Invalid token.' });
    assert.is(response.headers.get('www-authenticate'), REVOKED);
  }
}

test.before(async () => {
  const database = await createTestDatabase('user_admin');
  dropDatabase = database.drop;
  stores = {
    ...testStoresEnv('user-admin', database.url),
    THROTTLE_TOKEN_OBTAIN: '1000/min',
    THROTTLE_LOGIN: '1000/min',
  };
  hosts = await Promise.all([1, 2].map(() => startCluster({ ...stores, WEB_CONCURRENCY: '1' }, 120_000)));
});

test.after(async () => {
  await Promise.all(hosts.map((host) => host.stop()));
  await dropDatabase();
});

test('user:create, then user:list shows the user with its live tokens', async () => {
  const created = await cli(['user:create', 'alice'], { PASSWORD: 'alice-pass-123' });
  assert.is(created.code, 0, created.stderr);
  assert.match(created.stdout, /^created user "alice" \(id \d+\)\n$/);
  assert.is((await login('alice-pass-123')).status, 200);
  const listed = await cli(['user:list']);
  assert.is(listed.code, 0, listed.stderr);
  const [header, row, ...rest] = listed.stdout.trimEnd().split('\n');
  assert.match(header!, /^ID\s+NAME\s+CREATED\s+DISABLED\s+LIVE TOKENS$/);
  assert.match(row!, /^\d+\s+alice\s+\d{4}-\d\d-\d\dT[\d:.]+Z\s+-\s+1$/);
  assert.is(rest.length, 0);
});

test("user:disable revokes the user's tokens on every host at once and refuses its login as a wrong password", async () => {
  const { token } = (await login('alice-pass-123')).body as { token: string };
  for (const response of await everyHost(token)) assert.is(response.status, 200, 'each host now remembers it');
  const disabled = await cli(['user:disable', 'alice']);
  assert.is(disabled.code, 0, disabled.stderr);
  assert.match(disabled.stdout, /^disabled: "alice" \(id \d+\), 2 tokens revoked\n/);
  assert.match(disabled.stdout, /every server looks its remembered tokens up again\n$/);
  assertRevoked(await everyHost(token));
  const [right, wrong] = [await login('alice-pass-123', hosts[1]), await login('not-her-password', hosts[1])];
  assert.equal([right.status, right.body], [400, REFUSED_LOGIN]);
  assert.equal([right.status, right.body], [wrong.status, wrong.body]);
  const listed = await cli(['user:list']);
  assert.match(listed.stdout, /\balice\s+\S+Z\s+\d{4}-\d\d-\d\dT[\d:.]+Z\s+0\n$/);
});

test('user:enable lets the user log in again; the tokens revoked meanwhile stay revoked', async () => {
  const enabled = await cli(['user:enable', 'alice']);
  assert.equal([enabled.code, enabled.stdout.replace(/\d+/, 'N')], [0, 'enabled: "alice" (id N)\n']);
  const fresh = await login('alice-pass-123');
  assert.is(fresh.status, 200, fresh.text);
  for (const response of await everyHost(fresh.body.token)) assert.is(response.status, 200);
});

test('token:revoke ends every token of the user on every host at once; the user may log in again', async () => {
  const { token } = (await login('alice-pass-123', hosts[1])).body as { token: string };
  for (const response of await everyHost(token)) assert.is(response.status, 200);
  const revoked = await cli(['token:revoke', 'alice']);
  assert.is(revoked.code, 0, revoked.stderr);
  assert.match(revoked.stdout, /^revoked: "alice" \(id \d+\), 2 tokens revoked\n/);
  assertRevoked(await everyHost(token));
  assert.is((await login('alice-pass-123')).status, 200);
});

test('user:set-password takes the new password from stdin or PASSWORD; the old one is refused', async () => {
  const set = await cli(['user:set-password', 'alice'], { PASSWORD: 'a-new-pass-456' });
  assert.is(set.code, 0, set.stderr);
  assert.match(set.stdout, /^set a new password for user "alice" \(id \d+\)\n$/);
  assert.equal([(await login('alice-pass-123')).status, (await login('a-new-pass-456')).status], [400, 200]);
  const short = await cli(['user:set-password', 'alice'], { PASSWORD: 'short' });
  assert.equal([short.code, short.stderr], [1, 'paceline: the password must have at least 8 characters\n']);
});

test('an unknown user is refused in one line; user:audit lists every change, newest first, with who made it', async () => {
  for (const command of ['user:disable', 'user:enable', 'token:revoke', 'user:set-password']) {
    const run = await cli([command, 'nobody'], { PASSWORD: 'whatever-123' });
    assert.equal([run.code, run.stderr], [1, 'paceline: no user "nobody"\n'], command);
  }
  const audit = await cli(['user:audit', 'alice']);
  assert.is(audit.code, 0, audit.stderr);
  const lines = audit.stdout.trimEnd().split('\n');
  assert.match(lines[0]!, /^AT\s+NAME\s+CHANGE\s+TOKENS REVOKED\s+BY$/);
  assert.equal(
    lines.slice(1).map((line) => line.split(/\s+/).slice(1, 4)),
    [
      ['alice', 'password-set', '0'],
      ['alice', 'tokens-revoked', '2'],
      ['alice', 'enabled', '0'],
      ['alice', 'disabled', '2'],
      ['alice', 'created', '0'],
    ],
  );
  assert.ok(
    lines.slice(1).every((line) => /\S+@\S+$/.test(line)),
    audit.stdout,
  );
});

test.run();
