import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext } from 'playwright-core';
import { createPool, type Pool } from '../../src/kit/db.js';
import type { App } from '../../src/kit/http/app.js';
import {
  assertAccessible,
  assertAccessibleInDark,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  launchBrowser,
  screenshots,
  tabTo,
  watch,
} from '../helpers/browser.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/ports.js';
import { clicksOf, shortenerMigrations, startShortener } from '../helpers/shortener.js';

// A link with a password, opened in a real Chromium: the password page, a wrong password said
// so on the page, the right one landing on the destination (a local page), the click counted once.

describe('a password-protected link in Chromium', { skip: browserSkip }, () => {
  let db: TestDatabase;
  let pool: Pool;
  let app: App;
  let origin: string;
  let target: http.Server;
  let targetOrigin: string;
  let browser: Browser;
  let context: BrowserContext;
  const targetHits: string[] = [];

  before(async () => {
    target = http.createServer((req, res) => {
      if (req.url !== '/favicon.ico') targetHits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(
        '<!doctype html><html lang="en"><head><title>Secret page</title></head><body><main><h1>Secret page</h1></main></body></html>',
      );
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    targetOrigin = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
    db = await freshDatabase('shortener', await shortenerMigrations());
    pool = createPool(db.url, { max: 5 });
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    ({ app } = await startShortener({ pool, env: { BASE_URL: origin } }));
    await app.listen({ port, host: '127.0.0.1' });
    browser = await launchBrowser();
    // Desktop Chrome's agent: a headless one would be counted as a bot.
    const userAgent = `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${browser.version()} Safari/537.36`;
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, userAgent });
    context.setDefaultTimeout(20_000);
  });

  after(async () => {
    await context?.close();
    await browser?.close();
    await app?.close();
    await pool?.end();
    await db?.drop();
    await new Promise((resolve) => target?.close(resolve));
  });

  async function createProtected(path: string): Promise<string> {
    const res = await app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: `${targetOrigin}${path}`, password: 'correct horse' },
    });
    assert.equal(res.statusCode, 201, res.body);
    return (res.json() as { data: { code: string } }).data.code;
  }

  it('asks for the password, says a wrong one is wrong, and the right one lands on the destination, counted once', async () => {
    const code = await createProtected('/secret');
    const page = await context.newPage();
    const w = watch(page);
    const first = await page.goto(`${origin}/${code}`);
    assert.equal(first?.status(), 403);
    assert.equal(await page.title(), 'Password required');
    assert.equal(await page.locator('h1').textContent(), 'Password required');
    // The field has the focus: a visitor types at once.
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'password');
    await assertAccessible(page, 'password page');
    await assertAccessibleInDark(page, 'password page');
    await assertNoSidewaysScroll(page, 'password page');
    await screenshots(page, 'shortener-password');
    assert.equal(await clicksOf(pool, code), 0, 'showing the form counts nothing');

    await page.getByLabel('Password').fill('wrong horse');
    await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST' && r.url() === `${origin}/${code}`),
      page.getByRole('button', { name: 'Continue' }).click(),
    ]);
    await page.locator('#password-error').waitFor();
    const error = page.locator('#password-error');
    assert.equal((await error.textContent())?.trim(), 'That password is not right. Check it and try again.');
    assert.equal(await page.getByLabel('Password').getAttribute('aria-invalid'), 'true');
    await assertAccessible(page, 'password page with an error');
    await screenshots(page, 'shortener-password-wrong');
    assert.equal(await clicksOf(pool, code), 0, 'a wrong password counts nothing');
    assert.deepEqual(targetHits, []);

    // By keyboard alone: type, Enter.
    await tabTo(page, 'password');
    await page.keyboard.type('correct horse');
    await Promise.all([page.waitForURL(`${targetOrigin}/secret`), page.keyboard.press('Enter')]);
    assert.equal(await page.title(), 'Secret page');
    assert.deepEqual(targetHits, ['/secret']);
    assert.equal(await clicksOf(pool, code), 1);
    const { rows } = await pool.query('SELECT sum(visits)::int AS n, min(class) AS class FROM visit_counts WHERE code = $1', [code]);
    assert.deepEqual(rows[0], { n: 1, class: 'human' });
    assertClean(w, [403]);
    assertSameOrigin(w, origin, targetOrigin);

    // Back and open the link again: it asks again, and counts nothing until answered.
    const again = await page.goto(`${origin}/${code}`);
    assert.equal(again?.status(), 403);
    assert.equal(await clicksOf(pool, code), 1);
    await page.close();
  });

  it("the stats page shows a protected link's figures but not its destination", async () => {
    const code = await createProtected('/hidden');
    const page = await context.newPage();
    const w = watch(page);
    await page.goto(`${origin}/stats/${code}`);
    await page.locator('#clicks').filter({ hasText: '0' }).waitFor();
    assert.match((await page.locator('main').textContent()) ?? '', /Hidden: the link asks for a password/);
    assert.ok(!(await page.content()).includes('/hidden'));
    await assertAccessible(page, 'stats of a protected link');
    assertClean(w, [401]);
    await page.close();
  });
});
