import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
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
import { freePort } from '../helpers/ports.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

// Passkeys on the account and sign-in pages, in a real Chromium against the real service and
// PostgreSQL, with Chromium's own virtual authenticator (DevTools protocol, WebAuthn domain):
// a platform authenticator holding discoverable credentials, verifying its user. The pages are
// opened at http://localhost (WebAuthn refuses an IP address as relying party), the address the
// service is told is its public one. The service's clock is injected (starting now, so the
// browser keeps the cookies): a sign-in grows older than REAUTH_MAX_AGE without waiting.

const clock = manualClock(Date.now());

describe('passkeys on the account and sign-in pages in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let accounts: RunningAccounts;
  let base: string;
  let smtp: TestSmtp;

  before(async () => {
    smtp = await startSmtp();
    const port = await freePort();
    base = `http://localhost:${port}`;
    accounts = await startAccounts({
      listen: true,
      port,
      clock,
      env: { ACCOUNTS_PUBLIC_URL: base, SMTP_URL: smtp.url, EMAIL_SIGNIN: 'true' },
    });
  });
  after(async () => {
    await accounts?.close();
    await smtp?.close();
  });

  /** A platform authenticator for this page, as a phone or laptop has: resident keys, user verification that succeeds. */
  async function virtualAuthenticator(page: Page) {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    return {
      credentials: async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials,
    };
  }

  it('adds a passkey from the account page by keyboard, signs in with it without an email, answers the second step with it, renames and removes it', async () => {
    const { email } = await registerAccount(base, 'passkey-page', 'Passkey Person');
    const { page, w } = await browser.newPage();
    const authenticator = await virtualAuthenticator(page);
    await page.goto(`${base}/?next=%2Faccount`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).waitFor();
    await assertAccessible(page, 'sign-in page with the passkey button');
    await screenshots(page, 'accounts-signin-passkey');
    await submitSignIn(page, email);
    await page.waitForURL(`${base}/account`);
    await page.getByText('No passkeys yet').waitFor();

    // Adding by keyboard alone: Tab to the name, type it, Enter; the authenticator makes the key.
    await tabTo(page, 'passkey-name', 120);
    await page.keyboard.type('Work laptop');
    await page.keyboard.press('Enter');
    await page.getByText('Passkey “Work laptop” added').waitFor();
    // The two-step section no longer says the password alone signs in.
    await page.locator('#totp-state').getByText('signing in asks for one of your passkeys').waitFor();
    const row = page.locator('#passkeys-table tbody tr');
    assert.equal(await row.count(), 1);
    await row.getByText('Work laptop').waitFor();
    assert.equal((await authenticator.credentials()).length, 1);
    assert.equal((await authenticator.credentials())[0]!.isResidentCredential, true, 'a discoverable credential');
    await assertAccessible(page, 'account page, one passkey');
    await assertAccessibleInDark(page, 'account page, one passkey');
    await assertNoSidewaysScroll(page, 'account page, one passkey');
    await screenshots(page, 'accounts-passkeys');

    // Rename.
    await page.getByRole('button', { name: 'Rename passkey Work laptop' }).click();
    const newName = page.getByLabel('New name');
    assert.ok(await newName.evaluate((el) => el === document.activeElement), 'the new name field has the focus');
    await newName.fill('Laptop at work');
    await page.keyboard.press('Enter');
    await page.getByText('Passkey renamed to “Laptop at work”').waitFor();

    // Sign out, then in with the passkey: no email typed.
    await signOut(page);
    assert.equal(await page.getByLabel('Email').inputValue(), '');
    await tabTo(page, 'passkey-signin-button', 40);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${base}/account`);
    await page.getByRole('cell', { name: 'Laptop at work', exact: true }).waitFor();
    assert.equal(await page.getByLabel('Email').count(), 0);
    await page.locator('#passkeys-table tbody tr td[data-label="Last used"]').getByText(/\d/).waitFor();

    // Password sign-in: the passkey is the second step.
    await signOut(page);
    await submitSignIn(page, email);
    const usePasskey = page.getByRole('button', { name: 'Use a passkey' });
    await usePasskey.waitFor();
    assert.ok(await usePasskey.evaluate((el) => el === document.activeElement), 'the passkey button has the focus');
    assert.equal(await page.getByLabel('Code').isVisible(), false, 'no code field without TOTP');
    await assertAccessible(page, 'sign-in, second step with a passkey');
    await screenshots(page, 'accounts-signin-second-step-passkey');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${base}/account`);
    await page.getByRole('cell', { name: 'Laptop at work', exact: true }).waitFor();

    // Removal needs a recent sign-in: past REAUTH_MAX_AGE the page asks for one.
    clock.advance(11 * 60_000);
    await page.getByRole('button', { name: 'Remove passkey Laptop at work' }).click();
    await confirmWith(page, 'Remove');
    await page.locator('#passkeys-reauth').getByText('Changing your passkeys needs a recent sign-in').waitFor();
    assert.equal(await row.count(), 1);
    await page.locator('#passkeys-reauth').getByRole('button', { name: 'Sign in again' }).click();
    await page.waitForURL(/\/\?again=1&next=%2Faccount$/);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.waitForURL(`${base}/account`);
    await page.getByRole('button', { name: 'Remove passkey Laptop at work' }).click();
    await confirmWith(page, 'Remove');
    await page.getByText('Passkey “Laptop at work” removed.').waitFor();
    await page.getByText('No passkeys yet').waitFor();

    // Removed: the key still on the device no longer signs in.
    await signOut(page);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.getByText('That passkey is not registered here').waitFor();
    await assertAccessible(page, 'sign-in, passkey refused');

    assertClean(w, [401]);
    assertSameOrigin(w, base);
  });

  it('a sign-in by mail of an account with a passkey only: the mailed code, then the passkey', async () => {
    const { email } = await registerAccount(base, 'passkey-mail', 'Passkey Person');
    const { page, w } = await browser.newPage();
    await virtualAuthenticator(page);
    await page.goto(`${base}/?next=%2Faccount`);
    await submitSignIn(page, email);
    await page.waitForURL(`${base}/account`);
    await page.getByLabel('Name of the passkey').fill('Phone');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByText('Passkey “Phone” added').waitFor();
    await signOut(page);

    await page.getByRole('link', { name: 'Email me a sign-in link' }).click();
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
    let code: string | undefined;
    while (!code) code = /code on the sign-in page: (\d{6})/.exec((await smtp.waitForMail(email)).text)?.[1];
    await page.getByLabel('Code from the mail').fill(code);
    await page.keyboard.press('Enter');
    const usePasskey = page.getByRole('button', { name: 'Use a passkey' });
    await usePasskey.waitFor();
    assert.ok(await usePasskey.evaluate((el) => el === document.activeElement), 'the passkey button has the focus');
    assert.equal(await page.locator('#factor-code').isVisible(), false, 'no code field without TOTP');
    await assertAccessible(page, 'sign-in by mail, second step with a passkey');
    await usePasskey.click();
    await page.waitForURL(`${base}/account`);
    await page.getByRole('cell', { name: 'Phone', exact: true }).waitFor();
    assertClean(w);
    assertSameOrigin(w, base);
  });
});
