// Needs: chromium
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.js';

// GET /api/docs/ (docs/api.md "For integrators") as a person sees it in a browser: Debian's Chromium,
// headless, driven by playwright-core (ops/ensure-tools.sh installs it).

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path));

let app: TestApp;
let browser: Browser;

const Docs = suite('GET /api/docs/: the API document in Swagger UI, from this server alone');

Docs.before(async () => {
  assert.ok(CHROMIUM, 'chromium is not installed: run ops/test.sh (it installs it) or apt-get install chromium');
  app = await startTestApp({}, 'docs-page');
  await app.login('alice');
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
    assert.match(await listTasks.locator('.live-responses-table').innerText(), /"count": 0/);

    await page.screenshot({ path: join(process.env.TEST_TMP_DIR ?? '.', 'docs-page.png'), fullPage: false });
    assert.equal(problems, []);
    assert.equal([...origins], [app.base], 'every request went to this server');
    await page.close();
  },
);

Docs.run();
