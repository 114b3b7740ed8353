import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { seedAdmin } from '../../src/accounts/admin-seed.js';
import { UsersRepository } from '../../src/accounts/repository.js';
import { createPool, type Pool } from '../../src/kit/db.js';
import { accountsDatabase, startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import { PASSWORD, submitSignIn } from '../helpers/accounts-pages.js';
import {
  assertAccessible,
  assertAccessibleInDark,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  lineBreaks,
  screenshots,
  tabTo,
  useBrowser,
  watchedPage,
} from '../helpers/browser.js';
import type { TestDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/ports.js';
import { linkIn, startSmtp, type TestSmtp } from '../helpers/smtp.js';

// The accounts web pages in a real Chromium, driven by clicks, against the real
// service (in-process, listening on 127.0.0.1) and PostgreSQL. Screenshots of
// every page at 360 and 1,280 pixels go to test-artifacts/screenshots/.

const ADMIN_EMAIL = 'root-admin@example.com';
const ADMIN_PASSWORD = 'the admin passphrase';
const quiet = { info: () => {}, warn: () => {} };
const CHROME_ON_LINUX = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
let seq = 0;
const newEmail = (tag: string) => `${tag}-${Date.now()}-${++seq}@example.com`;

describe('accounts web pages in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let db: TestDatabase;
  let pool: Pool;
  let accounts: RunningAccounts;
  let origin: string;
  let smtp: TestSmtp;
  const mailServices: RunningAccounts[] = [];

  before(async () => {
    db = await accountsDatabase();
    pool = createPool(db.url, { max: 8 });
    accounts = await startAccounts({ pool, listen: true });
    origin = accounts.url;
    assert.equal(await seedAdmin(new UsersRepository(pool), { ADMIN_EMAIL, ADMIN_PASSWORD }, quiet), 'created');
    smtp = await startSmtp();
  });

  after(async () => {
    for (const service of mailServices) await service.close();
    await smtp?.close();
    await accounts?.close();
    await pool?.end();
    await db?.drop();
  });

  /**
   * A service that mails through the test SMTP server; its address is known
   * before it starts, since the mailed links name it (ACCOUNTS_PUBLIC_URL).
   */
  async function mailingService(env: Record<string, string> = {}): Promise<string> {
    const port = await freePort();
    const own = `http://127.0.0.1:${port}`;
    mailServices.push(await startAccounts({ pool, listen: true, port, env: { SMTP_URL: smtp.url, ACCOUNTS_PUBLIC_URL: own, ...env } }));
    return own;
  }

  /** Every request of a page stayed on the service's origin. */
  async function api(path: string, body?: unknown, token?: string, own = origin): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(`${own}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }

  async function register(email: string, name = 'Web Tester', own = origin): Promise<string> {
    const res = await api('/auth/register', { name, email, password: PASSWORD }, undefined, own);
    assert.equal(res.status, 201);
    return res.body.data.id as string;
  }

  /** Signs in through the form and waits for the account page (an admin's: the admin page). */
  async function signIn(page: Page, email: string, password = PASSWORD, own = origin, lands = '/account'): Promise<void> {
    await page.goto(`${own}/`);
    await submitSignIn(page, email, password);
    await page.waitForURL(`${own}${lands}`);
    await page
      .locator(lands === '/admin' ? '#users-table tbody tr' : '#sessions-table tbody tr')
      .first()
      .waitFor();
  }

  /** The header's links as shown. */
  const navigation = (page: Page) => page.locator('.site-header nav li:visible').allTextContents();

  it('registers through the form (every field told at once), lands signed in, and stays signed in over a reload and in a new tab', async () => {
    const taken = newEmail('taken');
    await register(taken);
    const { page, w, context } = await browser.newPage();
    const res = await page.goto(`${origin}/register`);
    assert.equal(res?.status(), 200);
    assert.match(res?.headers()['content-security-policy'] ?? '', /script-src 'self'/);
    await assertAccessible(page, 'register page');
    await screenshots(page, 'accounts-register');

    // Every field's problem at once, under its field, before anything is sent.
    const sent = w.urls.length;
    await page.getByLabel('Name').fill('A');
    await page.getByLabel('Email').fill('not an address');
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Register' }).click();
    await page.locator('#register-error').filter({ hasText: 'Check the 3 fields marked below.' }).waitFor();
    assert.equal(await page.locator('#name-error').textContent(), 'The name must be 2 to 60 characters long.');
    assert.equal(await page.locator('#email-error').textContent(), 'Enter a valid email address, such as name@example.com.');
    assert.equal(await page.locator('#password-error').textContent(), 'The password must be 8 to 72 characters long.');
    for (const label of ['Name', 'Email', 'Password'])
      assert.equal(await page.getByLabel(label).getAttribute('aria-invalid'), 'true', label);
    assert.equal(w.urls.length, sent, 'nothing was sent');
    await assertAccessible(page, 'register page (three problems)');
    await screenshots(page, 'accounts-register-problems');

    // The service's refusals land on their fields too: a taken address, and a common password, in words.
    await page.getByLabel('Name').fill('Ada Lovelace');
    await page.getByLabel('Email').fill(taken);
    await page.getByLabel('Password').fill('password');
    await page.getByRole('button', { name: 'Register' }).click();
    await page.locator('#password-error').filter({ hasText: 'one of the most commonly used passwords' }).waitFor();
    assert.equal(await page.getByLabel('Name').getAttribute('aria-invalid'), null);
    assert.equal(await page.getByLabel('Password').getAttribute('aria-invalid'), 'true');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Register' }).click();
    await page.locator('#email-error').filter({ hasText: 'An account with this email address already exists' }).waitFor();
    assert.equal(await page.getByLabel('Email').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.locator('#password-error').isHidden(), true);
    const email = newEmail('ada');
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Register' }).click();
    await page.waitForURL(`${origin}/account?welcome=1`);
    await page.locator('#account-status').filter({ hasText: 'Welcome, Ada Lovelace' }).waitFor();
    assert.equal(await page.locator('#profile-email').textContent(), email);
    assert.equal(await page.locator('#profile-role').textContent(), 'user');
    await page.locator('#sessions-table tbody tr').first().waitFor();
    assert.equal(await page.locator('#sessions-table tbody tr').count(), 1);

    // The refresh token: only in an HttpOnly, Secure, SameSite=Strict cookie for /auth/browser, which
    // Chromium keeps on http://127.0.0.1. Nothing a script can read: no storage, no document.cookie.
    const cookies = await context.cookies();
    assert.deepEqual(
      cookies.map((c) => ({ name: c.name, path: c.path, httpOnly: c.httpOnly, secure: c.secure, sameSite: c.sameSite })),
      [{ name: 'accounts_refresh', path: '/auth/browser', httpOnly: true, secure: true, sameSite: 'Strict' }],
    );
    assert.match(cookies[0]?.value ?? '', /^[A-Za-z0-9_-]{43}$/);
    const readable = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length, cookie: document.cookie }));
    assert.deepEqual(readable, { session: 0, local: 0, cookie: '' });
    await assertAccessible(page, 'account page');
    await screenshots(page, 'accounts-account');

    // A reload stays signed in (the cookie is traded for a new pair)...
    await page.reload();
    await page.locator('#profile-email').filter({ hasText: email }).waitFor();
    const rotated = (await context.cookies())[0]?.value;
    assert.notEqual(rotated, cookies[0]?.value);
    // ...and so does a second tab: no password asked, the same session, marked as this browser.
    const { page: other, w: ow } = await watchedPage(context);
    await other.goto(`${origin}/account`);
    await other.locator('#profile-email').filter({ hasText: email }).waitFor();
    assert.equal(other.url(), `${origin}/account`);
    await other.locator('#sessions-table tbody tr').first().waitFor();
    assert.equal(await other.locator('#sessions-table tbody tr').count(), 1);
    assert.equal(await other.locator('#sessions-table tbody tr .badge').textContent(), 'this browser');
    assertClean(ow);
    assertSameOrigin(ow, origin);
    await other.close();
    assertClean(w, [400]);
    assertSameOrigin(w, origin);
    await page.close();
  });

  it('sign-in refuses a wrong password in words; a session ended from a second browser is signed out there', async () => {
    const email = newEmail('two');
    await register(email);
    const { page: first, w } = await browser.newPage({ userAgent: CHROME_ON_LINUX });
    await first.goto(`${origin}/`);
    // Signed out: the header offers signing in and registering, nothing else.
    await first.locator('.site-header nav li:visible').first().waitFor();
    assert.deepEqual(await navigation(first), ['Sign in', 'Register']);
    await assertAccessible(first, 'sign-in page');
    await screenshots(first, 'accounts-signin');
    await first.getByLabel('Email').fill(email);
    await first.getByLabel('Password').fill('not the password');
    await first.getByRole('button', { name: 'Sign in', exact: true }).click();
    await first.locator('#signin-error').filter({ hasText: 'Invalid email or password' }).waitFor();
    // A return address from elsewhere is never followed: only this service's pages.
    await first.goto(`${origin}/?next=${encodeURIComponent('//evil.example/account')}`);
    await first.getByLabel('Email').fill(email);
    await first.getByLabel('Password').fill(PASSWORD);
    await first.getByRole('button', { name: 'Sign in', exact: true }).click();
    await first.waitForURL(`${origin}/account`);
    // Signed in as a user: the account, and neither the sign-in links nor the admin page.
    await first.locator('#sessions-table tbody tr').first().waitFor();
    assert.deepEqual(await navigation(first), ['Account']);

    const { page: second, w: sw } = await browser.newPage({ userAgent: 'SecondBrowser/1.0' });
    await signIn(second, email);
    // The first browser lists both sessions and ends the second one's.
    await first.reload();
    const rows = first.locator('#sessions-table tbody tr');
    await rows.nth(1).waitFor();
    // This browser first, marked, its browser named in words; the other as its agent says (it names no known browser).
    assert.equal(await rows.first().locator('td').first().textContent(), 'Chrome on Linux this browser');
    const secondRow = rows.filter({ hasText: 'SecondBrowser/1.0' });
    assert.equal(await secondRow.count(), 1);
    assert.equal(await rows.filter({ hasText: 'this browser' }).count(), 1);
    await secondRow.getByRole('button', { name: /^End session/ }).click();
    await first.locator('#account-status').filter({ hasText: 'Session ended: that browser is signed out.' }).waitFor();
    await rows.filter({ hasText: 'SecondBrowser/1.0' }).waitFor({ state: 'detached' });
    assert.equal(await rows.count(), 1);
    const { rows: live } = await pool.query(
      'SELECT count(*)::int AS n FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1 AND s.ended_at IS NULL',
      [email],
    );
    assert.equal(live[0].n, 1);
    // The second browser's refresh token is dead: its next page load goes to sign-in.
    await second.reload();
    await second.waitForURL(`${origin}/?next=%2Faccount`);
    assert.deepEqual(await second.context().cookies(), [], 'the refused cookie was cleared');
    // Ending this browser's own session signs it out at once, saying so.
    await first.getByRole('button', { name: 'End the session of this browser (signs you out here)' }).click();
    await first.waitForURL(`${origin}/?ended_here=1`);
    await first.locator('#signin-status').filter({ hasText: 'You ended the session of this browser, so you are signed out.' }).waitFor();
    await first.goto(`${origin}/account`);
    await first.waitForURL(`${origin}/?next=%2Faccount`);
    assertClean(w, [401]);
    assertClean(sw, [401]);
    assertSameOrigin(w, origin);
    assertSameOrigin(sw, origin);
  });

  it('sign-in shows the wait once failed sign-ins to the account are spent (429)', async () => {
    const email = newEmail('throttled');
    await register(email);
    for (let i = 0; i < 10; i++) assert.equal((await api('/auth/login', { email, password: 'a wrong password' })).status, 401);
    const { page, w } = await browser.newPage();
    await page.goto(`${origin}/`);
    await submitSignIn(page, email);
    // The wait in minutes, and the button off until it is over.
    await page
      .locator('#signin-error')
      .filter({ hasText: /^Too many failed sign-ins for this account or from your address\. You can try again in 1[45] minutes\.$/ })
      .waitFor();
    assert.equal(await page.getByRole('button', { name: 'Sign in', exact: true }).isDisabled(), true);
    assert.deepEqual(await page.context().cookies(), []);
    await screenshots(page, 'accounts-signin-locked');
    assertClean(w, [429]);
    assertSameOrigin(w, origin);
  });

  it('changes the password: a wrong current one and a mismatch are told; success signs out every other session', async () => {
    const email = newEmail('pw');
    await register(email);
    const { page, w } = await browser.newPage();
    const { page: elsewhere } = await browser.newPage({ userAgent: 'ElsewhereBrowser/1.0' });
    await signIn(elsewhere, email);
    await signIn(page, email);

    await page.getByLabel('Current password').fill('not the password');
    await page.getByLabel('New password', { exact: true }).fill('a brand new passphrase');
    await page.getByLabel('New password again').fill('a brand new passphrase');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.locator('#password-error').filter({ hasText: 'Current password is incorrect' }).waitFor();
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByLabel('New password again').fill('something else entirely');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.locator('#password-error').filter({ hasText: 'The two new passwords differ.' }).waitFor();
    await page.getByLabel('New password again').fill('a brand new passphrase');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.locator('#password-status').filter({ hasText: 'Password changed' }).waitFor();
    // Only this tab's new session is left, and the tab still works (its new pair is in use).
    await page.locator('#sessions-table tbody tr').filter({ hasNotText: 'ElsewhereBrowser' }).first().waitFor();
    assert.equal(await page.locator('#sessions-table tbody tr').count(), 1);
    assert.equal(await page.getByLabel('Current password').inputValue(), '');
    await page.reload();
    await page.locator('#profile-email').filter({ hasText: email }).waitFor();
    assert.equal((await api('/auth/login', { email, password: PASSWORD })).status, 401);
    assert.equal((await api('/auth/login', { email, password: 'a brand new passphrase' })).status, 200);
    // The other browser is signed out at its next step.
    await elsewhere.reload();
    await elsewhere.waitForURL(`${origin}/?next=%2Faccount`);
    assertClean(w, [400]);
    assertSameOrigin(w, origin);
  });

  it('signs out (the refresh token stops working) and signs out everywhere (other browsers too)', async () => {
    const email = newEmail('out');
    await register(email);
    const { page, w } = await browser.newPage();
    await signIn(page, email);
    const token = (await page.context().cookies())[0]?.value;
    assert.ok(token);
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL(`${origin}/?signed_out=1`);
    await page.locator('#signin-status').filter({ hasText: 'You are signed out.' }).waitFor();
    assert.deepEqual(await page.context().cookies(), [], 'sign-out cleared the cookie');
    assert.equal((await api('/auth/refresh', { refresh_token: token })).status, 401);
    await page.goto(`${origin}/account`);
    await page.waitForURL(`${origin}/?next=%2Faccount`);

    const { page: other, w: ow } = await browser.newPage({ userAgent: 'OtherBrowser/1.0' });
    await signIn(other, email);
    await signIn(page, email);
    await page.getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.waitForURL(`${origin}/?signed_out=everywhere`);
    // The other browser's next request is refused, its refresh too: it lands on the sign-in page, told why.
    await other.getByRole('button', { name: 'End the session of this browser (signs you out here)' }).click();
    await other.waitForURL(`${origin}/?ended=1&next=%2Faccount`);
    await other.locator('#signin-status').filter({ hasText: 'Your session has ended' }).waitFor();
    const { rows } = await pool.query(
      'SELECT count(*)::int AS n FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1 AND s.ended_at IS NULL',
      [email],
    );
    assert.equal(rows[0].n, 0);
    assertClean(w);
    assertClean(ow, [401]);
    assertSameOrigin(w, origin);
    assertSameOrigin(ow, origin);
  });

  it('refreshes the access token before it expires, unnoticed: a page open past several lifetimes keeps working', async () => {
    // Its own service, with 3-second access tokens.
    const short = await startAccounts({ pool, listen: true, env: { JWT_EXPIRES_IN: '3' } });
    try {
      const email = newEmail('refresh');
      await register(email, 'Refresh Tester', short.url);
      const { page, w } = await browser.newPage();
      const statuses: Array<[string, number]> = [];
      page.on('response', (r) => statuses.push([new URL(r.url()).pathname, r.status()]));
      await signIn(page, email, PASSWORD, short.url);
      // A second session to end later, with an access token long expired by then.
      assert.equal((await api('/auth/login', { email, password: PASSWORD }, undefined, short.url)).status, 200);
      await page.waitForTimeout(8_000);
      const refreshes = statuses.filter(([p, s]) => p === '/auth/browser/refresh' && s === 200).length;
      assert.ok(refreshes >= 2, `${refreshes} refreshes in 8 s of 3-second tokens`);
      await page.reload();
      await page.locator('#sessions-table tbody tr').nth(1).waitFor();
      await page.waitForTimeout(4_000);
      await page
        .getByRole('button', { name: /^End session/ })
        .nth(0)
        .click();
      await page.locator('#account-status').filter({ hasText: 'Session ended: that browser is signed out.' }).waitFor();
      // No request was ever refused: every call carried a live token.
      assert.deepEqual(
        statuses.filter(([, s]) => s >= 400),
        [],
      );
      assertClean(w);
      assertSameOrigin(w, short.url);
    } finally {
      await short.close();
    }
  });

  it('a tab whose refresh timer did not run (asleep) refreshes on the 401 and repeats the call, unnoticed', async () => {
    const short = await startAccounts({ pool, listen: true, env: { JWT_EXPIRES_IN: '2' } });
    try {
      const email = newEmail('asleep');
      await register(email, 'Sleepy Tab', short.url);
      const { page, w } = await browser.newPage();
      const calls: string[] = [];
      page.on('response', (r) => calls.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`));
      await page.clock.install();
      await signIn(page, email, PASSWORD, short.url);
      assert.equal((await api('/auth/login', { email, password: PASSWORD }, undefined, short.url)).status, 200);
      // The page's clock stops, as in a sleeping tab: its planned refresh never fires while the token expires.
      await page.clock.pauseAt(Date.now() + 1000);
      await new Promise((r) => setTimeout(r, 3500));
      calls.length = 0;
      await page.getByRole('button', { name: 'End the session of this browser (signs you out here)' }).click();
      await page.waitForURL(`${short.url}/?ended_here=1`);
      // The call refused with the expired token, one refresh, the same call again.
      const ended = calls.filter((c) => /^(DELETE|POST) /.test(c)).slice(0, 3);
      assert.equal(ended.length, 3, ended.join(', '));
      assert.match(ended[0] ?? '', /^DELETE \/auth\/sessions\/[0-9a-f-]{36} 401$/);
      assert.equal(ended[1], 'POST /auth/browser/refresh 200');
      assert.equal(ended[2], ended[0]?.replace(/401$/, '200'));
      assertClean(w, [401]);
      assertSameOrigin(w, short.url);
    } finally {
      await short.close();
    }
  });

  it('admin: pages and searches users, changes a role, bans, deletes after confirming, shows the last admin 409 and filters the audit log', async () => {
    const tag = `adm${Date.now()}`;
    const target = newEmail(`${tag}-target`);
    const targetId = await register(target, 'Target Person');
    // 24 more accounts (no bcrypt: they never sign in), so the users span pages of 20.
    await pool.query(
      `INSERT INTO users (name, email, password_hash) SELECT 'Filler ' || n, $1 || '-filler-' || n || '@example.com', password_hash FROM users, generate_series(1, 24) AS n WHERE id = $2`,
      [tag, targetId],
    );
    const { rows: countRows } = await pool.query('SELECT count(*)::int AS n FROM users');
    const total = countRows[0].n as number;
    const { page, w } = await browser.newPage();
    // An admin lands on the admin page, and the header offers it.
    await signIn(page, ADMIN_EMAIL, ADMIN_PASSWORD, origin, '/admin');
    assert.deepEqual(await navigation(page), ['Account', 'Admin']);
    await page
      .locator('#users-total')
      .filter({ hasText: `(${total})` })
      .waitFor();
    const rows = page.locator('#users-table tbody tr');
    assert.equal(await rows.count(), 20);
    assert.equal(await page.locator('#users-page').textContent(), `Page 1 of ${Math.ceil(total / 20)}`);
    assert.equal(await page.getByRole('button', { name: 'Previous page' }).first().isDisabled(), true);
    await page.locator('#users-next').click();
    await page.locator('#users-page').filter({ hasText: 'Page 2 of' }).waitFor();
    assert.equal(await rows.count(), Math.min(20, total - 20));
    await assertAccessible(page, 'admin page');
    await assertAccessibleInDark(page, 'admin page');
    // At 1,280 px an email wraps, if at all, after its @ or a dot, never inside a word.
    for (const cell of await page.locator('#users-table td[data-label="Email"]').all()) {
      const breaks = await lineBreaks(cell);
      assert.ok(
        breaks.every(([before]) => before === '@' || before === '.'),
        `${await cell.textContent()} breaks at ${JSON.stringify(breaks)}`,
      );
    }
    await screenshots(page, 'accounts-admin');

    // Search: by a part of the email, across every page.
    await page.getByLabel('Search by name or email').fill(tag);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('#users-total').filter({ hasText: '(25 matching)' }).waitFor();
    assert.equal(await page.locator('#users-page').textContent(), 'Page 1 of 2');
    await page.locator('#users-next').click();
    await page.locator('#users-page').filter({ hasText: 'Page 2 of 2' }).waitFor();
    assert.equal(await rows.count(), 5);
    await page.getByLabel('Search by name or email').fill('target person');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('#users-total').filter({ hasText: '(1 matching)' }).waitFor();
    // The server searches: each search page is one request of 20 carrying q, and nothing reads the accounts wholesale.
    const listings = w.urls.filter((u) => u.startsWith(`${origin}/admin/users?`)).map((u) => new URL(u).searchParams);
    assert.ok(
      listings.every((p) => p.get('per_page') === '20'),
      'a listing asked for more than a page of 20',
    );
    const searched = listings.filter((p) => p.has('q')).map((p) => `${p.get('q')} page ${p.get('page')}`);
    assert.deepEqual(searched, [`${tag} page 1`, `${tag} page 2`, 'target person page 1']);

    // Making an admin asks first: cancelled, nothing changes.
    await page.getByRole('button', { name: `Make admin: ${target}` }).click();
    const confirm = page.getByRole('dialog', { name: 'Make Target Person an admin?' });
    await confirm.waitFor();
    await assertAccessible(page, 'admin confirm dialog');
    await screenshots(page, 'accounts-admin-confirm');
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    await confirm.waitFor({ state: 'hidden' });
    assert.equal((await pool.query('SELECT role FROM users WHERE id = $1', [targetId])).rows[0].role, 'user');
    // Role change, confirmed, then back; ban, confirmed, then the banned login is refused.
    await page.getByRole('button', { name: `Make admin: ${target}` }).click();
    await confirm.getByRole('button', { name: 'Make admin' }).click();
    await page
      .locator('#admin-status')
      .filter({ hasText: `${target} is now an admin.` })
      .waitFor();
    await page.getByRole('button', { name: `Make user: ${target}` }).click();
    await page
      .locator('#admin-status')
      .filter({ hasText: `${target} is now a user.` })
      .waitFor();
    await page.getByRole('button', { name: `Ban ${target}` }).click();
    await page.getByRole('dialog', { name: 'Ban Target Person?' }).getByRole('button', { name: 'Ban' }).click();
    await page
      .locator('#admin-status')
      .filter({ hasText: `${target} is banned` })
      .waitFor();
    await page.locator(`tr[data-user="${targetId}"] .badge`).filter({ hasText: 'banned' }).waitFor();
    assert.equal((await api('/auth/login', { email: target, password: PASSWORD })).status, 403);
    const { page: bannedTab, w: bw } = await browser.newPage();
    await bannedTab.goto(`${origin}/`);
    await submitSignIn(bannedTab, target);
    await bannedTab.locator('#signin-error').filter({ hasText: 'This account has been banned.' }).waitFor();
    assertClean(bw, [403]);
    await bannedTab.close();
    await page.getByRole('button', { name: `Unban ${target}` }).click();
    await page
      .locator('#admin-status')
      .filter({ hasText: `${target} is no longer banned.` })
      .waitFor();
    assert.equal((await api('/auth/login', { email: target, password: PASSWORD })).status, 200);

    // The audit log of that user, by the row's button: the changes above, newest first.
    await page.getByRole('button', { name: `Audit entries of ${target}` }).click();
    await page.locator('#audit-total').filter({ hasText: 'matching' }).waitFor();
    assert.equal(await page.getByLabel('User (email or id)').inputValue(), target);
    const events = await page.locator('#audit-table tbody tr').evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.event));
    assert.deepEqual(events.slice(0, 7), [
      'login_succeeded',
      'user_unbanned',
      'login_refused_banned',
      'login_refused_banned',
      'user_banned',
      'role_changed',
      'role_changed',
    ]);
    await page.getByLabel('Event').selectOption('role_changed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.locator('#audit-total').filter({ hasText: '(2 matching)' }).waitFor();
    const newest = (await page.locator('#audit-table tbody tr').first().textContent()) ?? '';
    assert.match(newest, /from: admin/);
    assert.match(newest, /to: user/);
    // The same filter by the email, typed in any case.
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.locator('#audit-total').filter({ hasNotText: 'matching' }).waitFor();
    await page.getByLabel('User (email or id)').fill(target.toUpperCase());
    await page.getByLabel('Event').selectOption('role_changed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.locator('#audit-total').filter({ hasText: '(2 matching)' }).waitFor();
    // An address of no account, and text that is neither, are told, not sent as they are.
    await page.getByLabel('User (email or id)').fill(newEmail('nobody'));
    await page.getByRole('button', { name: 'Filter' }).click();
    await page
      .locator('#audit-error')
      .filter({ hasText: /^No account has the email address / })
      .waitFor();
    await page.getByLabel('User (email or id)').fill('not-a-uuid');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.locator('#audit-error').filter({ hasText: 'Enter an email address or a user id.' }).waitFor();
    // Paging the whole log.
    await page.getByRole('button', { name: 'Clear' }).click();
    await page
      .locator('#audit-total')
      .filter({ hasNotText: 'matching' })
      .filter({ hasText: /\(\d+\)/ })
      .waitFor();
    const auditTotal = Number(/\((\d+)\)/.exec((await page.locator('#audit-total').textContent()) ?? '')?.[1]);
    assert.ok(auditTotal > 20, `${auditTotal} audit entries`);
    await page.locator('#audit-next').click();
    await page.locator('#audit-page').filter({ hasText: 'Page 2 of' }).waitFor();
    // Details read as words: a hash (of a failed login's address) is cut to its first digits, not 64 of them.
    await page.getByLabel('Event').selectOption('login_failed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.locator('#audit-total').filter({ hasText: 'matching' }).waitFor();
    const failedLogins = (await page.locator('#audit-table tbody').textContent()) ?? '';
    assert.match(failedLogins, /[0-9a-f]{8}…/);
    assert.doesNotMatch(failedLogins, /[0-9a-f]{32}/);
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.locator('#audit-total').filter({ hasNotText: 'matching' }).waitFor();

    // Delete: cancel keeps the account; confirming removes it.
    await page.getByRole('button', { name: `Delete ${target}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete Target Person?' });
    await dialog.waitFor({ state: 'visible' });
    await assertAccessible(page, 'admin delete dialog');
    await screenshots(page, 'accounts-admin-delete');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal((await pool.query('SELECT 1 FROM users WHERE id = $1', [targetId])).rowCount, 1);
    await page.getByRole('button', { name: `Delete ${target}` }).click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page
      .locator('#admin-status')
      .filter({ hasText: `${target} deleted.` })
      .waitFor();
    await page.locator('#users-total').filter({ hasText: '(0 matching)' }).waitFor();
    assert.equal((await pool.query('SELECT 1 FROM users WHERE id = $1', [targetId])).rowCount, 0);

    // The last admin: demoting or deleting themselves is the API's 409, shown as it says.
    await page.getByLabel('Search by name or email').fill(ADMIN_EMAIL);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('#users-total').filter({ hasText: '(1 matching)' }).waitFor();
    await page.getByRole('button', { name: `Make user: ${ADMIN_EMAIL}` }).click();
    await page.locator('#admin-error').filter({ hasText: 'The last admin cannot be demoted, banned or deleted.' }).waitFor();
    await page.getByRole('button', { name: `Delete ${ADMIN_EMAIL}` }).click();
    await dialog
      .or(page.getByRole('dialog', { name: 'Delete Administrator?' }))
      .getByRole('button', { name: 'Delete' })
      .click();
    await page.locator('#delete-error').filter({ hasText: 'The last admin cannot be demoted, banned or deleted.' }).waitFor();
    await page.getByRole('dialog', { name: 'Delete Administrator?' }).getByRole('button', { name: 'Cancel' }).click();
    const { rows: admins } = await pool.query("SELECT count(*)::int AS n FROM users WHERE role = 'admin'");
    assert.equal(admins[0].n, 1);

    // On a phone the page stays a page, not a scroll of thousands of pixels: ten cards to a list.
    await page.setViewportSize({ width: 390, height: 800 });
    await page.reload();
    await page.locator('#users-table tbody tr').nth(9).waitFor();
    await page
      .locator('#audit-total')
      .filter({ hasText: /\(\d+\)/ })
      .waitFor();
    assert.equal(await page.locator('#users-table tbody tr').count(), 10);
    assert.equal(await page.locator('#audit-table').isHidden(), true, 'the audit log is folded');
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    assert.ok(height < 4500, `the admin page is ${height} px tall at 390 px`);
    await screenshots(page, 'accounts-admin-phone');
    // Unfolded, it shows ten entries too.
    await page.locator('#audit-details summary').click();
    await page.locator('#audit-table tbody tr').nth(9).waitFor();
    assert.equal(await page.locator('#audit-table tbody tr').count(), 10);
    await assertAccessible(page, 'admin page on a phone');

    assertClean(w, [400, 409]);
    assertSameOrigin(w, origin);
  });

  it('a user who opens the admin page is told it is for administrators, and no admin request is made', async () => {
    const email = newEmail('plain');
    await register(email);
    const { page, w } = await browser.newPage();
    await signIn(page, email);
    await page.goto(`${origin}/admin`);
    await page.locator('#admin-error').filter({ hasText: 'This page is for administrators.' }).waitFor();
    assert.equal(await page.locator('#admin').isHidden(), true);
    assert.deepEqual(
      w.urls.filter((u) => u.includes('/admin/')),
      [],
    );
    const { rows } = await pool.query("SELECT count(*)::int AS n FROM audit_log WHERE event = 'access_denied'");
    assert.equal(rows[0].n, 0);
    assertClean(w);
    assertSameOrigin(w, origin);
  });

  it('the reset page checks its link as it opens, before a password is typed; the verify page fills in the signed-in address', async () => {
    const { page, w } = await browser.newPage();
    await page.goto(`${origin}/reset-password`);
    assert.equal(await page.locator('#request-form').isVisible(), true);
    assert.equal(await page.locator('#confirm-form').isHidden(), true);
    await assertAccessible(page, 'reset-password page (request)');
    await screenshots(page, 'accounts-reset-request');
    // As from a mail, a link whose token does not work: told at once, the token out of the address bar,
    // no new-password form to fill in for nothing, and a new link offered.
    await page.goto('about:blank');
    await page.goto(`${origin}/reset-password#token=abc123`);
    await page
      .locator('#reset-error')
      .filter({ hasText: 'This reset link is invalid, already used or expired. Ask for a new one below.' })
      .waitFor();
    assert.equal(page.url(), `${origin}/reset-password`);
    assert.equal(await page.locator('#confirm-form').isHidden(), true);
    assert.equal(await page.locator('#request-form').isVisible(), true);
    assert.deepEqual(
      w.urls.filter((u) => u.includes('/auth/password-reset')).map((u) => new URL(u).pathname),
      ['/auth/password-reset/check'],
    );
    await assertAccessible(page, 'reset-password page (spent link)');
    await screenshots(page, 'accounts-reset-spent-link');

    // Signed in, the verify page's address is the account's own.
    const email = newEmail('prefill');
    await register(email);
    await signIn(page, email);
    await page.goto(`${origin}/verify-email`);
    await page.waitForFunction((want) => (document.getElementById('resend-email') as HTMLInputElement).value === want, email);
    assert.deepEqual(await navigation(page), ['Account']);
    await assertAccessible(page, 'verify-email page');
    await screenshots(page, 'accounts-verify');
    assertClean(w, [400]);
    assertSameOrigin(w, origin);
  });

  it('by keyboard alone a user signs in and changes the password; at 360 px no page scrolls sideways', async () => {
    const email = newEmail('keys');
    await register(email, 'Keyboard User With A Rather Long Name');
    const { page, w } = await browser.newPage({
      userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) a-long-user-agent-without-spaces-to-wrap/1.0',
    });
    await page.setViewportSize({ width: 360, height: 800 });
    await page.goto(`${origin}/`);
    await assertNoSidewaysScroll(page, 'the sign-in page');
    await tabTo(page, 'email');
    await page.keyboard.type(email);
    await tabTo(page, 'password');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${origin}/account`);
    await page.locator('#sessions-table tbody tr').first().waitFor();
    await assertNoSidewaysScroll(page, 'the account page');
    // An address wraps only between its groups, never inside a number (here a long IPv6 one at 360 px).
    await pool.query(
      `INSERT INTO sessions (user_id, refresh_token_hash, created_at, last_used_at, ip, user_agent)
       SELECT id, decode(md5(random()::text) || md5(random()::text), 'hex'), now(), now(), '2001:db8:85a3:1234:5678:8a2e:3700:7334', 'Phone/1'
       FROM users WHERE email = $1`,
      [email],
    );
    await page.reload();
    const ipv6 = page.locator('#sessions-table td[data-label="Address"]').filter({ hasText: '2001:db8' });
    await ipv6.waitFor();
    const breaks = await lineBreaks(ipv6);
    assert.ok(breaks.length > 0, 'the address fits on one line: the check proves nothing');
    assert.ok(
      breaks.every(([before]) => before === ':' || before === '.'),
      `the address wraps inside a number: ${JSON.stringify(breaks)}`,
    );
    await tabTo(page, 'current-password');
    await page.keyboard.type(PASSWORD);
    await tabTo(page, 'new-password');
    await page.keyboard.type('typed by keyboard only');
    await tabTo(page, 'confirm-password');
    await page.keyboard.type('typed by keyboard only');
    await page.keyboard.press('Enter');
    await page.locator('#password-status').filter({ hasText: 'Password changed' }).waitFor();
    for (const path of ['/register', '/reset-password', '/verify-email', '/admin']) {
      await page.goto(`${origin}${path}`);
      await page.locator('h1').waitFor();
      await assertNoSidewaysScroll(page, `the page ${path}`);
    }
    assertClean(w);
    assertSameOrigin(w, origin);
    // The admin page, in a tab of an admin.
    const { page: admin, w: aw } = await browser.newPage();
    await admin.setViewportSize({ width: 360, height: 800 });
    await signIn(admin, ADMIN_EMAIL, ADMIN_PASSWORD, origin, '/admin');
    await admin.locator('#users-table tbody tr').first().waitFor();
    await admin.locator('#audit-details summary').click();
    await admin.locator('#audit-table tbody tr').first().waitFor();
    await assertNoSidewaysScroll(admin, 'the admin page');
    assertClean(aw);
    assertSameOrigin(aw, origin);
  });

  it('resets a forgotten password from the mailed link; the link then works no more', async () => {
    const own = await mailingService();
    const email = newEmail('forgot');
    await register(email, 'Forgetful', own);
    const { page, w } = await browser.newPage();
    await page.goto(`${own}/`);
    await page.getByRole('link', { name: 'Reset it' }).click();
    await page.waitForURL(`${own}/reset-password`);
    // An unknown address is told exactly what a known one is.
    await page.getByLabel('Email').fill(newEmail('nobody'));
    await page.getByRole('button', { name: 'Send the link' }).click();
    const unknownSaid =
      (await page.locator('#reset-status').filter({ hasText: 'a link to reset its password is on its way' }).textContent()) ?? '';
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Send the link' }).click();
    await page.locator('#reset-status').filter({ hasText: email }).waitFor();
    assert.equal((await page.locator('#reset-status').textContent())?.replace(email, 'X'), unknownSaid.replace(/\S+@example\.com/, 'X'));
    const mail = await smtp.waitForMail(email, { timeout: 15_000 });
    const link = linkIn(mail, `${own}/reset-password#token=`);

    // The link, opened as from the mail: the token leaves the address bar at once.
    const { page: reset, w: rw } = await browser.newPage();
    await reset.goto(link);
    await reset.locator('#confirm-form').waitFor({ state: 'visible' });
    assert.equal(reset.url(), `${own}/reset-password`);
    // The link was checked as the page opened: the form names its account.
    assert.equal(await reset.locator('#confirm-for').textContent(), `For the account ${email}.`);
    await assertAccessible(reset, 'reset-password page (new password)');
    await screenshots(reset, 'accounts-reset-confirm');
    // The mismatch is caught before anything is sent; the service's rules come back in words.
    const sent = rw.urls.length;
    await reset.getByLabel('New password', { exact: true }).fill('a fresh passphrase');
    await reset.getByLabel('New password again').fill('another passphrase');
    await reset.getByRole('button', { name: 'Set the new password' }).click();
    await reset.locator('#reset-error').filter({ hasText: 'The two passwords differ.' }).waitFor();
    assert.equal(rw.urls.length, sent);
    await reset.getByLabel('New password', { exact: true }).fill('short');
    await reset.getByLabel('New password again').fill('short');
    await reset.getByRole('button', { name: 'Set the new password' }).click();
    await reset.locator('#reset-error').filter({ hasText: 'The new password must be 8 to 72 characters long.' }).waitFor();
    await reset.getByLabel('New password', { exact: true }).fill('letmein1');
    await reset.getByLabel('New password again').fill('letmein1');
    await reset.getByRole('button', { name: 'Set the new password' }).click();
    await reset.locator('#reset-error').filter({ hasText: 'one of the most commonly used passwords' }).waitFor();
    await reset.getByLabel('New password', { exact: true }).fill('remembered at last');
    await reset.getByLabel('New password again').fill('remembered at last');
    await reset.getByRole('button', { name: 'Set the new password' }).click();
    await reset.locator('#reset-status').filter({ hasText: 'Your password has been changed' }).waitFor();
    assert.equal((await api('/auth/login', { email, password: PASSWORD }, undefined, own)).status, 401);
    assert.equal((await api('/auth/login', { email, password: 'remembered at last' }, undefined, own)).status, 200);
    // The same link again: told as the page opens, before any password is typed, and a new one offered.
    await reset.goto('about:blank');
    await reset.goto(link);
    await reset.locator('#reset-error').filter({ hasText: 'This reset link is invalid, already used or expired' }).waitFor();
    assert.equal(await reset.locator('#request-form').isVisible(), true);
    assert.equal(await reset.locator('#confirm-form').isHidden(), true);
    assert.equal((await api('/auth/login', { email, password: 'remembered at last' }, undefined, own)).status, 200);
    assertClean(w);
    assertClean(rw, [400]);
    assertSameOrigin(w, own);
    assertSameOrigin(rw, own);
  });

  it('with verification required: registering says where the link went, sign-in waits for it, the mailed link verifies', async () => {
    const own = await mailingService({ REQUIRE_EMAIL_VERIFICATION: 'true' });
    const email = newEmail('verify');
    const { page, w } = await browser.newPage();
    await page.goto(`${own}/register`);
    await page.getByLabel('Name').fill('Vera Fied');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Register' }).click();
    await page
      .locator('#register-status')
      .filter({ hasText: `Follow the link sent to ${email}` })
      .waitFor();
    await page.goto(`${own}/`);
    await submitSignIn(page, email);
    await page.locator('#signin-error').filter({ hasText: 'verify your email' }).waitFor();
    await page.getByRole('link', { name: 'Send the verification link again' }).click();
    await page.waitForURL(`${own}/verify-email`);
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Send the link' }).click();
    await page
      .locator('#verify-status')
      .filter({ hasText: `If ${email} has an account waiting for verification` })
      .waitFor();

    const mail = await smtp.waitForMail(email, { timeout: 15_000 });
    const link = linkIn(mail, `${own}/verify-email#token=`);
    const { page: verify, w: vw } = await browser.newPage();
    await verify.goto(link);
    await verify.locator('#verify-status').filter({ hasText: 'Your email address is verified.' }).waitFor();
    assert.equal(verify.url(), `${own}/verify-email`);
    await assertAccessible(verify, 'verify-email page (verified)');
    // Verified: the sign-in goes through, and the profile says so.
    await signIn(page, email, PASSWORD, own);
    assert.equal(await page.locator('#profile-verified').textContent(), 'verified');
    assert.equal(await page.getByRole('link', { name: 'Verify it' }).isHidden(), true);
    // The link works once.
    await verify.goto('about:blank');
    await verify.goto(link);
    await verify.locator('#verify-error').filter({ hasText: 'This verification link is invalid, already used or expired' }).waitFor();
    assertClean(w, [403]);
    assertClean(vw, [400]);
    assertSameOrigin(w, own);
    assertSameOrigin(vw, own);
  });

  it('without mail configured, the reset and resend forms say the service does not send mail (503)', async () => {
    const { page, w } = await browser.newPage();
    await page.goto(`${origin}/reset-password`);
    await page.getByLabel('Email').fill(newEmail('nomail'));
    await page.getByRole('button', { name: 'Send the link' }).click();
    await page.locator('#reset-error').filter({ hasText: 'Password reset by email is not available on this service' }).waitFor();
    assert.equal(await page.locator('#reset-status').isHidden(), true);
    await page.goto(`${origin}/verify-email`);
    await page.getByLabel('Email').fill(newEmail('nomail'));
    await page.getByRole('button', { name: 'Send the link' }).click();
    await page.locator('#verify-error').filter({ hasText: 'Email verification is not available on this service' }).waitFor();
    // A user who never verified sees it on the profile, with the way to do it.
    const email = newEmail('unverified');
    await register(email);
    await signIn(page, email);
    assert.equal(await page.locator('#profile-verified').textContent(), 'not verified');
    assert.equal(await page.getByRole('link', { name: 'Verify it' }).getAttribute('href'), '/verify-email');
    assertClean(w, [503]);
    assertSameOrigin(w, origin);
  });
});
