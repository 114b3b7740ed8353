// Sign-in by mail (EMAIL_SIGNIN), with the mails received by a real SMTP server
// (test/helpers/smtp.ts): each sign-in uses the link or the code read from its mail.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { ACCOUNT_BANNED } from '../src/accounts/sessions.js';
import { EMAIL_SIGNIN_INPUT, EMAIL_SIGNIN_REQUESTED, INVALID_EMAIL_SIGNIN } from '../src/accounts/email-signin.js';
import { base32Decode, totpCode, totpStep } from '../src/kit/totp.js';
import { accountsSuite, assertError, bearer, json, registerUser, startAccounts } from './helpers/accounts.js';
import { uniqueIp } from './helpers/client-ips.js';
import { uniqueEmail } from './helpers/emails.js';
import { type TestSmtp, linkIn, startSmtp } from './helpers/smtp.js';

const suite = accountsSuite();
const PUBLIC_URL = 'https://accounts.example.test';
const PASSWORD = 'mail sign-in 42';
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
let smtp: TestSmtp;
let app: App;
let off: App;

before(async () => {
  smtp = await startSmtp();
  const env = { SMTP_URL: smtp.url, ACCOUNTS_PUBLIC_URL: PUBLIC_URL };
  app = await suite.app({ ...env, EMAIL_SIGNIN: 'true' }, { clock });
  off = await suite.app(env, { clock });
});

after(async () => {
  await smtp.close();
});

function post(target: App, url: string, body: unknown, ip = uniqueIp(), headers: Record<string, string> = {}) {
  return target.inject({
    method: 'POST',
    url,
    payload: JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...headers },
    remoteAddress: ip,
  });
}

/** Asks for a sign-in mail and reads its link token and code. */
async function mailFor(email: string): Promise<{ token: string; code: string; text: string }> {
  const res = await post(app, '/auth/email-signin', { email });
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(res.json(), { status: 200, response: 'OK', message: EMAIL_SIGNIN_REQUESTED });
  const mail = await smtp.waitForMail(email);
  assert.equal(mail.subject, 'Your sign-in link and code');
  const link = linkIn(mail, `${PUBLIC_URL}/email-signin#token=`);
  const code = /code on the sign-in page: (\d{6})/.exec(mail.text)?.[1];
  assert.ok(code, mail.text);
  assert.ok(mail.html?.includes(code));
  return { token: new URL(link).hash.replace(/^#token=/, ''), code, text: mail.text };
}

const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');

const auditOf = async (id: string) =>
  (await suite.pool.query('SELECT event, details FROM audit_log WHERE target_id = $1 ORDER BY id', [id])).rows as {
    event: string;
    details: Record<string, string>;
  }[];

async function newUser(label: string) {
  return registerUser(app, { name: 'Mail User', email: uniqueEmail(label), password: PASSWORD });
}

describe('sign-in by mail', () => {
  test('the code signs in like a password login (the pair, amr otp, auth_time), once; the link of the same mail is spent too', async () => {
    const user = await newUser('code');
    const { token, code } = await mailFor(user.email.toUpperCase());
    const res = await post(app, '/auth/email-signin/verify', { email: user.email, code });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.message, 'Login successful');
    assert.deepEqual(Object.keys(body.data).sort(), ['expires_in', 'refresh_token', 'token', 'user']);
    assert.equal(body.data.user.id, user.id);
    const claims = decodeJwt(body.data.token);
    assert.deepEqual(claims.amr, ['otp']);
    assert.equal(claims.auth_time, Math.floor(clock() / 1000));
    assert.equal((await json(app, 'GET', '/auth/me', undefined, bearer(body.data.token))).statusCode, 200);
    // The mail proved the address.
    assert.equal(body.data.user.emailVerified, true);

    assertError(await post(app, '/auth/email-signin/verify', { email: user.email, code }), 401, INVALID_EMAIL_SIGNIN);
    assertError(await post(app, '/auth/email-signin/verify', { token }), 401, INVALID_EMAIL_SIGNIN);
    const audit = await auditOf(user.id);
    assert.ok(audit.some((e) => e.event === 'email_signin_requested'));
    const success = audit.find((e) => e.event === 'login_succeeded' && e.details.method === 'email');
    assert.equal(success?.details.via, 'code');
  });

  test('the link page opens without spending the token; the token then signs in once', async () => {
    const user = await newUser('link');
    const { token } = await mailFor(user.email);
    const page = await app.inject({ method: 'GET', url: `/email-signin?token=${token}` });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /Sign in by mail/);
    assert.equal((await app.inject({ method: 'GET', url: '/assets/accounts/email-signin.js' })).statusCode, 200);

    const res = await post(app, '/auth/email-signin/verify', { token });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().data.user.id, user.id);
    assertError(await post(app, '/auth/email-signin/verify', { token }), 401, INVALID_EMAIL_SIGNIN);
  });

  test('the web pages sign in with the link into a browser session (cookie), and the sign-in page learns the option is on', async () => {
    const user = await newUser('browser');
    const { token } = await mailFor(user.email);
    const res = await post(app, '/auth/browser/email-signin', { token }, uniqueIp(), { 'x-csrf-protection': '1' });
    assert.equal(res.statusCode, 200, res.body);
    assert.match(String(res.headers['set-cookie']), /accounts_refresh=/);
    assert.equal(res.json().data.user.id, user.id);
    const on = await app.inject({ method: 'GET', url: '/auth/email-signin' });
    assert.equal(on.statusCode, 200);
    assert.equal(on.json().data.enabled, true);
  });

  test('after 10 minutes the code and the link are refused', async () => {
    const user = await newUser('expiry');
    const { token, code } = await mailFor(user.email);
    clock.advance(10 * 60_000 + 1);
    assertError(await post(app, '/auth/email-signin/verify', { email: user.email, code }), 401, INVALID_EMAIL_SIGNIN);
    assertError(await post(app, '/auth/email-signin/verify', { token }), 401, INVALID_EMAIL_SIGNIN);
  });

  test('5 wrong codes void the mail: the right code and the link are refused after', async () => {
    const user = await newUser('guess');
    const { token, code } = await mailFor(user.email);
    const ip = uniqueIp();
    for (let i = 0; i < 5; i++) {
      assertError(await post(app, '/auth/email-signin/verify', { email: user.email, code: wrong(code) }, ip), 401, INVALID_EMAIL_SIGNIN);
    }
    assertError(await post(app, '/auth/email-signin/verify', { email: user.email, code }, uniqueIp()), 401, INVALID_EMAIL_SIGNIN);
    assertError(await post(app, '/auth/email-signin/verify', { token }), 401, INVALID_EMAIL_SIGNIN);
    const failures = (
      await suite.pool.query(
        "SELECT count(*)::int AS n FROM audit_log WHERE event = 'login_failed' AND details->>'method' = 'email' AND details->>'email_hmac' IS NOT NULL AND ip = $1",
        [ip],
      )
    ).rows[0].n;
    assert.equal(failures, 5);
  });

  test('wrong codes count on the login failure budget before the check: past it, even the right code is 429', async () => {
    const user = await newUser('budget');
    const ip = uniqueIp();
    // Ten failures from one address (the login's per-account-and-address limit), over two mails.
    for (let round = 0; round < 2; round++) {
      const { code } = await mailFor(user.email);
      for (let i = 0; i < 5; i++) await post(app, '/auth/email-signin/verify', { email: user.email, code: wrong(code) }, ip);
      clock.advance(61_000);
    }
    const { code } = await mailFor(user.email);
    const refused = await post(app, '/auth/email-signin/verify', { email: user.email, code }, ip);
    assert.equal(refused.statusCode, 429, refused.body);
    // The refusal spent nothing: from another address the code still works.
    assert.equal((await post(app, '/auth/email-signin/verify', { email: user.email, code }, uniqueIp())).statusCode, 200);
  });

  test('an unknown address gets the same answer and no mail', async () => {
    const email = uniqueEmail('nobody');
    const res = await post(app, '/auth/email-signin', { email });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: 200, response: 'OK', message: EMAIL_SIGNIN_REQUESTED });
    await assert.rejects(smtp.waitForMail(email, { timeout: 300 }), /no mail/);
  });

  test('bad input is 400 and spends nothing', async () => {
    const user = await newUser('input');
    const { code } = await mailFor(user.email);
    assertError(await post(app, '/auth/email-signin/verify', {}), 400, EMAIL_SIGNIN_INPUT);
    assertError(await post(app, '/auth/email-signin/verify', { email: user.email }), 400, EMAIL_SIGNIN_INPUT);
    assertError(await post(app, '/auth/email-signin/verify', { email: user.email, code, token: 'x' }), 400, EMAIL_SIGNIN_INPUT);
    assert.equal((await post(app, '/auth/email-signin/verify', { email: user.email, code: '12345' })).statusCode, 400);
    assert.equal((await post(app, '/auth/email-signin/verify', { email: 'not an address', code })).statusCode, 400);
    assert.equal((await post(app, '/auth/email-signin', { email: 'not an address' })).statusCode, 400);
    assert.equal((await post(app, '/auth/email-signin/verify', { email: user.email, code })).statusCode, 200);
  });

  test('a user with TOTP gets the factor challenge; the factor completes the sign-in with amr otp and mfa', async () => {
    const user = await newUser('totp');
    const { token } = (await post(app, '/auth/login', { email: user.email, password: PASSWORD })).json().data;
    const begun = await json(app, 'POST', '/auth/factors/totp', undefined, bearer(token));
    const secret = base32Decode(begun.json().data.secret);
    const confirmed = await json(app, 'POST', '/auth/factors/totp/confirm', { code: totpCode(secret, totpStep(clock())) }, bearer(token));
    assert.equal(confirmed.statusCode, 200, confirmed.body);
    await smtp.waitForMail(user.email);
    clock.advance(30_000);

    const { code } = await mailFor(user.email);
    const res = await post(app, '/auth/email-signin/verify', { email: user.email, code });
    assert.equal(res.statusCode, 200, res.body);
    const data = res.json().data;
    assert.equal(data.mfa_required, true);
    assert.equal(data.token, undefined);
    const done = await post(app, '/auth/login/factor', { challenge: data.challenge, code: totpCode(secret, totpStep(clock())) });
    assert.equal(done.statusCode, 200, done.body);
    assert.deepEqual(decodeJwt(done.json().data.token).amr, ['otp', 'mfa']);
  });

  test('a new request voids the previous mail', async () => {
    const user = await newUser('again');
    const first = await mailFor(user.email);
    clock.advance(61_000);
    const second = await mailFor(user.email);
    assertError(await post(app, '/auth/email-signin/verify', { token: first.token }), 401, INVALID_EMAIL_SIGNIN);
    assertError(
      await post(app, '/auth/email-signin/verify', {
        email: user.email,
        code: first.code === second.code ? wrong(first.code) : first.code,
      }),
      401,
      INVALID_EMAIL_SIGNIN,
    );
    assert.equal((await post(app, '/auth/email-signin/verify', { token: second.token })).statusCode, 200);
  });

  test('a banned account is refused as at login, and gets no session', async () => {
    const user = await newUser('banned');
    const { token } = await mailFor(user.email);
    await suite.pool.query('UPDATE users SET banned_at = now() WHERE id = $1', [user.id]);
    assertError(await post(app, '/auth/email-signin/verify', { token }), 403, ACCOUNT_BANNED);
    const { rows } = await suite.pool.query('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [user.id]);
    assert.equal(rows[0].n, 0);
    assert.ok((await auditOf(user.id)).some((e) => e.event === 'login_refused_banned'));
  });

  test('an unknown address is audited like a known one (no target), and the mail limit answers alike', async () => {
    const email = uniqueEmail('audited');
    const ip = uniqueIp();
    const first = await post(app, '/auth/email-signin', { email }, ip);
    const second = await post(app, '/auth/email-signin', { email }, ip);
    assert.equal(first.body, second.body);
    const { rows } = await suite.pool.query(
      "SELECT count(*)::int AS n FROM audit_log WHERE event = 'email_signin_requested' AND target_id IS NULL AND ip = $1",
      [ip],
    );
    // The second request, within the minute, was answered without a mail or a row.
    assert.equal(rows[0].n, 1);
  });

  test('EMAIL_SIGNIN without SMTP_URL stops the start with a clear reason', async () => {
    await assert.rejects(startAccounts({ pool: suite.pool, env: { EMAIL_SIGNIN: 'true' } }), /EMAIL_SIGNIN is on but SMTP_URL is not set/);
  });

  test('off (the default): the routes and the page are 404 like unknown paths; the status route says off', async () => {
    const user = await registerUser(off, { name: 'Off User', email: uniqueEmail('off'), password: PASSWORD });
    assert.equal((await post(off, '/auth/email-signin', { email: user.email })).statusCode, 404);
    assert.equal((await post(off, '/auth/email-signin/verify', { token: 'x'.repeat(43) })).statusCode, 404);
    assert.equal(
      (await post(off, '/auth/browser/email-signin', { token: 'x'.repeat(43) }, uniqueIp(), { 'x-csrf-protection': '1' })).statusCode,
      404,
    );
    // The question the sign-in page asks is answered either way: off, without a 404.
    const status = await off.inject({ method: 'GET', url: '/auth/email-signin' });
    assert.equal(status.statusCode, 200);
    assert.equal(status.json().data.enabled, false);
    assert.equal((await off.inject({ method: 'GET', url: '/email-signin' })).statusCode, 404);
    await assert.rejects(smtp.waitForMail(user.email, { timeout: 300 }), /no mail/);
  });
});
