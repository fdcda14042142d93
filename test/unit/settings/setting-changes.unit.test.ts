import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { loadConfig } from '../../../src/settings/config.js';
import { describeChanges } from '../../../src/settings/setting-changes.js';

// What `cli reload` and the primary's log say a reload changed (docs/operations.md "Processes and signals").

const test = suite('a reload names each setting it changes, as written');

const read = (env: Record<string, string>) => ({ config: loadConfig(env), env });

test('given: a rate changed, a page size set and one unset; then: each as written, with what it was', () => {
  const before = read({ THROTTLE_ANON: '30/min', PAGE_SIZE: '3' });
  const after = read({ THROTTLE_ANON: '45/min', TOKEN_TTL: '12h' });
  assert.equal(describeChanges(before, after), [
    'PAGE_SIZE back to its default (was 3)',
    'THROTTLE_ANON=45/min (was 30/min)',
    'TOKEN_TTL=12h (was its default)',
  ]);
});

test('given: the same values written otherwise, or nothing changed; then: no change', () => {
  assert.equal(describeChanges(read({ PAGE_SIZE: '3' }), read({ PAGE_SIZE: ' 3' })), []);
  assert.equal(describeChanges(read({}), read({ PAGE_SIZE: '' })), []);
});

test('given: a setting that may carry a credential; then: named, its value never shown', () => {
  const before = read({ METRICS_AUTH: 'bearer:first-token-0123456789' });
  const after = read({ METRICS_AUTH: 'bearer:second-token-0123456789' });
  assert.equal(describeChanges(before, after), ['METRICS_AUTH changed (value not shown)']);
});

test.run();
