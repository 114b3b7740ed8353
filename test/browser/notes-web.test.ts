import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  assertAccessible,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  type PageWatch,
  screenshots,
  useBrowser,
  watch,
  watchedPage,
} from '../helpers/browser.js';
import { uniqueEmail } from '../helpers/emails.js';
import { request } from '../helpers/http.js';
import { startIdp, type RunningIdp } from '../helpers/idp.js';
import { PASSWORD, signUp, startNotes, startUpstream, storedNote, type RunningNotes } from '../helpers/notes.js';
import { forwardPort, freePort } from '../helpers/ports.js';
import { linkIn, startSmtp } from '../helpers/smtp.js';

// The notes web app in a real Chromium, driven by clicks, against the real
// notes service and the real idp (both in-process on 127.0.0.1, real
// PostgreSQL with row-level security). Screenshots at 360 and 1,280 pixels go
// to test-artifacts/screenshots/.

describe('notes web app in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let idp: RunningIdp;
  let notes: RunningNotes;

  before(async () => {
    idp = await startIdp();
    notes = await startNotes({ idp });
  });

  after(async () => {
    await notes?.close();
    await idp?.close();
  });

  /** Signs in through the page's form. */
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
    const { page, w } = await browser.newPage();
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
    assert.match((await page.locator('#signup-error').textContent()) ?? '', /password/i);
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

    // The limits show as counters; past one, the form says so and sends nothing (nothing is cut).
    await page.getByLabel('Title', { exact: true }).fill('g'.repeat(201));
    assert.equal(await page.locator('output[data-counts="new-title"]').textContent(), '201 / 200');
    assert.equal(await page.locator('output[data-counts="new-title"].over').count(), 1);
    await page.getByRole('button', { name: 'Add note' }).click();
    assert.equal(await page.locator('#create-error').textContent(), 'The title is 201 characters long; at most 200 fit. Shorten it.');
    assert.equal((await page.getByLabel('Title', { exact: true }).inputValue()).length, 201);
    assert.equal(w.urls.length, posts);
    await page.getByLabel('Title', { exact: true }).fill('groceries');
    assert.equal(await page.locator('output[data-counts="new-title"]').textContent(), '9 / 200');
    await page.getByLabel('Text (optional)').fill('milk, eggs');
    assert.equal(await page.locator('output[data-counts="new-body"]').textContent(), '10 / 10,000');
    await page.getByRole('button', { name: 'Add note' }).click();
    assert.deepEqual(await titlesWhenTotal(page, '(1)'), ['groceries']);
    assert.equal(await page.locator('#notes .note-body').textContent(), 'milk, eggs');
    assert.equal(await page.getByLabel('Title', { exact: true }).inputValue(), '');
    // One page: no pager.
    assert.equal(await page.locator('#pager').isHidden(), true);

    // Eleven more through the API (a second session of the same user); the page shows them after a
    // reload, which resumes the tab's session from its refresh token without a sign-in.
    const api = await request(notes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
    const long = ['first line', 'second line', 'third line', 'fourth line, not in the list', 'x'.repeat(9000)].join('\n');
    for (let i = 1; i <= 11; i++) {
      const note = { title: `note ${i}`, ...(i === 11 && { body: long }) };
      assert.equal((await request(notes.url, 'POST', '/notes', { token: api.body.access_token, body: note })).status, 201);
    }
    await page.reload();
    const firstPage = await titlesWhenTotal(page, '(12)');
    assert.deepEqual(firstPage, ['note 11', 'note 10', 'note 9', 'note 8', 'note 7', 'note 6', 'note 5', 'note 4', 'note 3', 'note 2']);
    assert.equal(await page.locator('#page-label').textContent(), 'Page 1 of 2');
    assert.equal(await page.locator('#pager').isVisible(), true);
    // The list shows the start of a long note, not all of it.
    assert.equal(await page.locator('#notes li').first().locator('.note-body').textContent(), 'first line\nsecond line\nthird line…');
    assert.equal(await page.getByRole('button', { name: 'Previous page' }).isDisabled(), true);
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-label').filter({ hasText: 'Page 2 of 2' }).waitFor();
    assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['note 1', 'groceries']);
    assert.equal(await page.getByRole('button', { name: 'Next page' }).isDisabled(), true);

    // Search: title or text, ignoring case.
    await page.getByLabel('Search titles and text').fill('MILK');
    await page.getByRole('button', { name: 'Search' }).click();
    assert.deepEqual(await titlesWhenTotal(page, '(1 matching)'), ['groceries']);

    // Search showing one match: no "Page 1 of 1".
    assert.equal(await page.locator('#pager').isHidden(), true);

    // Edit in place: what is typed is saved on its own, a moment after the last keystroke.
    await page.getByRole('button', { name: 'Edit groceries' }).click();
    const editor = page.getByRole('form', { name: 'Edit groceries' });
    const id = Number(await page.locator('#notes li').getAttribute('data-id'));
    await editor.getByLabel('Text').fill('milk, eggs, butter');
    await editor
      .locator('.autosave')
      .filter({ hasText: /^Saved at / })
      .waitFor();
    assert.equal((await storedNote(idp, id))?.body, 'milk, eggs, butter');
    // Escape closes the note, keeping what was typed (saved first if the autosave had not run yet).
    await editor.getByLabel('Text').fill('milk, eggs, cheese');
    await editor.getByLabel('Text').press('Escape');
    await page.locator('#notes .note-body').filter({ hasText: 'milk, eggs, cheese' }).waitFor();
    assert.equal((await storedNote(idp, id))?.body, 'milk, eggs, cheese');
    // A change that cannot be saved (an empty title) is never dropped without asking.
    await page.getByRole('button', { name: 'Edit groceries' }).click();
    await editor.getByLabel('Title').fill('');
    await editor.getByRole('button', { name: 'Done' }).click();
    assert.equal(await editor.getByRole('alert').textContent(), 'Enter a title.');
    await editor.getByLabel('Title').press('Escape');
    const discard = page.getByRole('dialog', { name: 'Discard your changes to “groceries”?' });
    await discard.waitFor();
    await assertAccessible(page, 'discard dialog');
    await screenshots(page, 'notes-discard-dialog');
    await discard.getByRole('button', { name: 'Keep editing' }).click();
    await discard.waitFor({ state: 'hidden' });
    assert.equal(await editor.getByLabel('Title').inputValue(), '');
    await editor.getByLabel('Title').press('Escape');
    await discard.getByRole('button', { name: 'Discard changes' }).click();
    await page.locator('#notes h3').filter({ hasText: 'groceries' }).waitFor();
    assert.equal((await storedNote(idp, id))?.title, 'groceries');
    // Edited and closed with Done.
    await page.getByRole('button', { name: 'Edit groceries' }).click();
    await editor.getByLabel('Title').fill('shopping');
    await editor.getByLabel('Text').fill('milk, eggs, bread');
    assert.equal(await editor.locator('output.counter').first().textContent(), '8 / 200');
    await assertAccessible(page, 'editing a note');
    await assertNoSidewaysScroll(page, 'editing a note');
    await screenshots(page, 'notes-editing');
    await page.getByRole('form', { name: 'Edit groceries' }).getByRole('button', { name: 'Done' }).click();
    await page.locator('#notes-status').filter({ hasText: 'Note saved.' }).waitFor();
    assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['shopping']);
    assert.equal(await page.locator('#notes .note-body').textContent(), 'milk, eggs, bread');
    assert.match((await page.locator('#notes .note-meta').textContent()) ?? '', /edited/);
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
    assert.equal(
      (await request(notes.url, 'POST', '/notes', { token: api.body.access_token, body: { title: markup, body: markup } })).status,
      201,
    );
    await page.reload();
    assert.equal((await titlesWhenTotal(page, '(12)'))[0], markup);
    assert.equal(await page.locator('#notes .note-body').first().textContent(), markup);
    assert.equal(await page.locator('#notes img, #notes script').count(), 0);
    assert.equal(await page.title(), 'Notes');

    // The refresh token: only in an HttpOnly, Secure, SameSite=Strict cookie for /auth/browser (kept by
    // Chromium on http://127.0.0.1); nothing a script can read.
    const cookies = await page.context().cookies();
    assert.deepEqual(
      cookies.map((c) => ({ name: c.name, path: c.path, httpOnly: c.httpOnly, secure: c.secure, sameSite: c.sameSite })),
      [{ name: 'notes_refresh', path: '/auth/browser', httpOnly: true, secure: true, sameSite: 'Strict' }],
    );
    const refreshToken = cookies[0]!.value;
    const readable = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length, cookie: document.cookie }));
    assert.deepEqual(readable, { session: 0, local: 0, cookie: '' });
    // A second tab is signed in at once, with no password asked.
    const { page: second, w: sw } = await watchedPage(page.context());
    await second.goto(`${notes.url}/`);
    await second.locator('#signed-in').waitFor();
    assert.equal(await second.locator('#who').textContent(), email);
    await second.locator('#total').filter({ hasText: '(12)' }).waitFor();
    assertClean(sw);
    assertSameOrigin(sw, notes.url);
    await second.close();
    // Sign out ends the session at the provider and clears the cookie; its refresh token works no more.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.locator('#signed-out-status').filter({ hasText: 'You are signed out.' }).waitFor();
    assert.deepEqual(await page.context().cookies(), []);
    assert.equal((await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: refreshToken } })).status, 401);
    await page.reload();
    await page.locator('#signed-out').waitFor();

    assertClean(w, [400]);
    assertSameOrigin(w, notes.url);
  });

  it("two users in two browser contexts never see each other's notes", async () => {
    const alice = await signUp(notes.url, 'alice');
    const bob = await signUp(notes.url, 'bob');
    const pages: Page[] = [];
    const watches: PageWatch[] = [];
    for (const user of [alice, bob]) {
      const { page, w } = await browser.newPage();
      watches.push(w);
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
    for (const [page, title] of [
      [alicePage, 'alice secret plan'],
      [bobPage, 'bob secret plan'],
    ] as const) {
      await page.getByLabel('Title', { exact: true }).fill(title);
      await page.getByRole('button', { name: 'Add note' }).click();
      await page.locator('#notes h3').filter({ hasText: title }).waitFor();
    }
    // Each reloads and searches for both: only their own note, ever.
    for (const [page, own, other] of [
      [alicePage, 'alice', 'bob'],
      [bobPage, 'bob', 'alice'],
    ] as const) {
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
    const tokens = await Promise.all(pages.map(async (p) => (await p.context().cookies())[0]?.value));
    assert.ok(tokens[0] && tokens[1] && tokens[0] !== tokens[1]);
    assertClean(watches[0]!, [401]);
    assertClean(watches[1]!);
    for (const w of watches) assertSameOrigin(w, notes.url);
  });

  it('renews the session before the access token expires, and once more when a token is refused, without a sign-in', async () => {
    // An idp whose clock the test moves: tokens last 120 s (its minimum) of that clock.
    const shift = { ms: 0 };
    const clockedIdp = await startIdp({ env: { IDP_JWT_EXPIRY: String(120) }, clock: () => Date.now() + shift.ms });
    const clockedNotes = await startNotes({ idp: clockedIdp });
    try {
      const user = await signUp(clockedNotes.url, 'refresh');
      const { page, w } = await browser.newPage();
      // The page's timers and Date run on a clock the test can move forward too.
      await page.clock.install();
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
      assert.equal((await request(clockedNotes.url, 'GET', '/notes', { token: original })).status, 401);
      // ...and the page renewed it on its timer (planned a minute before expiry) on its own.
      const renewal = page.waitForResponse((r) => r.url().endsWith('/auth/browser/refresh') && r.status() === 200);
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
        ['GET /notes 401', 'POST /auth/browser/refresh 200', 'GET /notes 200'],
      );
      assert.equal(await page.locator('#signed-out').isHidden(), true);
      assert.deepEqual(
        await storedNote(clockedIdp, Number(await page.locator('#notes li').getAttribute('data-id'))).then((n) => n?.user_id),
        user.id,
      );

      // A refresh token the provider no longer accepts (signed out elsewhere): the page says so and offers the sign-in form.
      const refreshToken = (await page.context().cookies())[0]?.value;
      const current = bearers.at(-1)!;
      assert.equal((await request(clockedNotes.url, 'POST', '/auth/logout', { token: current })).status, 204);
      assert.ok(refreshToken);
      await page.getByRole('button', { name: 'Search' }).click();
      await page.locator('#signed-out-status').filter({ hasText: 'Your session has ended. Sign in again.' }).waitFor();
      assert.deepEqual(await page.context().cookies(), [], 'the refused cookie was cleared');
      assertClean(w, [401]);
      assertSameOrigin(w, clockedNotes.url);
    } finally {
      await clockedNotes.close();
      await clockedIdp.close();
    }
  });

  it("an outage of the provider is shown in the API's words and keeps the tab's session for when it is back", async () => {
    // The real idp behind a switch: while down, every request to it is answered 503.
    const down = { now: false };
    const upstream = await startUpstream(idp.url, () => (down.now ? { status: 503, body: { message: 'down' } } : 'forward'));
    const behind = await startNotes({ idp: { ...idp, url: upstream.url } });
    try {
      const user = await signUp(behind.url, 'outage');
      const { page, w } = await browser.newPage();
      await page.goto(`${behind.url}/`);
      await page.locator('#signed-out').waitFor();
      down.now = true;
      await signInByForm(page, user.email);
      await page
        .locator('#signin-error')
        .filter({ hasText: 'The sign-in service cannot be reached just now. Try again in a moment.' })
        .waitFor();
      down.now = false;
      await signInByForm(page, user.email);
      await page.locator('#signed-in').waitFor();
      const refreshToken = (await page.context().cookies())[0]?.value;
      assert.ok(refreshToken);

      // A reload during the outage cannot renew the session, but does not end it. (The service's
      // refresh answers 503 only after supabase-js has retried for about 25 s.)
      down.now = true;
      await page.reload();
      await page
        .locator('#page-error')
        .filter({ hasText: 'Your session could not be restored. The sign-in service cannot be reached just now.' })
        .waitFor({ timeout: 45_000 });
      assert.equal((await page.context().cookies())[0]?.value, refreshToken, 'an outage does not end the session');
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

  it("the reset-password page reads the recovery link's fragment, wipes it from the address, and explains a bad link", async () => {
    const { page, w } = await browser.newPage();
    // The provider's answer for an expired or used link.
    await page.goto(
      `${notes.url}/reset-password#error=access_denied&error_code=otp_expired&error_description=Email+link+is+invalid+or+has+expired`,
    );
    await page.locator('#link-problem').waitFor();
    assert.equal(
      await page.locator('#problem-text').textContent(),
      'This reset link has expired or was already used. Reset links work once and for a limited time; ask for a new one.',
    );
    assert.equal(new URL(page.url()).hash, '');
    assert.equal(await page.locator('#reset-form').isHidden(), true);
    await assertAccessible(page, 'reset link problem');
    await assertNoSidewaysScroll(page, 'reset link problem');

    // Opened without a link's session.
    await page.goto(`${notes.url}/reset-password`);
    await page.locator('#link-problem').waitFor();
    assert.match((await page.locator('#problem-text').textContent()) ?? '', /opens from the link in a password-reset email/);

    // With a session in the fragment: the form, which checks the two entries agree before sending anything.
    const user = await signUp(notes.url, 'reset-form');
    // The link comes from elsewhere (a mail): a whole navigation, not a change of this page's fragment.
    await page.goto('about:blank');
    await page.goto(
      `${notes.url}/reset-password#access_token=${user.token}&refresh_token=${user.refreshToken}&expires_at=${Math.floor(Date.now() / 1000) + 3600}&expires_in=3600&token_type=bearer&type=recovery`,
    );
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
    // Notes listens on a port chosen at start: the idp allows its pages on any local port.
    const mailingIdp = await startIdp({ env: { SMTP_URL: smtp.url, IDP_REDIRECT_URLS: 'http://127.0.0.1:*/**' } });
    const publicUrl = `http://127.0.0.1:${await freePort()}`;
    const mailingNotes = await startNotes({ idp: mailingIdp, env: { NOTES_PUBLIC_URL: publicUrl } });
    const forward = await forwardPort(Number(new URL(publicUrl).port), mailingNotes.url);
    try {
      const user = await signUp(mailingNotes.url, 'recover');
      const { page, w } = await browser.newPage();
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

      // The provider's refusal of a weak password, in words for a person.
      await page.getByLabel('New password', { exact: true }).fill('abc');
      await page.getByLabel('New password again').fill('abc');
      await page.getByRole('button', { name: 'Change password' }).click();
      await page.locator('#reset-error').filter({ hasText: 'This password is too short. Use at least 6 characters' }).waitFor();
      await page.getByLabel('New password', { exact: true }).fill('a brand new passphrase');
      await page.getByLabel('New password again').fill('a brand new passphrase');
      const logout = page.waitForResponse((r) => r.url().endsWith('/auth/logout'));
      await page.getByRole('button', { name: 'Change password' }).click();
      await page.locator('#done').waitFor();
      // The recovery session is ended once it has done its job.
      assert.equal((await logout).status(), 204);
      await assertAccessible(page, 'password changed');
      assert.equal(
        (await request(mailingNotes.url, 'POST', '/auth/login', { body: { email: user.email, password: PASSWORD } })).status,
        401,
      );

      await page.getByRole('link', { name: 'Sign in' }).click();
      await page.waitForURL(`${publicUrl}/`);
      await signInByForm(page, user.email, 'a brand new passphrase');
      await page.locator('#signed-in').waitFor();
      assert.equal(await page.locator('#who').textContent(), user.email);

      // The link works once: opened again, the page explains and offers a new one.
      await page.goto(link);
      await page.waitForURL(`${publicUrl}/reset-password`);
      await page.locator('#link-problem').waitFor();
      assert.match((await page.locator('#problem-text').textContent()) ?? '', /expired or was already used/);
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

  it("notes' own mail link: opened by a scanner it spends nothing; clicked in the mail it opens a new tab, uses the token only on Continue", async () => {
    // The idp as npm start configures it for notes: its mails link to notes' page with the token hash.
    const smtp = await startSmtp();
    const mailingIdp = await startIdp({
      env: {
        SMTP_URL: smtp.url,
        MAIL_FROM: 'Notes <noreply@localhost>',
        IDP_MAILER_SITE_NAME: 'Notes',
        IDP_MAILER_OFFER_CODE: 'false',
        IDP_MAILER_LINK_RECOVERY: '{{ .RedirectTo }}?token_hash={{ .TokenHash }}&type=recovery',
        // Notes' pages are another origin (its port is picked below), as npm start allows them.
        IDP_REDIRECT_URLS: 'http://127.0.0.1:*/**',
      },
    });
    const publicUrl = `http://127.0.0.1:${await freePort()}`;
    const mailingNotes = await startNotes({ idp: mailingIdp, env: { NOTES_PUBLIC_URL: publicUrl } });
    const forward = await forwardPort(Number(new URL(publicUrl).port), mailingNotes.url);
    try {
      const user = await signUp(mailingNotes.url, 'scanned');
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`${publicUrl}/forgot-password`);
      await page.getByLabel('Email', { exact: true }).fill(user.email);
      await page.getByRole('button', { name: 'Send the link' }).click();
      await page.locator('#sent').waitFor();

      const mail = await smtp.waitForMail(user.email);
      assert.equal(mail.subject, 'Reset your Notes password');
      assert.doesNotMatch(mail.text, /code/i);
      const link = linkIn(mail, `${publicUrl}/reset-password?token_hash=`);
      // A mail scanner fetches the link, twice, and even renders it: nothing is spent.
      for (let i = 0; i < 2; i++) assert.equal((await fetch(link)).status, 200);
      const { page: scanner, w: scanned } = await watchedPage(context);
      await scanner.goto(link);
      await scanner.locator('#continue-form').waitFor();
      await scanner.close();
      assert.ok(!scanned.urls.some((u) => u.endsWith('/auth/verify')), 'opening the page verified the link');

      // The person clicks the link in the mail: a new tab, which cannot reach back into the mail's window.
      const inbox = await context.newPage();
      await inbox.setContent(mail.html ?? '');
      const [tab] = await Promise.all([
        context.waitForEvent('page'),
        inbox.getByRole('link', { name: 'Reset your Notes password' }).click(),
      ]);
      const w = watch(tab);
      await tab.locator('#continue-form').waitFor();
      assert.equal(await tab.evaluate(() => window.opener), null);
      assert.equal(new URL(tab.url()).search, '', 'the token hash left the address bar');
      await assertAccessible(tab, 'reset link, before continuing');
      await assertNoSidewaysScroll(tab, 'reset link, before continuing');
      await screenshots(tab, 'notes-reset-password-continue');
      const verified = tab.waitForResponse((r) => r.url().endsWith('/auth/verify'));
      await tab.getByRole('button', { name: 'Continue' }).click();
      assert.equal((await verified).status(), 200);
      await tab.locator('#reset-form').waitFor();
      assert.equal(await tab.locator('#username').inputValue(), user.email);

      // A common password: refused, in words.
      await tab.getByLabel('New password', { exact: true }).fill('password1');
      await tab.getByLabel('New password again').fill('password1');
      await tab.getByRole('button', { name: 'Change password' }).click();
      await tab.locator('#reset-error').filter({ hasText: 'one of the most commonly used' }).waitFor();
      await tab.getByLabel('New password', { exact: true }).fill('a brand new passphrase');
      await tab.getByLabel('New password again').fill('a brand new passphrase');
      await tab.getByRole('button', { name: 'Change password' }).click();
      await tab.locator('#done').waitFor();
      const login = await request(mailingNotes.url, 'POST', '/auth/login', {
        body: { email: user.email, password: 'a brand new passphrase' },
      });
      assert.equal(login.status, 200);

      // Used once: the link opened again says so after Continue, in words.
      await tab.goto(link);
      await tab.getByRole('button', { name: 'Continue' }).click();
      await tab.locator('#link-problem').waitFor();
      assert.equal(
        await tab.locator('#problem-text').textContent(),
        'This reset link has expired or was already used. Reset links work once and for a limited time; ask for a new one.',
      );
      await assertAccessible(tab, 'reset link used');
      assertClean(w, [400, 401]);
      assertSameOrigin(w, publicUrl);
    } finally {
      await forward.close();
      await mailingNotes.close();
      await mailingIdp.close();
      await smtp.close();
    }
  });

  it('the forgot-password page says what went wrong in words, never the API text', async () => {
    const { page, w } = await browser.newPage();
    await page.goto(`${notes.url}/forgot-password`);
    await page.getByLabel('Email', { exact: true }).fill('not an address');
    await page.getByRole('button', { name: 'Send the link' }).click();
    await page.locator('#forgot-error').filter({ hasText: 'This does not look like an email address' }).waitFor();
    assert.equal(await page.getByLabel('Email', { exact: true }).getAttribute('aria-invalid'), 'true');
    assert.doesNotMatch((await page.locator('#forgot-error').textContent()) ?? '', /must be|valid email/);
    assertClean(w, [400]);
  });

  it('the confirm page: opening the link confirms nothing, the button does, once; the used link says so in words', async () => {
    const smtp = await startSmtp();
    const confirmingIdp = await startIdp({
      env: {
        SMTP_URL: smtp.url,
        IDP_AUTOCONFIRM: 'false',
        IDP_MAILER_SITE_NAME: 'Notes',
        IDP_MAILER_OFFER_CODE: 'false',
        IDP_MAILER_LINK_SIGNUP: '{{ .RedirectTo }}?token_hash={{ .TokenHash }}&type=signup',
        // Notes' pages are another origin (its port is picked below), as npm start allows them.
        IDP_REDIRECT_URLS: 'http://127.0.0.1:*/**',
      },
    });
    const publicUrl = `http://127.0.0.1:${await freePort()}`;
    const confirmingNotes = await startNotes({ idp: confirmingIdp, env: { NOTES_PUBLIC_URL: publicUrl } });
    const forward = await forwardPort(Number(new URL(publicUrl).port), confirmingNotes.url);
    try {
      const email = uniqueEmail('confirm-page');
      const login = () => request(confirmingNotes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
      assert.equal((await request(confirmingNotes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD } })).status, 201);
      const link = linkIn(await smtp.waitForMail(email), `${publicUrl}/confirm?token_hash=`);
      const { page, w } = await browser.newPage();
      await page.goto(link);
      await page.locator('#confirm-form').waitFor();
      assert.equal(new URL(page.url()).search, '', 'the token hash left the address bar');
      assert.equal((await login()).status, 401, 'showing the page confirmed the address');
      await assertAccessible(page, 'confirm');
      await assertNoSidewaysScroll(page, 'confirm');
      await screenshots(page, 'notes-confirm');
      await page.getByRole('button', { name: 'Confirm my address' }).click();
      await page.locator('#done').waitFor();
      assert.equal((await login()).status, 200);

      await page.goto(link);
      await page.getByRole('button', { name: 'Confirm my address' }).click();
      await page.locator('#link-problem').waitFor();
      assert.match((await page.locator('#problem-text').textContent()) ?? '', /^This confirmation link has expired or was already used\./);
      await assertAccessible(page, 'confirm link used');
      assertClean(w, [401]);
      assertSameOrigin(w, publicUrl);
    } finally {
      await forward.close();
      await confirmingNotes.close();
      await confirmingIdp.close();
      await smtp.close();
    }
  });
});
