import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { base32Decode, totpCode, totpStep } from '../../src/kit/totp.js';
import { manualClock } from '../../src/kit/clock.js';
import { startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import { confirmWith, registerAccount, signOut, submitSignIn } from '../helpers/accounts-pages.js';
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
} from '../helpers/browser.js';

// The "Two-step sign-in" section of the account page, in a real Chromium against the
// real service and PostgreSQL. The codes are computed here from the key the page shows,
// as an authenticator app would. The service's clock is injected (starting now, so the
// browser keeps the cookies): each TOTP time step signs in once, and a sign-in grows
// older than REAUTH_MAX_AGE without waiting.

const clock = manualClock(Date.now());
const codeNow = (secret: Buffer) => totpCode(secret, totpStep(clock()));

describe('two-step sign-in on the account page in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let accounts: RunningAccounts;

  before(async () => {
    accounts = await startAccounts({ listen: true, clock });
  });
  after(async () => {
    await accounts?.close();
  });

  async function signIn(page: Page, email: string, secondStep?: string) {
    await submitSignIn(page, email);
    if (secondStep !== undefined) {
      await page.getByLabel('Code').fill(secondStep);
      await page.keyboard.press('Enter');
    }
    await page.waitForURL(`${accounts.url}/account`);
    await page
      .locator('#totp-state')
      .getByText(/Two-step sign-in is (on|off)/)
      .waitFor();
  }

  it('turns on with the key the page shows (by keyboard), shows the recovery codes once, signs in with code or recovery code, steps up, turns off', async () => {
    const { email } = await registerAccount(accounts.url, 'totp-page', 'Two Step');
    const { page, w, context } = await browser.newPage({ acceptDownloads: true });
    await page.goto(`${accounts.url}/?next=%2Faccount`);
    await signIn(page, email);
    await page.getByText('Two-step sign-in is off').waitFor();
    await assertAccessible(page, 'account page, two-step sign-in off');

    // Enrolment by keyboard alone: Tab to "Turn on", Enter, the code field has the focus.
    await tabTo(page, 'totp-start', 80);
    await page.keyboard.press('Enter');
    const codeField = page.getByLabel('The 6-digit code the app shows');
    await codeField.waitFor();
    assert.ok(await codeField.evaluate((el) => el === document.activeElement), 'the code field has the focus');
    const shownKey = (await page.locator('#totp-secret').textContent()) ?? '';
    assert.match(shownKey, /^([A-Z2-7]{4} )+[A-Z2-7]{1,4}$/, 'the key in groups of four');
    const secret = base32Decode(shownKey.replace(/ /g, ''));
    const qr = page.getByRole('img', { name: 'QR code to scan with your authenticator app' });
    assert.match((await qr.getAttribute('src')) ?? '', /^data:image\/svg\+xml;base64,/);
    assert.ok((await qr.evaluate((img: HTMLImageElement) => img.naturalWidth)) > 0, 'the QR code is drawn');
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: accounts.url });
    await page.getByRole('button', { name: 'Copy key' }).click();
    await page.getByText('Key copied.').waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), shownKey.replace(/ /g, ''));
    await codeField.focus();
    await assertAccessible(page, 'two-step sign-in, enrolment');
    await assertNoSidewaysScroll(page, 'two-step sign-in, enrolment');
    await screenshots(page, 'accounts-totp-enrol');

    // A wrong code: said in words, the step stays (same key), the field selected for another try.
    const wrong = String((Number(codeNow(secret)) + 1) % 1_000_000).padStart(6, '0');
    await page.keyboard.type(wrong);
    await page.keyboard.press('Enter');
    await page.getByText('That code is not right').waitFor();
    assert.equal(await page.locator('#totp-secret').textContent(), shownKey);
    assert.ok(await codeField.isVisible());
    await page.keyboard.type(codeNow(secret));
    await page.keyboard.press('Enter');

    // The recovery codes, once, with the warning; downloadable as text.
    await page.getByText('These codes are shown only once').waitFor();
    const codes = await page.locator('#totp-code-list li').allTextContents();
    assert.equal(codes.length, 10);
    assert.equal(new Set(codes).size, 10);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download as text' }).click()]);
    assert.equal(download.suggestedFilename(), 'recovery-codes.txt');
    const text = await readFile((await download.path()) ?? '', 'utf8');
    for (const c of codes) assert.ok(text.includes(c), `the file holds ${c}`);
    await page.getByRole('button', { name: 'Copy codes' }).click();
    await page.getByText('Recovery codes copied.').waitFor();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    for (const c of codes) assert.ok(copied.includes(c), `the copy holds ${c}`);
    await assertAccessible(page, 'two-step sign-in, recovery codes');
    await assertAccessibleInDark(page, 'two-step sign-in, recovery codes');
    await screenshots(page, 'accounts-totp-recovery-codes');
    await page.getByRole('button', { name: 'I have saved them' }).click();
    assert.equal(await page.locator('#totp-code-list li').count(), 0, 'the codes are gone from the page');
    await page.getByText('Two-step sign-in is on since').waitFor();
    await page.getByText('10 of 10 recovery codes left').waitFor();
    await screenshots(page, 'accounts-totp-on');

    // Password, then the app's code (the next time step: each one signs in once).
    await signOut(page);
    clock.advance(30_000);
    await signIn(page, email, codeNow(secret));
    await page.getByText('Two-step sign-in is on since').waitFor();
    // Password, then a recovery code.
    await signOut(page);
    await signIn(page, email, codes[0]!);
    await page.getByText('9 of 10 recovery codes left').waitFor();

    // New recovery codes, after a confirmation: a new set, once.
    await page.getByRole('button', { name: 'New recovery codes' }).click();
    await confirmWith(page, 'Make new codes');
    await page.getByText('These codes are shown only once').waitFor();
    const newCodes = await page.locator('#totp-code-list li').allTextContents();
    assert.equal(newCodes.length, 10);
    assert.ok(!newCodes.some((c) => codes.includes(c)), 'a new set');
    await page.getByRole('button', { name: 'I have saved them' }).click();
    await page.getByText('10 of 10 recovery codes left').waitFor();

    // A sign-in older than REAUTH_MAX_AGE: turning off asks for a new sign-in, which comes back here.
    clock.advance(11 * 60_000);
    await page.getByRole('button', { name: 'Turn off' }).click();
    await confirmWith(page, 'Turn off');
    await page.getByText('For your security, sign in again to continue').first().waitFor();
    await assertAccessible(page, 'two-step sign-in, sign in again');
    await screenshots(page, 'accounts-totp-sign-in-again');
    await page.getByRole('button', { name: 'Sign in again' }).click();
    await page.waitForURL(/\/\?again=1&next=%2Faccount$/);
    await page.getByText('For your security, sign in again to continue').waitFor();
    clock.advance(30_000);
    await signIn(page, email, codeNow(secret));

    // Turn off, after a confirmation.
    await page.getByRole('button', { name: 'Turn off' }).click();
    await confirmWith(page, 'Turn off');
    await page.getByText('Two-step sign-in is off.', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Turn on' }).waitFor();
    const status = await page.evaluate(() => document.getElementById('totp-state')?.textContent);
    assert.match(status ?? '', /^Two-step sign-in is off/);

    assertClean(w, [400, 401]);
    assertSameOrigin(w, accounts.url);
  });
  it('an enrolment left more than its 10 minutes says so; starting again then asks for a new sign-in', async () => {
    const { email } = await registerAccount(accounts.url, 'totp-page-late', 'Late Enroller');
    const { page, w } = await browser.newPage();
    await page.goto(`${accounts.url}/?next=%2Faccount`);
    await signIn(page, email);
    await page.getByRole('button', { name: 'Turn on' }).click();
    const secret = base32Decode(((await page.locator('#totp-secret').textContent()) ?? '').replace(/ /g, ''));
    clock.advance(11 * 60_000);
    await page.getByLabel('The 6-digit code the app shows').fill(codeNow(secret));
    await page.keyboard.press('Enter');
    await page.getByText('This setup has expired').waitFor();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('button', { name: 'Turn on' }).click();
    await page.getByText('For your security, sign in again to continue').waitFor();
    await page.getByText('Two-step sign-in is off').waitFor();
    assertClean(w, [400, 401]);
  });
});
