import { suite } from 'uvu';
import * as assert from 'uvu/assert';
const s = suite('math');
s('adds', () => assert.is(1 + 1, 2));
s('fails on purpose', () => assert.is(1 + 1, 3));
s.skip('skipped', () => {});
s.run();
