import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import {
  describeStoreError,
  isStoreUnavailable,
  redactAddress,
  storeFailureLine,
} from '../../../src/stores/store-errors.js';

// What an operator reads when a store cannot be used (docs/operations.md "When a store is down").

const Lines = suite('a store failure reads as the setting, the cause and what to do');

function failure(message: string, code?: string): Error {
  return Object.assign(new Error(message), code ? { code } : {});
}

Lines('a refused connection, also when every address of a name refused it', () => {
  const refused = new AggregateError([failure('connect ECONNREFUSED 127.0.0.1:6390', 'ECONNREFUSED')], '');
  const line = storeFailureLine('REDIS_URL', 'redis://127.0.0.1:6390', describeStoreError(refused, 'REDIS_URL'));
  assert.is(
    line,
    'REDIS_URL redis://127.0.0.1:6390: connection refused (127.0.0.1:6390): start Redis there or correct REDIS_URL',
  );
});

Lines('a refused password names where the user and password go, and the line never shows one', () => {
  const wrong = describeStoreError(
    failure('WRONGPASS invalid username-password pair or user is disabled.'),
    'REDIS_URL',
  );
  assert.match(wrong.cause, /^the password was refused \(WRONGPASS/);
  // The embedded Redis has no `default` user: a URL with a password and no user cannot log in.
  assert.match(wrong.advice, /REDIS_URL \(redis:\/\/USER:PASSWORD@host:port; for the embedded Redis, /);
  assert.match(wrong.advice, /redis:\/\/paceline:PASSWORD@host:port\) or the password in REDIS_PASSWORD$/);
  assert.not.match(wrong.advice, /redis:\/\/:PASSWORD/);
  const noauth = describeStoreError(
    failure('NOAUTH HELLO must be called with the client already authenticated'),
    'REDIS_CLUSTER_NODES',
  );
  assert.match(noauth.advice, /REDIS_CLUSTER_NODES \(redis-cluster:\/\/USER:PASSWORD@host:port,\.\.\.\)/);
  const pg = describeStoreError(failure('password authentication failed for user "app"', '28P01'), 'DATABASE_URL');
  assert.match(pg.advice, /user and password in DATABASE_URL/);
  assert.is(redactAddress('redis://:s3cret@10.0.0.1:6379/0'), 'redis://:***@10.0.0.1:6379/0');
});

Lines('a TLS mismatch says which scheme or sslmode to use', () => {
  const redis = describeStoreError(
    failure('Client network socket disconnected before secure TLS connection was established', 'ECONNRESET'),
    'REDIS_URL',
  );
  assert.match(redis.advice, /rediss:\/\/ for a server that speaks TLS/);
  const pg = describeStoreError(failure('The server does not support SSL connections'), 'DATABASE_URL');
  assert.match(pg.advice, /sslmode=disable/);
});

Lines('a cluster none of whose nodes answers is described by the error of the last node asked', () => {
  // ioredis' ClusterAllFailedError: its own message says only that the slots could not be read.
  const allFailed = (last: Error | null) =>
    Object.assign(new Error('Failed to refresh slots cache.'), { name: 'ClusterAllFailedError', lastNodeError: last });
  const refused = allFailed(failure('WRONGPASS invalid username-password pair or user is disabled.'));
  assert.match(describeStoreError(refused, 'REDIS_CLUSTER_NODES').cause, /^the password was refused \(WRONGPASS/);
  assert.ok(isStoreUnavailable(allFailed(failure('Connection is closed.'))));
  assert.ok(isStoreUnavailable(allFailed(null)));
  assert.ok(isStoreUnavailable(failure("Cluster isn't ready and enableOfflineQueue options is false")));
});

Lines('a host name that does not resolve is named', () => {
  const line = storeFailureLine(
    'REDIS_CLUSTER_NODES',
    'cache-1:6379',
    describeStoreError(failure('getaddrinfo ENOTFOUND cache-1', 'ENOTFOUND'), 'REDIS_CLUSTER_NODES'),
  );
  assert.is(
    line,
    'REDIS_CLUSTER_NODES cache-1:6379: the host name does not resolve (cache-1): correct REDIS_CLUSTER_NODES',
  );
});

Lines('a server that never answers: no answer in time, where a firewall may be the cause', () => {
  // pg's own words when the start's connection timeout (10 s) passes, as the start then stops.
  const pg = describeStoreError(failure('Connection terminated due to connection timeout'), 'DATABASE_URL');
  assert.is(pg.cause, 'no answer in time');
  assert.match(pg.advice, /firewall/);
});

Lines('a database that does not exist, and the errors that mean a store is down', () => {
  const missing = describeStoreError(failure('database "nope" does not exist', '3D000'), 'DATABASE_URL');
  assert.is(missing.cause, 'database "nope" does not exist');
  assert.match(missing.advice, /create that database/);
  assert.ok(isStoreUnavailable(failure("Stream isn't writeable and enableOfflineQueue options is false")));
  assert.ok(isStoreUnavailable(failure('NOAUTH Authentication required.')));
  assert.not.ok(isStoreUnavailable(failure('duplicate key value violates unique constraint', '23505')));
});

Lines('a Unix socket that is not there is named, and counts as the store being down', () => {
  const missing = Object.assign(failure('connect ENOENT /run/redis/redis.sock', 'ENOENT'), { syscall: 'connect' });
  const line = storeFailureLine('REDIS_URL', 'unix:///run/redis/redis.sock', describeStoreError(missing, 'REDIS_URL'));
  assert.is(
    line,
    'REDIS_URL unix:///run/redis/redis.sock: no socket at /run/redis/redis.sock: start Redis there or correct REDIS_URL',
  );
  assert.ok(isStoreUnavailable(missing), 'logged by the children as one debug line, without a stack');
});

Lines('every error a connection meets on its way counts as the store being down, not as a failed command', () => {
  const system = (message: string, code: string, syscall: string) => Object.assign(failure(message, code), { syscall });
  assert.ok(isStoreUnavailable(system('connect EHOSTUNREACH 10.9.9.9:6379', 'EHOSTUNREACH', 'connect')));
  assert.ok(isStoreUnavailable(system('connect EACCES /run/redis/redis.sock', 'EACCES', 'connect')));
  assert.ok(isStoreUnavailable(failure('self-signed certificate', 'DEPTH_ZERO_SELF_SIGNED_CERT')));
  assert.ok(isStoreUnavailable(failure('unable to verify the first certificate', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE')));
  assert.ok(isStoreUnavailable(failure('Protocol error, got "H" as reply type byte')));
  assert.not.ok(isStoreUnavailable(failure("ENOENT: no such file or directory, open 'x'", 'ENOENT')));
});

Lines.run();
