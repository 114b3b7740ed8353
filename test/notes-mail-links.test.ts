// Notes' recovery mail as npm start configures the idp: the link leads to notes' own
// /reset-password with the token hash, which nothing spends until the page's button sends it to
// POST /auth/verify. Over real HTTP, with the real idp and a real SMTP server.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { PASSWORD, type RunningNotes, signUp, startNotes } from './helpers/notes.js';
import { request } from './helpers/http.js';
import { uniqueIp } from './helpers/client-ips.js';
import { linkIn, startSmtp, type TestSmtp } from './helpers/smtp.js';

let smtp: TestSmtp;
let idp: RunningIdp;
let notes: RunningNotes;

/**
 * The idp's mail settings npm start gives it for notes. npm start allows notes' own URL as a
 * redirect; here notes' port is picked after the idp starts, so any port of 127.0.0.1 is allowed.
 */
const NOTES_MAIL_ENV = {
  IDP_REDIRECT_URLS: 'http://127.0.0.1:*/**',
  IDP_MAILER_SITE_NAME: 'Notes',
  IDP_MAILER_OFFER_CODE: 'false',
  IDP_MAILER_LINK_RECOVERY: '{{ .RedirectTo }}?token_hash={{ .TokenHash }}&type=recovery',
  MAIL_FROM: 'Notes <noreply@localhost>',
};

before(async () => {
  smtp = await startSmtp();
  idp = await startIdp({ env: { SMTP_URL: smtp.url, TRUST_PROXY: '127.0.0.1', ...NOTES_MAIL_ENV } });
  notes = await startNotes({ idp, env: { TRUST_PROXY: '127.0.0.1' } });
});
after(async () => {
  await notes?.close();
  await idp?.close();
  await smtp?.close();
});

const verify = (body: unknown, ip = uniqueIp()) => request(notes.url, 'POST', '/auth/verify', { body, headers: { 'x-forwarded-for': ip } });

/** A user, and the token hash of the recovery link mailed to them. */
async function mailedLink(tag: string) {
  const user = await signUp(notes.url, tag);
  assert.equal((await request(notes.url, 'POST', '/auth/password-reset', { body: { email: user.email } })).status, 202);
  const mail = await smtp.waitForMail(user.email);
  const link = linkIn(mail, `${notes.url}/reset-password?`);
  return { user, mail, link, tokenHash: new URL(link).searchParams.get('token_hash')! };
}

describe("notes' own recovery link and POST /auth/verify", () => {
  test('opened any number of times it spends nothing; POST /auth/verify gives a session (no refresh token) that sets the password, once', async () => {
    const { user, mail, link, tokenHash } = await mailedLink('own-link');
    assert.equal(mail.subject, 'Reset your Notes password');
    assert.match(link, /\/reset-password\?token_hash=[0-9a-f]{56}&type=recovery$/);
    // A mail scanner, then the person: the page, twice.
    for (let i = 0; i < 2; i++) {
      const page = await fetch(link);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /Choose a new password/);
    }
    const verified = await verify({ token_hash: tokenHash, type: 'recovery' });
    assert.equal(verified.status, 200, JSON.stringify(verified.body));
    assert.deepEqual(Object.keys(verified.body).sort(), ['access_token', 'expires_at']);
    const changed = await request(notes.url, 'POST', '/auth/password', {
      token: verified.body.access_token,
      body: { password: 'a fresh passphrase' },
    });
    assert.equal(changed.status, 204);
    assert.equal((await request(notes.url, 'POST', '/auth/login', { body: { email: user.email, password: PASSWORD } })).status, 401);
    assert.equal(
      (await request(notes.url, 'POST', '/auth/login', { body: { email: user.email, password: 'a fresh passphrase' } })).status,
      200,
    );

    const again = await verify({ token_hash: tokenHash, type: 'recovery' });
    assert.deepEqual([again.status, again.body], [401, { message: 'This link has expired or was already used' }]);
  });

  test('bad input is 400 and spends nothing; a wrong type or unknown hash is 401; the link works after all of them', async () => {
    const { tokenHash } = await mailedLink('own-link-bad');
    for (const body of [
      {},
      { token_hash: tokenHash },
      { type: 'recovery' },
      { token_hash: '', type: 'recovery' },
      { token_hash: tokenHash, type: 'email_change' },
      { token_hash: `${tokenHash}' OR 1=1 --`, type: 'recovery' },
      { token_hash: 'f'.repeat(129), type: 'recovery' },
      { token_hash: 42, type: 'recovery' },
    ]) {
      const res = await verify(body);
      assert.deepEqual(
        [res.status, res.body],
        [400, { message: 'token_hash and type (recovery or signup) are required' }],
        JSON.stringify(body),
      );
    }
    // A recovery token is not a sign-up confirmation, and a made-up hash is nobody's.
    assert.equal((await verify({ token_hash: tokenHash, type: 'signup' })).status, 401);
    assert.equal((await verify({ token_hash: 'a'.repeat(56), type: 'recovery' })).status, 401);
    assert.equal((await verify({ token_hash: tokenHash, type: 'recovery' })).status, 200);
  });

  test("a common password from the reset session is refused in notes' words, naming the reason", async () => {
    const { tokenHash } = await mailedLink('own-link-common');
    const verified = await verify({ token_hash: tokenHash, type: 'recovery' });
    const refused = await request(notes.url, 'POST', '/auth/password', {
      token: verified.body.access_token,
      body: { password: 'password1' },
    });
    assert.equal(refused.status, 400);
    assert.match(refused.body.message, /too common/);
  });
});

describe("notes' own confirmation link (a provider that confirms addresses by mail)", () => {
  let confirmingIdp: RunningIdp;
  let confirmingNotes: RunningNotes;
  before(async () => {
    confirmingIdp = await startIdp({
      env: {
        SMTP_URL: smtp.url,
        TRUST_PROXY: '127.0.0.1',
        IDP_AUTOCONFIRM: 'false',
        ...NOTES_MAIL_ENV,
        IDP_MAILER_LINK_SIGNUP: '{{ .RedirectTo }}?token_hash={{ .TokenHash }}&type=signup',
      },
    });
    confirmingNotes = await startNotes({ idp: confirmingIdp, env: { TRUST_PROXY: '127.0.0.1' } });
  });
  after(async () => {
    await confirmingNotes?.close();
    await confirmingIdp?.close();
  });

  test('register mails a link to /confirm; opening it confirms nothing; POST /auth/verify type signup does, once', async () => {
    const email = `confirm-${Date.now()}@example.com`;
    const login = () => request(confirmingNotes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
    assert.equal((await request(confirmingNotes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD } })).status, 201);
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'Confirm your Notes account');
    const link = linkIn(mail, `${confirmingNotes.url}/confirm?`);
    assert.match(link, /\/confirm\?token_hash=[0-9a-f]{56}&type=signup$/);
    const page = await fetch(link);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /Confirm your address/);
    assert.equal((await login()).status, 401, 'opening the link confirmed the address');

    const tokenHash = new URL(link).searchParams.get('token_hash')!;
    const body = { token_hash: tokenHash, type: 'signup' };
    const call1 = await request(confirmingNotes.url, 'POST', '/auth/verify', { body, headers: { 'x-forwarded-for': uniqueIp() } });
    assert.equal(call1.status, 200);
    assert.equal((await login()).status, 200);
    const call2 = await request(confirmingNotes.url, 'POST', '/auth/verify', { body, headers: { 'x-forwarded-for': uniqueIp() } });
    assert.equal(call2.status, 401);
  });
});
