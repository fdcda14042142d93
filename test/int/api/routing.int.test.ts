import { pino } from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createApi } from '../../../src/api/app.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

// docs/architecture.md "The request's journey": the listener (src/listener/) finds a request's route before Koa
// with its own lookup (src/api/router.ts), compiled by path-to-regexp as @koa/router compiles its routes,
// and choosing as the router's `exclusive: 'specificity'` chooses. Both are pinned in package.json to the
// versions this test ran with; an upgrade that changes how either matches or chooses fails it here.

const test = suite('the listener finds the route the router runs');

let app: TestApp;
const lines: Array<{ method?: string; route?: string; requestId?: string }> = [];

test.before(async () => {
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  app = await startTestApp({ ACCESS_LOG: 'all', LOG_LEVEL: 'debug' }, 'routing', { logger });
});
test.after(async () => app.close());

/** Sample paths for a template: each parameter a number, a word that is also a fixed path, a typo. */
function samplesOf(template: string): string[] {
  const withParams = (value: string) => template.replace(/:[A-Za-z_]+/g, value);
  return [...new Set([withParams('1'), withParams('stats'), withParams('x'), `${template}extra/`])];
}

test('for every documented path and every method, the same template as the router (its ctx.routerPath)', async () => {
  const { lookup, operations } = createApi(app.deps);
  const paths = [...new Set(operations.flatMap((op) => samplesOf(op.path))), '/nope/', '/api/tasks/1/events/x/'];
  let compared = 0;
  for (const path of paths) {
    for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      const requestId = `routing-${compared}`;
      await request(app.base, method, path, { headers: { 'X-Request-Id': requestId } });
      const line = lines.find((l) => l.requestId === requestId);
      assert.ok(line, `${method} ${path} was logged`);
      const routed = line.route === 'unmatched' ? undefined : line.route;
      assert.is(lookup(path, method)?.template, routed, `${method} ${path}`);
      compared += 1;
    }
  }
  assert.ok(compared > 100, `compared ${compared} requests`);
});

test.run();
