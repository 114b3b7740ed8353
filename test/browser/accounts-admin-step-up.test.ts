import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import { registerAccount, submitSignIn } from '../helpers/accounts-pages.js';
import { assertAccessible, assertClean, browserSkip, screenshots, useBrowser } from '../helpers/browser.js';

// Step-up on the admin page, in a real Chromium against the real service and PostgreSQL: a ban
// asked with a sign-in older than REAUTH_MAX_AGE (3 s here, 10 minutes by default) is refused, the
// page offers a new sign-in instead of an error, and after it the admin is back on /admin and
// the ban goes through.

const REAUTH_MAX_AGE_S = 3;

describe('admin step-up in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let accounts: RunningAccounts;

  before(async () => {
    accounts = await startAccounts({ listen: true, env: { REAUTH_MAX_AGE: String(REAUTH_MAX_AGE_S) } });
  });
  after(async () => {
    await accounts?.close();
  });

  async function signInOnPage(page: Page, email: string) {
    await submitSignIn(page, email);
    await page.waitForURL(`${accounts.url}/admin`);
  }

  it('a ban with an old sign-in asks to sign in again, brings the admin back to /admin, then bans', async () => {
    const admin = await registerAccount(accounts.url, 'step-up-admin', 'step-up-admin');
    await accounts.pool.query(`UPDATE users SET role = 'admin' WHERE id = $1`, [admin.id]);
    const target = await registerAccount(accounts.url, 'step-up-target', 'step-up-target');
    const { page, w } = await browser.newPage();
    await page.goto(`${accounts.url}/`);
    await signInOnPage(page, admin.email);
    const ban = page.getByRole('button', { name: `Ban ${target.email}` });
    await ban.waitFor();
    await new Promise((resolve) => setTimeout(resolve, (REAUTH_MAX_AGE_S + 1) * 1000));

    await ban.click();
    await page.locator('#confirm-button').click();
    const offer = page.locator('#admin-reauth');
    await offer.waitFor({ state: 'visible' });
    assert.equal(await page.locator('#admin-error').isHidden(), true, 'no error beside the offer');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'admin-reauth-button');
    const stillThere = await accounts.pool.query('SELECT banned_at FROM users WHERE id = $1', [target.id]);
    assert.equal(stillThere.rows[0].banned_at, null, 'nothing changed');
    await assertAccessible(page, 'admin step-up offer');
    await screenshots(page, 'accounts-admin-step-up');

    await page.keyboard.press('Enter');
    await page.waitForURL(/\/\?again=1&next=%2Fadmin$/);
    await page.getByText('For your security, sign in again to continue.').waitFor();
    await signInOnPage(page, admin.email);
    await ban.click();
    await page.locator('#confirm-button').click();
    await page.getByText(`${target.email} is banned: every session has ended`).waitFor();
    const banned = await accounts.pool.query('SELECT banned_at FROM users WHERE id = $1', [target.id]);
    assert.notEqual(banned.rows[0].banned_at, null);
    // The refused ban's 401 is the only failed request of the page.
    assertClean(w, [401]);
  });
});
