// Password reset through notes over real HTTP: POST /auth/password-reset makes the real idp mail a
// recovery link (a real SMTP server receives it), the test opens the link as a browser would, lands
// on notes' /reset-password with the session in the fragment, and sets the new password with
// POST /auth/password. Also: the same 202 for unknown addresses, the mail interval, every refusal,
// and the idp's per-caller limit passed on as 429.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { PASSWORD, type RunningNotes, signUp, startNotes, startUpstream } from './helpers/notes.js';
import { request } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';
import { uniqueIp } from './helpers/client-ips.js';
import { linkIn, startSmtp, type TestSmtp } from './helpers/smtp.js';

/** Notes listens on a port chosen at start, so the idp allows the reset page on any local port. */
const NOTES_PAGES = 'http://127.0.0.1:*/**';
const ACCEPTED = { message: 'If this address belongs to an account, a password reset link is on its way' };

let smtp: TestSmtp;
let idp: RunningIdp;
let notes: RunningNotes;

before(async () => {
  smtp = await startSmtp();
  // Trusts notes (127.0.0.1) to name its caller, as npm start sets it up.
  idp = await startIdp({
    env: { SMTP_URL: smtp.url, TRUST_PROXY: '127.0.0.1', IDP_RATE_LIMIT_OTP: '1000', IDP_REDIRECT_URLS: NOTES_PAGES },
  });
  notes = await startNotes({ idp, env: { TRUST_PROXY: '127.0.0.1' } });
});
after(async () => {
  await notes?.close();
  await idp?.close();
  await smtp?.close();
});

const requestReset = (email: unknown, ip = uniqueIp()) =>
  request(notes.url, 'POST', '/auth/password-reset', { body: { email }, headers: { 'x-forwarded-for': ip } });
const setPassword = (token: string | undefined, body: unknown) =>
  request(notes.url, 'POST', '/auth/password', { body, ...(token === undefined ? {} : { token }) });

/** The recovery mail of `email`: opens its link and returns where the browser lands. */
async function openRecoveryMail(email: string): Promise<URL> {
  const mail = await smtp.waitForMail(email);
  const res = await fetch(linkIn(mail, `${idp.url}/auth/v1/verify?token=`), { redirect: 'manual' });
  await res.arrayBuffer();
  assert.equal(res.status, 303);
  return new URL(res.headers.get('location')!);
}

const fragmentOf = (url: URL) => Object.fromEntries(new URLSearchParams(url.hash.slice(1)));

/** A user with a recovery session, as the reset page receives it. */
async function recoverySession(tag: string) {
  const user = await signUp(notes.url, tag);
  assert.equal((await requestReset(user.email)).status, 202);
  return { user, session: fragmentOf(await openRecoveryMail(user.email)) };
}

describe('POST /auth/password-reset then POST /auth/password', () => {
  test('the mail leads to <NOTES_PUBLIC_URL>/reset-password with a recovery session, which sets the new password', async () => {
    const user = await signUp(notes.url, 'reset-flow');
    const accepted = await requestReset(user.email);
    assert.equal(accepted.status, 202);
    assert.deepEqual(accepted.body, ACCEPTED);
    const landing = await openRecoveryMail(user.email);
    assert.equal(`${landing.origin}${landing.pathname}`, `${notes.url}/reset-password`);
    const session = fragmentOf(landing);
    assert.equal(session.type, 'recovery');
    assert.ok(session.refresh_token && session.expires_at);

    const changed = await setPassword(session.access_token, { password: 'a fresh passphrase' });
    assert.equal(changed.status, 204, JSON.stringify(changed.body));
    assert.equal((await request(notes.url, 'POST', '/auth/login', { body: { email: user.email, password: PASSWORD } })).status, 401);
    assert.equal(
      (await request(notes.url, 'POST', '/auth/login', { body: { email: user.email, password: 'a fresh passphrase' } })).status,
      200,
    );
    // The recovery session stays (the user is signed in); the sessions from before end.
    assert.equal((await request(notes.url, 'GET', '/notes', { token: session.access_token })).status, 200);
    assert.equal((await request(notes.url, 'GET', '/notes', { token: user.token })).status, 401);
  });

  test('an unknown address: the same status, body and headers, and no mail', async () => {
    const known = await signUp(notes.url, 'reset-known');
    const nobody = uniqueEmail('reset-nobody');
    const a = await requestReset(known.email);
    const b = await requestReset(nobody);
    assert.deepEqual([b.status, b.body], [a.status, a.body]);
    const shape = (h: Headers) =>
      [...h.keys()].filter((k) => !['date', 'x-request-id'].includes(k)).map((k) => `${k}: ${k === 'content-length' ? h.get(k) : ''}`);
    assert.deepEqual(shape(b.headers), shape(a.headers));
    await smtp.waitForMail(known.email);
    await assert.rejects(smtp.waitForMail(nobody, { timeout: 500 }));
  });

  test('a second request within the mail interval: 202 again, and only the first mail goes out', async () => {
    const user = await signUp(notes.url, 'reset-twice');
    assert.equal((await requestReset(user.email)).status, 202);
    const second = await requestReset(user.email);
    assert.deepEqual([second.status, second.body], [202, ACCEPTED]);
    await smtp.waitForMail(user.email);
    await assert.rejects(smtp.waitForMail(user.email, { timeout: 500 }));
  });

  test('bad input: 400 with a fixed message, nothing sent', async () => {
    for (const body of [{}, { email: '' }, { email: 5 }, { email: 'not an address' }, { email: `${'a'.repeat(250)}@example.com` }]) {
      const res = await request(notes.url, 'POST', '/auth/password-reset', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(res.body, { message: 'email must be a valid email address' }, JSON.stringify(body));
    }
  });

  test('POST /auth/password refusals: weak, unchanged or missing password → 400; the token still works after', async () => {
    const { session } = await recoverySession('reset-refusals');
    const cases: Array<[unknown, string]> = [
      [{ password: 'abc' }, 'Password is too weak: use at least 6 characters, longer is better'],
      [{ password: PASSWORD }, 'The new password must be different from the current one'],
      [{ password: 'x'.repeat(80) }, 'The identity provider refused this password'],
      [{}, 'password is required'],
      [{ password: '' }, 'password is required'],
      [{ password: 42 }, 'password is required'],
    ];
    for (const [body, message] of cases) {
      const res = await setPassword(session.access_token, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(res.body, { message }, JSON.stringify(body));
    }
    assert.equal((await setPassword(session.access_token, { password: 'finally a good one' })).status, 204);
  });

  test('POST /auth/password without a valid token: 401 as on the other routes, nothing changed', async () => {
    const user = await signUp(notes.url, 'reset-badtoken');
    assert.deepEqual((await setPassword(undefined, { password: 'whatever-long' })).body, { message: 'Missing bearer token' });
    for (const token of ['not-a-jwt', `${user.token.slice(0, -4)}AAAA`]) {
      const res = await setPassword(token, { password: 'whatever-long' });
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, { message: 'Invalid or expired token' });
    }
    assert.equal((await request(notes.url, 'POST', '/auth/login', { body: { email: user.email, password: PASSWORD } })).status, 200);
  });

  test('NOTES_PUBLIC_URL names the page the link leads to (the URL users reach notes at, a path included)', async () => {
    const proxied = await startNotes({ idp, env: { NOTES_PUBLIC_URL: 'http://127.0.0.1:8443/notes/' } });
    try {
      const user = await signUp(notes.url, 'reset-public-url');
      const res = await request(proxied.url, 'POST', '/auth/password-reset', { body: { email: user.email } });
      assert.equal(res.status, 202);
      const landing = await openRecoveryMail(user.email);
      assert.equal(`${landing.origin}${landing.pathname}`, 'http://127.0.0.1:8443/notes/reset-password');
    } finally {
      await proxied.close();
    }
  });

  test('a used recovery link lands on the page with the error in the fragment', async () => {
    const user = await signUp(notes.url, 'reset-used');
    await requestReset(user.email);
    const mail = await smtp.waitForMail(user.email);
    const link = linkIn(mail, `${idp.url}/auth/v1/verify?token=`);
    await (await fetch(link, { redirect: 'manual' })).arrayBuffer();
    const again = await fetch(link, { redirect: 'manual' });
    const landing = new URL(again.headers.get('location')!);
    assert.equal(`${landing.origin}${landing.pathname}`, `${notes.url}/reset-password`);
    assert.deepEqual(fragmentOf(landing), {
      error: 'access_denied',
      error_code: 'otp_expired',
      error_description: 'Email link is invalid or has expired',
      sb: '',
    });
  });
});

describe('limits and outages', () => {
  test("past the idp's per-caller limit: 429 with Retry-After; another caller is unaffected", async () => {
    const limitedIdp = await startIdp({
      env: { SMTP_URL: smtp.url, TRUST_PROXY: '127.0.0.1', IDP_RATE_LIMIT_OTP: '2', IDP_REDIRECT_URLS: NOTES_PAGES },
    });
    const limitedNotes = await startNotes({ idp: limitedIdp, env: { TRUST_PROXY: '127.0.0.1' } });
    try {
      const ip = uniqueIp();
      const ask = (caller: string) =>
        request(limitedNotes.url, 'POST', '/auth/password-reset', {
          body: { email: uniqueEmail('reset-limit') },
          headers: { 'x-forwarded-for': caller },
        });
      assert.equal((await ask(ip)).status, 202);
      assert.equal((await ask(ip)).status, 202);
      const limited = await ask(ip);
      assert.equal(limited.status, 429);
      assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal((await ask(uniqueIp())).status, 202);
    } finally {
      await limitedNotes.close();
      await limitedIdp.close();
    }
  });

  test('idp failing: 503 with Retry-After, not a 202 that hides it', async () => {
    const failing = await startUpstream(idp.url, () => ({ status: 500, body: { code: 'unexpected_failure', message: 'boom' } }));
    const failingNotes = await startNotes({ idp: { ...idp, url: failing.url } });
    try {
      const res = await request(failingNotes.url, 'POST', '/auth/password-reset', { body: { email: uniqueEmail('reset-down') } });
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
    } finally {
      await failingNotes.close();
      await failing.close();
    }
  });
});
