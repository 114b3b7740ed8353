import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { base32Decode, totpCode, totpStep } from '../../src/kit/totp.js';
import { startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import { PASSWORD, submitSignIn } from '../helpers/accounts-pages.js';
import { assertAccessible, assertClean, browserSkip, useBrowser } from '../helpers/browser.js';

// Two-step sign-in on the accounts sign-in page, in a real Chromium against the real
// service and PostgreSQL. TOTP is enrolled through the API; the codes are computed
// here from the secret the API showed, as an authenticator app would.

describe('two-step sign-in in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let accounts: RunningAccounts;

  before(async () => {
    accounts = await startAccounts({ listen: true });
  });
  after(async () => {
    await accounts?.close();
  });

  async function post(path: string, body: unknown, token?: string) {
    const res = await fetch(`${accounts.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { data: Record<string, unknown> } };
  }

  /** A user with TOTP on; its secret and recovery codes. */
  async function enrolled(email: string): Promise<{ secret: Buffer; recoveryCodes: string[] }> {
    assert.equal((await post('/auth/register', { name: 'Two Step', email, password: PASSWORD })).status, 201);
    const token = (await post('/auth/login', { email, password: PASSWORD })).body.data.token as string;
    const begun = await fetch(`${accounts.url}/auth/factors/totp`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    const secret = base32Decode(((await begun.json()) as { data: { secret: string } }).data.secret);
    const confirmed = await post('/auth/factors/totp/confirm', { code: totpCode(secret, totpStep(Date.now())) }, token);
    assert.equal(confirmed.status, 200);
    return { secret, recoveryCodes: confirmed.body.data.recovery_codes as string[] };
  }

  it('the password, then the app’s code (a wrong one said in words), lands on the account page; a recovery code works too', async () => {
    const email = `two-step-${Date.now()}@example.com`;
    const { secret, recoveryCodes } = await enrolled(email);
    const { page, w } = await browser.newPage();
    await page.goto(`${accounts.url}/`);
    await submitSignIn(page, email);
    const code = page.getByLabel('Code');
    await code.waitFor();
    assert.ok(await code.evaluate((el) => el === document.activeElement), 'the code field has the focus');
    await assertAccessible(page, 'sign-in second step');
    // A code of the app that is not the current one (the current plus one, mod 10^6).
    await code.fill(String((Number(totpCode(secret, totpStep(Date.now()))) + 1) % 1_000_000).padStart(6, '0'));
    await page.keyboard.press('Enter');
    await page.getByText('That code is not right').waitFor();
    // The recovery code, typed in lower case, by keyboard alone.
    await code.fill(recoveryCodes[0]!.toLowerCase());
    await page.keyboard.press('Enter');
    await page.waitForURL(`${accounts.url}/account`);
    assertClean(w, [401]);
  });
});
