import { suite } from 'uvu';
import * as assert from 'uvu/assert';
const s = suite('hangs after');
s('passes but leaves a timer', () => { setInterval(() => {}, 1000); assert.ok(true); });
s.run();
