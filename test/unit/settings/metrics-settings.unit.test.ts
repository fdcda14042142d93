import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../../../src/settings/config.js';

// docs/configuration.md "Metrics": the metrics port's settings, as a start reads them.

const test = suite('metrics settings');

test('given nothing, the metrics port binds loopback, asks no credentials and has its limits', () => {
  const config = loadConfig({});
  assert.is(config.METRICS_HOST, '127.0.0.1');
  assert.is(config.METRICS_AUTH, undefined);
  assert.is(config.METRICS_HEADERS_TIMEOUT_MS, 5_000);
  assert.is(config.METRICS_MAX_CONNECTIONS, 64);
  assert.is(config.READY_CHECK_MS, 1_000);
});

test('given bearer or basic credentials, they are read as Prometheus sends them', () => {
  assert.equal(loadConfig({ METRICS_AUTH: 'bearer:0123456789abcdef' }).METRICS_AUTH, {
    scheme: 'bearer',
    token: '0123456789abcdef',
  });
  assert.equal(loadConfig({ METRICS_AUTH: 'basic:scrape:pass:with:colons' }).METRICS_AUTH, {
    scheme: 'basic',
    user: 'scrape',
    password: 'pass:with:colons',
  });
});

test('given a bad METRICS_AUTH, the start stops with one line that does not show it', () => {
  for (const value of ['bearer:short', 'basic:nopassword', 'token:0123456789abcdef']) {
    try {
      loadConfig({ METRICS_AUTH: value });
      assert.unreachable(value);
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.match((error as Error).message, /^invalid METRICS_AUTH \(value not shown\): expected bearer:/);
      assert.not.match((error as Error).message, new RegExp(value.split(':')[1]!));
    }
  }
});

test.run();
