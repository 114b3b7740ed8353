import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import {
  assertAccessible,
  assertAccessibleInDark,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  screenshots,
  tabTo,
  useBrowser,
  watchedPage,
} from '../helpers/browser.js';
import { freePort } from '../helpers/ports.js';
import { clicksOf, type RunningShortener, startShortener } from '../helpers/shortener.js';
import { startTargetSite, type TargetSite } from '../helpers/target-site.js';

// A link with a password, opened in a real Chromium: the password page, a wrong password said
// so on the page, the right one landing on the destination (a local page), the click counted once.

describe('a password-protected link in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let shortener: RunningShortener;
  let origin: string;
  let target: TargetSite;
  let context: BrowserContext;

  before(async () => {
    target = await startTargetSite('Secret page');
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    shortener = await startShortener({ listen: true, port, env: { BASE_URL: origin } });
    context = await browser.newContext({ userAgent: browser.desktopUserAgent });
  });

  after(async () => {
    await shortener?.close();
    await target?.close();
  });

  async function createProtected(path: string): Promise<string> {
    const res = await shortener.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: `${target.origin}${path}`, password: 'correct horse' },
    });
    assert.equal(res.statusCode, 201, res.body);
    return (res.json() as { data: { code: string } }).data.code;
  }

  it('asks for the password, says a wrong one is wrong, and the right one lands on the destination, counted once', async () => {
    const code = await createProtected('/secret');
    const { page, w } = await watchedPage(context);
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
    assert.equal(await clicksOf(shortener.pool, code), 0, 'showing the form counts nothing');

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
    assert.equal(await clicksOf(shortener.pool, code), 0, 'a wrong password counts nothing');
    assert.deepEqual(target.hits, []);

    // By keyboard alone: type, Enter.
    await tabTo(page, 'password');
    await page.keyboard.type('correct horse');
    await Promise.all([page.waitForURL(`${target.origin}/secret`), page.keyboard.press('Enter')]);
    assert.equal(await page.title(), 'Secret page');
    assert.deepEqual(target.hits, ['/secret']);
    assert.equal(await clicksOf(shortener.pool, code), 1);
    const { rows } = await shortener.pool.query('SELECT sum(visits)::int AS n, min(class) AS class FROM visit_counts WHERE code = $1', [
      code,
    ]);
    assert.deepEqual(rows[0], { n: 1, class: 'human' });
    assertClean(w, [403]);
    assertSameOrigin(w, origin, target.origin);

    // Back and open the link again: it asks again, and counts nothing until answered.
    const again = await page.goto(`${origin}/${code}`);
    assert.equal(again?.status(), 403);
    assert.equal(await clicksOf(shortener.pool, code), 1);
    await page.close();
  });

  it("the stats page shows a protected link's figures but not its destination", async () => {
    const code = await createProtected('/hidden');
    const { page, w } = await watchedPage(context);
    await page.goto(`${origin}/stats/${code}`);
    await page.locator('#clicks').filter({ hasText: '0' }).waitFor();
    assert.match((await page.locator('main').textContent()) ?? '', /Hidden: the link asks for a password/);
    assert.ok(!(await page.content()).includes('/hidden'));
    await assertAccessible(page, 'stats of a protected link');
    assertClean(w, [401]);
    await page.close();
  });
});
