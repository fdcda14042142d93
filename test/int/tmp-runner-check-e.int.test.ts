import { suite } from 'uvu';
import * as assert from 'uvu/assert';
const s = suite('slow');
s('never ends', () => new Promise(() => { setInterval(() => {}, 1000); }));
s.run();
