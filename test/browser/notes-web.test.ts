import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { assertAccessible, assertClean, assertNoSidewaysScroll, assertSameOrigin, browserSkip, launchBrowser, type PageWatch, screenshots, watch } from '../helpers/browser.js';
import { uniqueEmail } from '../helpers/emails.js';
import { call } from '../helpers/http.js';
import { startIdp, type RunningIdp } from '../helpers/idp.js';
import { PASSWORD, signUp, startNotes, startUpstream, storedNote, type RunningNotes } from '../helpers/notes.js';
import { forwardPort, freePort } from '../helpers/ports.js';
import { linkIn, startSmtp } from '../helpers/smtp.js';

// The notes web app in a real Chromium, driven by clicks, against the real
// notes service and the real idp (both in-process on 127.0.0.1, real
// PostgreSQL with row-level security). Screenshots at 360 and 1,280 pixels go
// to test-artifacts/screenshots/.

describe('notes web app in Chromium', { skip: browserSkip }, () => {
  let idp: RunningIdp;
  let notes: RunningNotes;
  let browser: Browser;
  const contexts: BrowserContext[] = [];

  before(async () => {
    idp = await startIdp();
    notes = await startNotes(idp);
    browser = await launchBrowser();
  });

  after(async () => {
    for (const context of contexts) await context.close();
    await browser?.close();
    await notes?.close();
    await idp?.close();
  });

  async function newContext(): Promise<BrowserContext> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    context.setDefaultTimeout(20_000);
    contexts.push(context);
    return context;
  }

  /** Every request of a page went to the notes service's own origin. */
  async function signInByForm(page: Page, email: string, password = PASSWORD): Promise<void> {
    const form = page.locator('#signin-form');
    await form.getByLabel('Email').fill(email);
    await form.getByLabel('Password').fill(password);
    await form.getByRole('button', { name: 'Sign in' }).click();
  }

  /** The titles of the notes on the page, in order, once the list shows `total`. */
  async function titlesWhenTotal(page: Page, total: string): Promise<string[]> {
    await page.locator('#total').filter({ hasText: total }).waitFor();
    return page.locator('#notes h3').allTextContents();
  }

  it('signs up, adds, pages, searches, edits in place, deletes after a confirmation, and signs out', async () => {
    const page = await (await newContext()).newPage();
    const w = watch(page);
    const home = await page.goto(`${notes.url}/`);
    assert.equal(home?.status(), 200);
    assert.match(home?.headers()['content-security-policy'] ?? '', /script-src 'self'/);
    await page.locator('#signed-out').waitFor();
    await assertAccessible(page, 'signed out');
    await assertNoSidewaysScroll(page, 'signed out');
    await screenshots(page, 'notes-signed-out');

    // The provider's refusal of a weak password, in its words, beside the form.
    const email = uniqueEmail('web');
    const signup = page.locator('#signup-form');
    await signup.getByLabel('Email').fill(email);
    await signup.getByLabel('Password').fill('abc');
    await signup.getByRole('button', { name: 'Create account' }).click();
    await page.locator('#signup-error').waitFor();
    assert.match(await page.locator('#signup-error').textContent() ?? '', /password/i);
    assert.equal(await signup.getByLabel('Password').getAttribute('aria-invalid'), 'true');

    await signup.getByLabel('Password').fill(PASSWORD);
    await signup.getByRole('button', { name: 'Create account' }).click();
    await page.locator('#signed-in').waitFor();
    assert.equal(await page.locator('#who').textContent(), email);
    await page.locator('#empty').filter({ hasText: 'No notes yet.' }).waitFor();
    assert.equal(await page.locator('#new-title').evaluate((n) => n === document.activeElement), true);

    // A title is required: nothing is sent without one.
    const posts = w.urls.length;
    await page.getByRole('button', { name: 'Add note' }).click();
    assert.equal(await page.locator('#create-error').textContent(), 'Enter a title.');
    assert.equal(w.urls.length, posts);

    await page.getByLabel('Title', { exact: true }).fill('groceries');
    await page.getByLabel('Text (optional)').fill('milk, eggs');
    await page.getByRole('button', { name: 'Add note' }).click();
    assert.deepEqual(await titlesWhenTotal(page, '(1)'), ['groceries']);
    assert.equal(await page.locator('#notes .note-body').textContent(), 'milk, eggs');
    assert.equal(await page.getByLabel('Title', { exact: true }).inputValue(), '');

    // Eleven more through the API (a second session of the same user); the page shows them after a
    // reload, which resumes the tab's session from its refresh token without a sign-in.
    const api = await call(notes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
    for (let i = 1; i <= 11; i++) {
      assert.equal((await call(notes.url, 'POST', '/notes', { token: api.body.access_token, body: { title: `note ${i}` } })).status, 201);
    }
    await page.reload();
    const firstPage = await titlesWhenTotal(page, '(12)');
    assert.deepEqual(firstPage, ['note 11', 'note 10', 'note 9', 'note 8', 'note 7', 'note 6', 'note 5', 'note 4', 'note 3', 'note 2']);
    assert.equal(await page.locator('#page-label').textContent(), 'Page 1 of 2');
    assert.equal(await page.getByRole('button', { name: 'Previous page' }).isDisabled(), true);
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-label').filter({ hasText: 'Page 2 of 2' }).waitFor();
    assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['note 1', 'groceries']);
    assert.equal(await page.getByRole('button', { name: 'Next page' }).isDisabled(), true);

    // Search: title or text, ignoring case.
    await page.getByLabel('Search titles and text').fill('MILK');
    await page.getByRole('button', { name: 'Search' }).click();
    assert.deepEqual(await titlesWhenTotal(page, '(1 matching)'), ['groceries']);

    // Edit in place; Escape leaves it as it was, Save keeps the change.
    await page.getByRole('button', { name: 'Edit groceries' }).click();
    const editor = page.getByRole('form', { name: 'Edit groceries' });
    await editor.getByLabel('Text').fill('changed my mind');
    await editor.getByLabel('Text').press('Escape');
    await page.locator('#notes .note-body').filter({ hasText: 'milk, eggs' }).waitFor();
    await page.getByRole('button', { name: 'Edit groceries' }).click();
    await editor.getByLabel('Title').fill('');
    await editor.getByRole('button', { name: 'Save' }).click();
    assert.equal(await editor.getByRole('alert').textContent(), 'Enter a title.');
    await editor.getByLabel('Title').fill('shopping');
    await editor.getByLabel('Text').fill('milk, eggs, bread');
    await assertAccessible(page, 'editing a note');
    await assertNoSidewaysScroll(page, 'editing a note');
    await editor.getByRole('button', { name: 'Save' }).click();
    await page.locator('#notes-status').filter({ hasText: 'Note saved.' }).waitFor();
    assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['shopping']);
    assert.equal(await page.locator('#notes .note-body').textContent(), 'milk, eggs, bread');
    assert.match(await page.locator('#notes .note-meta').textContent() ?? '', /edited/);
    const id = Number(await page.locator('#notes li').getAttribute('data-id'));
    const stored = await storedNote(idp, id);
    assert.equal(stored?.title, 'shopping');
    assert.equal(stored?.body, 'milk, eggs, bread');

    await page.getByLabel('Search titles and text').fill('');
    await page.getByRole('button', { name: 'Search' }).click();
    await titlesWhenTotal(page, '(12)');
    await assertAccessible(page, 'list');
    await assertNoSidewaysScroll(page, 'list');
    await screenshots(page, 'notes-list');

    // Delete asks first; Cancel keeps the note.
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-label').filter({ hasText: 'Page 2 of 2' }).waitFor();
    await page.getByRole('button', { name: 'Delete shopping' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete “shopping”?' });
    await dialog.waitFor();
    await assertAccessible(page, 'delete dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.ok(await storedNote(idp, id));
    await page.getByRole('button', { name: 'Delete shopping' }).click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await page.locator('#notes-status').filter({ hasText: 'Note deleted.' }).waitFor();
    assert.deepEqual(await titlesWhenTotal(page, '(11)'), ['note 1']);
    assert.equal(await storedNote(idp, id), undefined);

    // Markup in a note is shown as text, never run or loaded.
    const markup = '<img src="/x" onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>';
    assert.equal((await call(notes.url, 'POST', '/notes', { token: api.body.access_token, body: { title: markup, body: markup } })).status, 201);
    await page.reload();
    assert.equal((await titlesWhenTotal(page, '(12)'))[0], markup);
    assert.equal(await page.locator('#notes .note-body').first().textContent(), markup);
    assert.equal(await page.locator('#notes img, #notes script').count(), 0);
    assert.equal(await page.title(), 'Notes');

    // Sign out ends the session at the provider: the tab forgets its refresh token, which no longer works anyway.
    const refreshToken = await page.evaluate(() => sessionStorage.getItem('notes-refresh-token'));
    assert.ok(refreshToken);
    // Never in localStorage, never in a cookie.
    assert.equal(await page.evaluate(() => localStorage.length), 0);
    assert.deepEqual(await page.context().cookies(), []);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('#signed-out-status').filter({ hasText: 'You are signed out.' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('notes-refresh-token')), null);
    assert.equal((await call(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: refreshToken } })).status, 401);
    await page.reload();
    await page.locator('#signed-out').waitFor();

    assertClean(w, [400]);
    assertSameOrigin(w, notes.url);
  });

  it('two users in two browser contexts never see each other\'s notes', async () => {
    const alice = await signUp(notes.url, 'alice');
    const bob = await signUp(notes.url, 'bob');
    const pages: Page[] = [];
    const watches: PageWatch[] = [];
    for (const user of [alice, bob]) {
      const page = await (await newContext()).newPage();
      watches.push(watch(page));
      pages.push(page);
      await page.goto(`${notes.url}/`);
      await page.locator('#signed-out').waitFor();
      if (user === alice) {
        // A wrong password first: the API's one message for any refused login.
        await signInByForm(page, user.email, 'not-the-password');
        await page.locator('#signin-error').filter({ hasText: 'Invalid email or password' }).waitFor();
      }
      await signInByForm(page, user.email);
      await page.locator('#signed-in').waitFor();
      assert.equal(await page.locator('#who').textContent(), user.email);
    }
    const [alicePage, bobPage] = pages as [Page, Page];
    for (const [page, title] of [[alicePage, 'alice secret plan'], [bobPage, 'bob secret plan']] as const) {
      await page.getByLabel('Title', { exact: true }).fill(title);
      await page.getByRole('button', { name: 'Add note' }).click();
      await page.locator('#notes h3').filter({ hasText: title }).waitFor();
    }
    // Each reloads and searches for both: only their own note, ever.
    for (const [page, own, other] of [[alicePage, 'alice', 'bob'], [bobPage, 'bob', 'alice']] as const) {
      await page.reload();
      assert.deepEqual(await titlesWhenTotal(page, '(1)'), [`${own} secret plan`]);
      await page.getByLabel('Search titles and text').fill(other);
      await page.getByRole('button', { name: 'Search' }).click();
      await titlesWhenTotal(page, '(0 matching)');
      assert.equal(await page.locator('#empty').textContent(), 'No notes match your search.');
      await page.getByLabel('Search titles and text').fill('secret');
      await page.getByRole('button', { name: 'Search' }).click();
      assert.deepEqual(await titlesWhenTotal(page, '(1 matching)'), [`${own} secret plan`]);
    }
    // The sessions are the tabs' own: each context holds its user's refresh token only.
    const tokens = await Promise.all(pages.map((p) => p.evaluate(() => sessionStorage.getItem('notes-refresh-token'))));
    assert.ok(tokens[0] && tokens[1] && tokens[0] !== tokens[1]);
    assertClean(watches[0]!, [401]);
    assertClean(watches[1]!);
    for (const w of watches) assertSameOrigin(w, notes.url);
  });

  it('renews the session before the access token expires, and once more when a token is refused, without a sign-in', async () => {
    // An idp whose clock the test moves: tokens last 120 s (its minimum) of that clock.
    const shift = { ms: 0 };
    const clockedIdp = await startIdp({ jwtExpirySeconds: 120, clock: () => Date.now() + shift.ms });
    const clockedNotes = await startNotes(clockedIdp);
    try {
      const user = await signUp(clockedNotes.url, 'refresh');
      const page = await (await newContext()).newPage();
      // The page's timers and Date run on a clock the test can move forward too.
      await page.clock.install();
      const w = watch(page);
      const bearers: string[] = [];
      const answers: string[] = [];
      page.on('request', (r) => {
        const auth = r.headers().authorization;
        if (auth) bearers.push(auth.slice('Bearer '.length));
      });
      page.on('response', (r) => answers.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`));

      await page.goto(`${clockedNotes.url}/`);
      await page.locator('#signed-out').waitFor();
      await signInByForm(page, user.email);
      await page.locator('#empty').waitFor();
      const original = bearers.at(-1)!;
      assert.ok(original);

      // 130 s later for both: the original token has expired at the provider...
      shift.ms += 130_000;
      assert.equal((await call(clockedNotes.url, 'GET', '/notes', { token: original })).status, 401);
      // ...and the page renewed it on its timer (planned a minute before expiry) on its own.
      const renewal = page.waitForResponse((r) => r.url().endsWith('/auth/refresh') && r.status() === 200);
      await page.clock.fastForward(130_000);
      await renewal;
      await page.getByLabel('Title', { exact: true }).fill('written after expiry');
      await page.getByRole('button', { name: 'Add note' }).click();
      await page.locator('#notes h3').filter({ hasText: 'written after expiry' }).waitFor();
      const renewed = bearers.at(-1)!;
      assert.notEqual(renewed, original);
      assert.ok(answers.includes('POST /notes 201'), answers.join(', '));

      // A computer that slept: the provider's time moves on, the page's timer has not fired, so the
      // page sends a token it still believes valid; refused, it renews and repeats the call.
      shift.ms += 130_000;
      const before = answers.length;
      await page.getByLabel('Search titles and text').fill('expiry');
      await page.getByRole('button', { name: 'Search' }).click();
      assert.deepEqual(await titlesWhenTotal(page, '(1 matching)'), ['written after expiry']);
      assert.deepEqual(
        answers.slice(before).filter((a) => !a.startsWith('GET /assets')),
        ['GET /notes 401', 'POST /auth/refresh 200', 'GET /notes 200'],
      );
      assert.equal(await page.locator('#signed-out').isHidden(), true);
      assert.deepEqual(await storedNote(clockedIdp, Number(await page.locator('#notes li').getAttribute('data-id'))).then((n) => n?.user_id), user.id);

      // A refresh token the provider no longer accepts (signed out elsewhere): the page says so and offers the sign-in form.
      const refreshToken = await page.evaluate(() => sessionStorage.getItem('notes-refresh-token'));
      const current = bearers.at(-1)!;
      assert.equal((await call(clockedNotes.url, 'POST', '/auth/logout', { token: current })).status, 204);
      assert.ok(refreshToken);
      await page.getByRole('button', { name: 'Search' }).click();
      await page.locator('#signed-out-status').filter({ hasText: 'Your session has ended. Sign in again.' }).waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('notes-refresh-token')), null);
      assertClean(w, [401]);
      assertSameOrigin(w, clockedNotes.url);
    } finally {
      await clockedNotes.close();
      await clockedIdp.close();
    }
  });

  it('an outage of the provider is shown in the API\'s words and keeps the tab\'s session for when it is back', async () => {
    // The real idp behind a switch: while down, every request to it is answered 503.
    const down = { now: false };
    const upstream = await startUpstream(idp.url, () => (down.now ? { status: 503, body: { message: 'down' } } : 'forward'));
    const behind = await startNotes({ ...idp, url: upstream.url });
    try {
      const user = await signUp(behind.url, 'outage');
      const page = await (await newContext()).newPage();
      const w = watch(page);
      await page.goto(`${behind.url}/`);
      await page.locator('#signed-out').waitFor();
      down.now = true;
      await signInByForm(page, user.email);
      await page.locator('#signin-error').filter({ hasText: 'Identity provider unavailable, try again shortly' }).waitFor();
      down.now = false;
      await signInByForm(page, user.email);
      await page.locator('#signed-in').waitFor();
      const refreshToken = await page.evaluate(() => sessionStorage.getItem('notes-refresh-token'));

      // A reload during the outage cannot renew the session, but does not end it. (The service's
      // refresh answers 503 only after supabase-js has retried for about 25 s.)
      down.now = true;
      await page.reload();
      await page.locator('#page-error').filter({ hasText: 'Your session could not be restored: Identity provider unavailable' }).waitFor({ timeout: 45_000 });
      assert.equal(await page.evaluate(() => sessionStorage.getItem('notes-refresh-token')), refreshToken);
      await assertAccessible(page, 'outage');
      down.now = false;
      await page.reload();
      await page.locator('#signed-in').waitFor();
      assert.equal(await page.locator('#who').textContent(), user.email);
      assertClean(w, [503]);
      assertSameOrigin(w, behind.url);
    } finally {
      await behind.close();
      await upstream.close();
    }
  });

  it('the reset-password page reads the recovery link\'s fragment, wipes it from the address, and explains a bad link', async () => {
    const page = await (await newContext()).newPage();
    const w = watch(page);
    // The provider's answer for an expired or used link.
    await page.goto(`${notes.url}/reset-password#error=access_denied&error_code=otp_expired&error_description=Email+link+is+invalid+or+has+expired`);
    await page.locator('#link-problem').waitFor();
    assert.equal(await page.locator('#problem-text').textContent(), 'Email link is invalid or has expired. Reset links work once and for a limited time; ask for a new one.');
    assert.equal(new URL(page.url()).hash, '');
    assert.equal(await page.locator('#reset-form').isHidden(), true);
    await assertAccessible(page, 'reset link problem');
    await assertNoSidewaysScroll(page, 'reset link problem');

    // Opened without a link's session.
    await page.goto(`${notes.url}/reset-password`);
    await page.locator('#link-problem').waitFor();
    assert.match(await page.locator('#problem-text').textContent() ?? '', /opens from the link in a password-reset email/);

    // With a session in the fragment: the form, which checks the two entries agree before sending anything.
    const user = await signUp(notes.url, 'reset-form');
    // The link comes from elsewhere (a mail): a whole navigation, not a change of this page's fragment.
    await page.goto('about:blank');
    await page.goto(`${notes.url}/reset-password#access_token=${user.token}&refresh_token=${user.refreshToken}&expires_at=${Math.floor(Date.now() / 1000) + 3600}&expires_in=3600&token_type=bearer&type=recovery`);
    await page.locator('#reset-form').waitFor();
    assert.equal(new URL(page.url()).hash, '');
    assert.equal(await page.locator('#username').inputValue(), user.email);
    const sent = w.urls.length;
    await page.getByLabel('New password', { exact: true }).fill('a brand new passphrase');
    await page.getByLabel('New password again').fill('a different passphrase');
    await page.getByRole('button', { name: 'Change password' }).click();
    assert.equal(await page.locator('#reset-error').textContent(), 'The two passwords differ. Type the same one twice.');
    assert.equal(w.urls.length, sent);
    await assertAccessible(page, 'reset form');
    await assertNoSidewaysScroll(page, 'reset form');
    await screenshots(page, 'notes-reset-password');

    // The forgot-password form asks for an address before sending.
    await page.goto(`${notes.url}/forgot-password`);
    await page.getByRole('button', { name: 'Send the link' }).click();
    assert.equal(await page.locator('#forgot-error').textContent(), 'Enter your email address.');
    await assertAccessible(page, 'forgot password');
    await assertNoSidewaysScroll(page, 'forgot password');
    await screenshots(page, 'notes-forgot-password');
    assertClean(w);
    assertSameOrigin(w, notes.url);
  });

  it('recovers a password by clicks: the form, the mail the idp sends, its link, a new password, a sign-in with it', async () => {
    // The idp mails through a real SMTP server. Notes is reached at the address its mails link to
    // (NOTES_PUBLIC_URL, a port known before it starts, forwarded to the service).
    const smtp = await startSmtp();
    const mailingIdp = await startIdp({ env: { SMTP_URL: smtp.url } });
    const publicUrl = `http://127.0.0.1:${await freePort()}`;
    const mailingNotes = await startNotes(mailingIdp, { NOTES_PUBLIC_URL: publicUrl });
    const forward = await forwardPort(Number(new URL(publicUrl).port), mailingNotes.url);
    try {
      const user = await signUp(mailingNotes.url, 'recover');
      const page = await (await newContext()).newPage();
      const w = watch(page);
      await page.goto(`${publicUrl}/`);
      await page.getByRole('link', { name: 'Forgot your password?' }).click();
      await page.waitForURL(`${publicUrl}/forgot-password`);
      await page.getByLabel('Email', { exact: true }).fill(user.email);
      await page.getByRole('button', { name: 'Send the link' }).click();
      await page.locator('#sent').waitFor();
      assert.equal(await page.locator('#sent-to').textContent(), user.email);
      await assertAccessible(page, 'reset link sent');
      await screenshots(page, 'notes-forgot-password-sent');

      const link = linkIn(await smtp.waitForMail(user.email), `${mailingIdp.url}/auth/v1/verify?token=`);
      await page.goto(link);
      await page.waitForURL(`${publicUrl}/reset-password`);
      await page.locator('#reset-form').waitFor();
      assert.equal(new URL(page.url()).hash, '', 'the tokens left the address bar');

      // The provider's refusal of a weak password, in the API's words.
      await page.getByLabel('New password', { exact: true }).fill('abc');
      await page.getByLabel('New password again').fill('abc');
      await page.getByRole('button', { name: 'Change password' }).click();
      await page.locator('#reset-error').filter({ hasText: 'Password is too weak' }).waitFor();
      await page.getByLabel('New password', { exact: true }).fill('a brand new passphrase');
      await page.getByLabel('New password again').fill('a brand new passphrase');
      const logout = page.waitForResponse((r) => r.url().endsWith('/auth/logout'));
      await page.getByRole('button', { name: 'Change password' }).click();
      await page.locator('#done').waitFor();
      // The recovery session is ended once it has done its job.
      assert.equal((await logout).status(), 204);
      await assertAccessible(page, 'password changed');
      assert.equal((await call(mailingNotes.url, 'POST', '/auth/login', { body: { email: user.email, password: PASSWORD } })).status, 401);

      await page.getByRole('link', { name: 'Sign in' }).click();
      await page.waitForURL(`${publicUrl}/`);
      await signInByForm(page, user.email, 'a brand new passphrase');
      await page.locator('#signed-in').waitFor();
      assert.equal(await page.locator('#who').textContent(), user.email);

      // The link works once: opened again, the page explains and offers a new one.
      await page.goto(link);
      await page.waitForURL(`${publicUrl}/reset-password`);
      await page.locator('#link-problem').waitFor();
      assert.match(await page.locator('#problem-text').textContent() ?? '', /invalid or has expired/);
      assertClean(w, [400]);
      // Same origin throughout, but for the mailed link itself (the idp's, which redirects back).
      assertSameOrigin({ ...w, urls: w.urls.filter((u) => !u.startsWith(`${mailingIdp.url}/auth/v1/verify?`)) }, publicUrl);
    } finally {
      await forward.close();
      await mailingNotes.close();
      await mailingIdp.close();
      await smtp.close();
    }
  });
});
