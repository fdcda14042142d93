import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../../../src/settings/config.js';
import { callArguments } from '../../../src/throttle/batches.js';
import { buildScopes } from '../../../src/throttle/scopes.js';

// THROTTLE_SHADOW_RATES and THROTTLE_SHADOW_SCOPES (docs/configuration.md) and how a shadow rule
// reaches the script (ring.lua's layout).

const test = suite('shadow settings');

test('given shadow rates for any scope and scopes wholly in shadow, when loaded, then each is read', () => {
  const config = loadConfig({ THROTTLE_SHADOW_RATES: 'anon=10/min, user=50/min', THROTTLE_SHADOW_SCOPES: 'reports' });
  assert.equal(config.THROTTLE_SHADOW_RATES, { anon: '10/min', user: '50/min' });
  assert.equal(config.THROTTLE_SHADOW_SCOPES, ['reports']);
  assert.equal([loadConfig({}).THROTTLE_SHADOW_RATES, loadConfig({}).THROTTLE_SHADOW_SCOPES], [{}, []]);
});

test('given a bad value, when loaded, then the start stops with one line naming it', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ THROTTLE_SHADOW_RATES: 'anon=lots' }, /^invalid THROTTLE_SHADOW_RATES="anon=lots": invalid rate "lots"/],
    [{ THROTTLE_SHADOW_RATES: 'anon' }, /expected scope=rate pairs separated by commas, got "anon"/],
    [{ THROTTLE_SHADOW_SCOPES: 'Reports!' }, /^invalid THROTTLE_SHADOW_SCOPES=.*expected scope names/],
    [
      { THROTTLE_SHADOW_RATES: 'reports=1/min', THROTTLE_SHADOW_SCOPES: 'reports' },
      /the reports scope runs wholly in shadow/,
    ],
  ];
  for (const [env, message] of cases) {
    const error = (() => {
      try {
        loadConfig(env);
      } catch (thrown) {
        return thrown as Error;
      }
    })();
    assert.instance(error, ConfigError, JSON.stringify(env));
    assert.match(error!.message, message);
    assert.not.match(error!.message, /\n/);
  }
});

test('given shadow settings, when the scopes are built, then a rule carries its shadow rate or runs in shadow', () => {
  const rules = buildScopes(
    { anon: '20/min', user: '100/min', reports: '10/hour' },
    {},
    {
      rates: { anon: '10/min' },
      scopes: ['reports'],
    },
  );
  assert.is(rules.get('anon')?.shadow?.text, '10/min');
  assert.is(rules.get('user')?.shadow, undefined);
  assert.equal([rules.get('reports')?.inShadow, rules.get('reports')?.shadow], [true, undefined]);
});

test('given checks with and without shadow rules, when sent, then the layout pairs them and names the shadow logs', () => {
  const rules = buildScopes(
    { anon: '20/min', user: '100/min', reports: '10/hour' },
    {},
    {
      rates: { anon: '10/min' },
      scopes: ['reports'],
    },
  );
  const pending = (scope: string, key: string) => ({
    checks: [{ rule: rules.get(scope)!, ident: 'ip:1' }],
    keys: [key],
    resolve: () => {},
    reject: () => {},
  });
  const sent = callArguments([pending('user', 'u'), pending('anon', 'a'), pending('reports', 'r')]);
  assert.equal(sent.keys, ['u', 'a', 'a:shadow', 'r']);
  assert.is(sent.ruleList, '100 60000 20 60000 10 60000 10 3600000 ');
  assert.equal(
    [...sent.layout].map((c) => c.charCodeAt(0)),
    [1, 1, 65, 2, 3, 65, 127, 4],
  );
  assert.is(sent.checkCount, 3);
  const peeked = callArguments([pending('anon', 'a'), pending('reports', 'r')], true);
  assert.equal(
    [peeked.keys, [...peeked.layout].map((c) => c.charCodeAt(0))],
    [
      ['a', 'r'],
      [1, 1, 1, 2],
    ],
  );
});

test.run();
