// Needs: chromium
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

// GET /api/docs/ (docs/api.md "For integrators") as a person sees it in a browser: Debian's Chromium,
// headless, driven by playwright-core (ops/ensure-tools.sh installs it).

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path));

let app: TestApp;
let browser: Browser;
const TITLES = ['first', 'second', 'third'];

const Docs = suite('GET /api/docs/: the API document in Swagger UI, from this server alone');

Docs.before(async () => {
  assert.ok(CHROMIUM, 'chromium is not installed: run ops/test.sh (it installs it) or apt-get install chromium');
  app = await startTestApp({}, 'docs-page');
  const token = await app.login('alice');
  for (const title of TITLES)
    assert.is((await request(app.base, 'POST', '/api/tasks/', { token, body: { title } })).status, 201);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Chromium refuses to run as root with its sandbox on.
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
    timeout: 60_000,
  });
});
Docs.after(async () => {
  await browser?.close();
  await app?.close();
});

Docs(
  'loads with no console error and no request elsewhere, shows the tasks routes and 429, and runs a request',
  async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
    const problems: string[] = [];
    const origins = new Set<string>();
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('requestfailed', (failed) => problems.push(`failed: ${failed.url()} ${failed.failure()?.errorText}`));
    page.on('request', (sent) => origins.add(new URL(sent.url()).origin));

    const response = await page.goto(`${app.base}/api/docs/`, { waitUntil: 'load', timeout: 60_000 });
    assert.is(response?.status(), 200);
    assert.match(response?.headers()['content-security-policy'] ?? '', /default-src 'self'/);

    // The tasks operations are listed, each with its method and path.
    const listTasks = page.locator('#operations-tasks-listTasks');
    await listTasks.waitFor({ timeout: 60_000 });
    for (const id of [
      'listTasks',
      'createTask',
      'getTask',
      'updateTask',
      'replaceTask',
      'deleteTask',
      'listTaskEvents',
    ]) {
      assert.ok(await page.locator(`#operations-tasks-${id}`).isVisible(), id);
    }
    assert.match(await listTasks.locator('.opblock-summary-path').innerText(), /\/api\/tasks\//);

    // Opened: its responses include 429, and "Try it out" → "Execute" asks this server.
    await listTasks.locator('.opblock-summary').first().click();
    const throttled = listTasks.locator('tr.response[data-code="429"]');
    await throttled.waitFor({ timeout: 45_000 });
    assert.match(await throttled.innerText(), /throttled|Retry-After|rate/i);
    await listTasks.locator('button.try-out__btn').click();
    await listTasks.locator('button.execute').click();
    const status = listTasks.locator('.live-responses-table .response .response-col_status').first();
    await status.waitFor({ timeout: 45_000 });
    assert.is((await status.innerText()).trim(), '200');
    assert.match(await listTasks.locator('.live-responses-table').innerText(), /"results": \[/);

    assert.equal(problems, []);
    assert.equal([...origins], [app.base], 'every request went to this server');
    await page.close();
  },
);

/** Clicks "Execute" on the opened `operation`; resolves with the query sent (sorted, `a=1&b=`) and the JSON answered. */
async function execute(page: Page, operation: Locator): Promise<{ query: string; status: number; body: any }> {
  const [answer] = await Promise.all([
    page.waitForResponse((response) => response.request().resourceType() === 'fetch', { timeout: 45_000 }),
    operation.locator('button.execute').click(),
  ]);
  const query = new URL(answer.url()).searchParams;
  query.sort();
  return { query: query.toString(), status: answer.status(), body: await answer.json() };
}

Docs('a list\'s first cursor page is one "Execute" away; filling `page` asks for that style instead', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
  await page.goto(`${app.base}/api/docs/`, { waitUntil: 'load', timeout: 60_000 });
  const listTasks = page.locator('#operations-tasks-listTasks');
  await listTasks.waitFor({ timeout: 60_000 });
  await listTasks.locator('.opblock-summary').first().click();
  await listTasks.locator('button.try-out__btn').click();
  const field = (name: string) => listTasks.locator(`tr[data-param-name="${name}"]`);
  const sendEmpty = field('cursor').locator('input[type="checkbox"]');
  assert.ok(await sendEmpty.isChecked(), '"Send empty value" of `cursor` starts ticked');
  await field('page_size').locator('input').fill('2');

  // Nothing ticked by hand: the empty cursor is sent, and the first cursor page comes back.
  const first = await execute(page, listTasks);
  assert.is(first.query, 'cursor=&page_size=2');
  assert.is(first.status, 200);
  assert.equal(Object.keys(first.body), ['next', 'previous', 'results']);
  assert.equal(
    first.body.results.map((task: { title: string }) => task.title),
    TITLES.slice(0, 2),
  );
  assert.is(first.body.previous, null);
  assert.match(first.body.next, /[?&]cursor=[\w-]+/);
  const shown = listTasks.locator('.live-responses-table .response-col_description code.language-json');
  assert.is(JSON.parse(await shown.innerText()).results.length, 2, 'the page shows the answer');

  // A page number is another style: the box unticks itself rather than send a mix (400).
  await field('page').locator('input').fill('1');
  await field('cursor').locator('input[type="checkbox"]:not(:checked)').waitFor({ timeout: 10_000 });
  const numbered = await execute(page, listTasks);
  assert.is(numbered.query, 'page=1&page_size=2');
  assert.is(numbered.status, 200);
  assert.is(numbered.body.count, TITLES.length);
  await page.close();
});

Docs('opens on the tasks, with no OPTIONS rows and a lock only where credentials are required', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${app.base}/api/docs/`, { waitUntil: 'load', timeout: 60_000 });
  await page.locator('#operations-tasks-listTasks').waitFor({ timeout: 60_000 });
  const tags = await page.$$eval('h3.opblock-tag', (found) => found.map((tag) => tag.getAttribute('data-tag')));
  assert.equal(tags, ['tasks', 'auth', 'events', 'reports', 'meta', 'health']);
  const first = await page.locator('.opblock').first().getAttribute('id');
  assert.is(first, 'operations-tasks-listTasks', 'the first row is the task list');
  assert.ok(await page.locator('#operations-tasks-listTasks').isVisible(), 'above the fold');
  assert.is(await page.locator('.opblock-options').count(), 0, 'no OPTIONS row');
  const locks = async (id: string) => page.locator(`#${id} .authorization__btn`).count();
  // Anonymous clients may list and read tasks, log in, and read the meta and health routes.
  for (const id of ['operations-tasks-listTasks', 'operations-auth-obtainToken', 'operations-meta-apiRoot']) {
    assert.is(await locks(id), 0, `no lock on ${id}`);
  }
  for (const id of ['operations-tasks-createTask', 'operations-events-eventFeed', 'operations-auth-revokeToken']) {
    assert.is(await locks(id), 1, `a lock on ${id}`);
  }
  await page.screenshot({ path: join(process.env.TEST_TMP_DIR ?? '.', 'docs-page.png'), fullPage: false });
  await page.close();
});

Docs('the API root links to the docs page and the document, after the collections', async () => {
  const root = await fetch(`${app.base}/api/`).then((answer) => answer.json() as Promise<Record<string, string>>);
  assert.is(root.docs, `${app.base}/api/docs/`);
  assert.is(root.schema, `${app.base}/api/schema/`);
  assert.equal(Object.keys(root).slice(0, 2), ['tasks', 'task-stats']);
});

Docs.run();
