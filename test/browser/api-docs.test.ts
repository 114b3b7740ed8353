import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import {
  assertAccessible,
  assertAccessibleInDark,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  screenshots,
  useBrowser,
  watchedPage,
} from '../helpers/browser.js';
import { startIdp, type RunningIdp } from '../helpers/idp.js';
import { startNotes, type RunningNotes } from '../helpers/notes.js';
import { startShortener, type RunningShortener } from '../helpers/shortener.js';

// Each service's API documents (/docs, Swagger UI) and the idp's root page in a
// real Chromium: they load with no console error (a Content-Security-Policy
// refusal is one) and ask nothing of another origin.

describe('API documents and the idp root page in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let shortener: RunningShortener;
  let accounts: RunningAccounts;
  let idp: RunningIdp;
  let notes: RunningNotes;
  let context: BrowserContext;

  before(async () => {
    shortener = await startShortener({ listen: true });
    accounts = await startAccounts({ listen: true });
    idp = await startIdp();
    notes = await startNotes({ idp });
    context = await browser.newContext();
  });

  after(async () => {
    await notes?.close();
    await idp?.close();
    await accounts?.close();
    await shortener?.close();
  });

  it('every service’s /docs renders its document with no console error and no request elsewhere', async () => {
    for (const [name, origin, title] of [
      ['shortener', shortener.url, 'shortener'],
      ['accounts', accounts.url, 'Accounts'],
      ['notes', notes.url, 'notes'],
      ['idp', idp.url, 'idp'],
    ] as const) {
      const { page, w } = await watchedPage(context);
      const res = await page.goto(`${origin}/docs`);
      assert.equal(res?.status(), 200, name);
      await page
        .locator('.swagger-ui .info .title')
        .filter({ hasText: new RegExp(title, 'i') })
        .waitFor();
      await page.locator('.swagger-ui .opblock').first().waitFor();
      assertClean(w);
      assertSameOrigin(w, origin);
      await page.close();
    }
  });

  it('the idp answers / with a page naming it and its documents', async () => {
    const { page, w } = await watchedPage(context);
    const res = await page.goto(`${idp.url}/`);
    assert.equal(res?.status(), 200);
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Local identity provider');
    await assertAccessible(page, 'idp root page');
    await assertAccessibleInDark(page, 'idp root page');
    await assertNoSidewaysScroll(page, 'idp root page');
    await screenshots(page, 'idp-root');
    await page.getByRole('link', { name: 'API documentation' }).click();
    await page.locator('.swagger-ui .info').waitFor();
    assertClean(w);
    assertSameOrigin(w, idp.url);
    await page.close();
  });
});
