// Sign-in by mail (EMAIL_SIGNIN) in a real Chromium against the real service, PostgreSQL and a
// real SMTP server: the sign-in page offers it, the mail's code signs in on the page, and the
// mail's link opens a page that signs in only when the person presses its button, so opening it
// (as a mail scanner does) spends nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import { registerAccount } from '../helpers/accounts-pages.js';
import {
  assertAccessible,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  screenshots,
  useBrowser,
} from '../helpers/browser.js';
import { freePort } from '../helpers/ports.js';
import { linkIn, startSmtp, type TestSmtp } from '../helpers/smtp.js';

describe('sign-in by mail in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let smtp: TestSmtp;
  let accounts: RunningAccounts;
  let origin: string;

  before(async () => {
    smtp = await startSmtp();
    // The mailed links name the service, so its address is fixed before it starts.
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    accounts = await startAccounts({ listen: true, port, env: { SMTP_URL: smtp.url, ACCOUNTS_PUBLIC_URL: origin, EMAIL_SIGNIN: 'true' } });
  });
  after(async () => {
    await accounts?.close();
    await smtp?.close();
  });

  async function mailFor(email: string): Promise<{ link: string; code: string }> {
    const mail = await smtp.waitForMail(email);
    const code = /code on the sign-in page: (\d{6})/.exec(mail.text)?.[1];
    assert.ok(code, mail.text);
    return { link: linkIn(mail, `${origin}/email-signin#token=`), code };
  }

  it('from the sign-in page: the offer, the mailed code typed on the page, signed in on the account page', async () => {
    const { email } = await registerAccount(origin, 'mail-code', 'Mail Reader');
    const { page, w, context } = await browser.newPage();
    await page.goto(`${origin}/`);
    await page.getByRole('link', { name: 'Email me a sign-in link' }).click();
    await page.waitForURL(`${origin}/email-signin`);
    await assertAccessible(page, 'sign-in by mail, request');
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
    await page.locator('#mail-status').waitFor();
    const { code } = await mailFor(email);
    await assertAccessible(page, 'sign-in by mail, code');
    await assertNoSidewaysScroll(page, 'sign-in by mail, code');
    await screenshots(page, 'accounts-email-signin-code');
    await page.getByLabel('Code from the mail').fill(code);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${origin}/account`);
    await page.getByText(email).first().waitFor();
    assertClean(w);
    assertSameOrigin(w, origin);
    await context.close();
  });

  it("the mail's link: opening it spends nothing; pressing Sign in signs in, once", async () => {
    const { email } = await registerAccount(origin, 'mail-link', 'Mail Reader');
    const asked = await fetch(`${origin}/auth/email-signin`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email }),
    });
    assert.equal(asked.status, 200);
    const { link } = await mailFor(email);

    // A scanner's visit: the page is fetched and rendered, nothing is pressed.
    const scanner = await browser.newContext({ viewport: { width: 390, height: 800 } });
    const scanned = await scanner.newPage();
    await scanned.goto(link);
    await scanned.getByRole('button', { name: 'Sign in' }).waitFor();
    await scanner.close();

    const { page, w, context } = await browser.newPage({ viewport: { width: 390, height: 800 } });
    await page.goto(link);
    const signInButton = page.getByRole('button', { name: 'Sign in' });
    await signInButton.waitFor();
    await assertAccessible(page, 'sign-in by mail, link');
    await screenshots(page, 'accounts-email-signin-link');
    assert.equal(page.url(), `${origin}/email-signin`, 'the token leaves the address bar');
    await signInButton.click();
    await page.waitForURL(`${origin}/account`);
    await page.getByText(email).first().waitFor();
    assertClean(w);
    assertSameOrigin(w, origin);

    // The same link again: used up, said in words.
    const again = await context.newPage();
    await again.goto(link);
    await again.getByRole('button', { name: 'Sign in' }).click();
    await again.locator('#mail-error').waitFor();
    assert.match((await again.locator('#mail-error').textContent()) ?? '', /\S/);
    await context.close();
  });
});
