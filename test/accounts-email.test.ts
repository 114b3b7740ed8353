// Password reset and email verification, with the mails received by a real SMTP
// server (test/helpers/smtp.ts): each flow is completed with the link read from its mail.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { EMAIL_NOT_VERIFIED } from '../src/accounts/service.js';
import { INVALID_EMAIL_TOKEN, MAIL_NOT_CONFIGURED, RESET_REQUESTED, VERIFICATION_REQUESTED } from '../src/accounts/email-flows.js';
import { connectRedis } from '../src/kit/redis.js';
import { accountsSuite, assertError, bearer, startAccounts, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueIp } from './helpers/client-ips.js';
import { watchQueries } from './helpers/database.js';
import { uniqueEmail } from './helpers/emails.js';
import { LogCapture } from './helpers/logs.js';
import { waitReady, withoutRedis } from './helpers/redis.js';
import { type TestSmtp, linkIn, startSmtp } from './helpers/smtp.js';

const suite = accountsSuite();
const PUBLIC_URL = 'https://accounts.example.test';
const PASSWORD = 'first password 1';
const NEW_PASSWORD = 'second password 2';
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
const logs = new LogCapture();
let smtp: TestSmtp;
let app: App;
let verifying: App;

before(async () => {
  smtp = await startSmtp();
  const env = { SMTP_URL: smtp.url, ACCOUNTS_PUBLIC_URL: PUBLIC_URL, LOG_LEVEL: 'debug' };
  app = await suite.app(env, { clock, logs });
  verifying = await suite.app({ ...env, REQUIRE_EMAIL_VERIFICATION: 'true' }, { clock, logs });
});

after(async () => {
  await smtp.close();
});

/** A request from its own client IP, so the per-IP limit of one test does not reach another. */
function post(target: App, url: string, body: unknown, ip = uniqueIp()) {
  return target.inject({
    method: 'POST',
    url,
    payload: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    remoteAddress: ip,
  });
}

const tokenOf = (link: string) => new URL(link).hash.replace(/^#token=/, '');

async function resetLink(email: string): Promise<string> {
  const res = await post(app, '/auth/password-reset', { email });
  assert.equal(res.statusCode, 202, res.body);
  return linkIn(await smtp.waitForMail(email), `${PUBLIC_URL}/reset-password#token=`);
}

async function login(target: App, email: string, password: string) {
  return post(target, '/auth/login', { email, password });
}

const events = async (id: string) =>
  (await suite.pool.query('SELECT event FROM audit_log WHERE target_id = $1 ORDER BY id', [id])).rows.map((r) => r.event as string);

describe('password reset', () => {
  test('the mailed link resets the password: every session and older access token ends, only the new password logs in', async () => {
    const email = uniqueEmail('reset');
    const user = await registerUser(app, { name: 'Reset', email, password: PASSWORD });
    const session = (await login(app, email, PASSWORD)).json().data;
    clock.advance(2000);

    const link = await resetLink(email.toUpperCase());
    assert.match(link, /^https:\/\/accounts\.example\.test\/reset-password#token=[A-Za-z0-9_-]{43}$/);
    const mail = smtp.received.find((m) => m.text.includes(link))!;
    assert.equal(mail.subject, 'Reset your password');
    assert.equal(mail.from, 'no-reply@localhost');
    assert.ok(mail.html?.includes(link));

    const res = await post(app, '/auth/password-reset/confirm', { token: tokenOf(link), new_password: NEW_PASSWORD });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { status: 200, response: 'OK', message: 'Password has been reset' });

    assertError(await login(app, email, PASSWORD), 401, 'Invalid email or password');
    assert.equal((await login(app, email, NEW_PASSWORD)).statusCode, 200);
    assertError(await app.inject({ method: 'GET', url: '/auth/me', headers: bearer(session.token) }), 401, 'Invalid or expired token.');
    assert.equal((await post(app, '/auth/refresh', { refresh_token: session.refresh_token })).statusCode, 401);
    const { rows } = await suite.pool.query('SELECT end_reason FROM sessions WHERE user_id = $1 ORDER BY created_at', [user.id]);
    assert.equal(rows[0].end_reason, 'password_reset');
    // Following the link proved the address.
    const me = await login(app, email, NEW_PASSWORD);
    assert.equal(me.json().data.user.emailVerified, true);
    assert.deepEqual(
      (await events(user.id)).filter((e) => e.startsWith('password_reset')),
      ['password_reset_requested', 'password_reset_completed'],
    );
  });

  test('a link works once; an unknown or expired token is 400 and changes nothing', async () => {
    const email = uniqueEmail('once');
    await registerUser(app, { name: 'Once', email, password: PASSWORD });
    const token = tokenOf(await resetLink(email));
    assert.equal((await post(app, '/auth/password-reset/confirm', { token, new_password: NEW_PASSWORD })).statusCode, 200);
    assertError(await post(app, '/auth/password-reset/confirm', { token, new_password: 'third password 3' }), 400, INVALID_EMAIL_TOKEN);
    assertError(
      await post(app, '/auth/password-reset/confirm', { token: 'x'.repeat(43), new_password: 'third password 3' }),
      400,
      INVALID_EMAIL_TOKEN,
    );

    clock.advance(61_000);
    const expiring = tokenOf(await resetLink(email));
    clock.advance(30 * 60_000 + 1);
    assertError(
      await post(app, '/auth/password-reset/confirm', { token: expiring, new_password: 'third password 3' }),
      400,
      INVALID_EMAIL_TOKEN,
    );
    assert.equal((await login(app, email, NEW_PASSWORD)).statusCode, 200);
  });

  test('check: a working link answers its address and stays usable; a used, expired or unknown one is 400', async () => {
    const email = uniqueEmail('check');
    await registerUser(app, { name: 'Check', email, password: PASSWORD });
    const token = tokenOf(await resetLink(email));
    for (let i = 0; i < 2; i++) {
      const res = await post(app, '/auth/password-reset/check', { token });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), { status: 200, response: 'OK', message: 'Reset link is valid', data: { email } });
    }
    assert.equal((await post(app, '/auth/password-reset/confirm', { token, new_password: NEW_PASSWORD })).statusCode, 200);
    assertError(await post(app, '/auth/password-reset/check', { token }), 400, INVALID_EMAIL_TOKEN);
    assertError(await post(app, '/auth/password-reset/check', { token: 'A'.repeat(43) }), 400, INVALID_EMAIL_TOKEN);
    clock.advance(61_000);
    const expiring = tokenOf(await resetLink(email));
    clock.advance(30 * 60_000 + 1);
    assertError(await post(app, '/auth/password-reset/check', { token: expiring }), 400, INVALID_EMAIL_TOKEN);
    assertError(await post(app, '/auth/password-reset/check', {}), 400, "body must have required property 'token'");
  });

  test('a new password that breaks a registration rule is 400 and leaves the link usable', async () => {
    const email = uniqueEmail('rule');
    await registerUser(app, { name: 'Rule', email, password: PASSWORD });
    const token = tokenOf(await resetLink(email));
    assertError(
      await post(app, '/auth/password-reset/confirm', { token, new_password: 'short' }),
      400,
      'body/new_password must be between 8 and 72 characters',
    );
    assertError(
      await post(app, '/auth/password-reset/confirm', { token, new_password: 'é'.repeat(40) }),
      400,
      'body/new_password must be at most 72 bytes in UTF-8',
    );
    assertError(
      await post(app, '/auth/password-reset/confirm', { token, new_password: 'sunshine' }),
      400,
      'body/new_password is one of the most commonly used passwords: choose one that is harder to guess',
    );
    assert.equal((await login(app, email, PASSWORD)).statusCode, 200);
    assert.equal((await post(app, '/auth/password-reset/confirm', { token, new_password: NEW_PASSWORD })).statusCode, 200);
  });

  test('a completed reset retires the account’s other reset links', async () => {
    const email = uniqueEmail('older');
    await registerUser(app, { name: 'Older', email, password: PASSWORD });
    const first = tokenOf(await resetLink(email));
    clock.advance(61_000);
    const second = tokenOf(await resetLink(email));
    assert.equal((await post(app, '/auth/password-reset/confirm', { token: second, new_password: NEW_PASSWORD })).statusCode, 200);
    assertError(
      await post(app, '/auth/password-reset/confirm', { token: first, new_password: 'third password 3' }),
      400,
      INVALID_EMAIL_TOKEN,
    );
  });

  test('two confirms of one token at once: exactly one succeeds', async () => {
    const email = uniqueEmail('race');
    await registerUser(app, { name: 'Race', email, password: PASSWORD });
    const token = tokenOf(await resetLink(email));
    const answers = await Promise.all(
      ['racing password A', 'racing password B', 'racing password C'].map((new_password) =>
        post(app, '/auth/password-reset/confirm', { token, new_password }),
      ),
    );
    assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, 400, 400]);
    const winner = ['racing password A', 'racing password B', 'racing password C'][answers.findIndex((r) => r.statusCode === 200)]!;
    assert.equal((await login(app, email, winner)).statusCode, 200);
  });

  test('known and unknown addresses: identical status, body and headers, after the same statements; only the known one gets a mail', async () => {
    const known = uniqueEmail('known');
    await registerUser(app, { name: 'Known', email: known, password: PASSWORD });
    const unknown = uniqueEmail('unknown');
    const answer = async (email: string) => {
      const watch = watchQueries(suite.pool, { transactions: true });
      try {
        const res = await post(app, '/auth/password-reset', { email });
        // The mail worker shares the pool; its own statements are not the request's.
        return { res, statements: watch.queries.filter((q) => !/^\s*(UPDATE|DELETE FROM) mail_outbox/.test(q)) };
      } finally {
        watch.stop();
      }
    };
    const a = await answer(known);
    const b = await answer(unknown);
    assert.equal(a.res.statusCode, 202);
    assert.equal(b.res.statusCode, 202);
    assert.equal(a.res.body, b.res.body);
    assert.deepEqual(JSON.parse(a.res.body), { status: 202, response: 'Accepted', message: RESET_REQUESTED });
    const headers = (res: typeof a.res) =>
      Object.fromEntries(Object.entries(res.headers).filter(([name]) => name !== 'date' && name !== 'x-request-id'));
    assert.deepEqual(headers(a.res), headers(b.res));
    assert.ok(a.statements.length >= 4, a.statements.join('\n'));
    assert.deepEqual(a.statements, b.statements);

    await smtp.waitForMail(known);
    const { rows } = await suite.pool.query(
      `SELECT count(*)::int AS n FROM audit_log WHERE event = 'password_reset_requested' AND target_id IS NULL AND details->>'email_hmac' IS NOT NULL`,
    );
    assert.ok(rows[0].n >= 1);
    assert.ok(!smtp.received.some((m) => m.to === unknown));
  });

  test('at most one mail per address per minute, answered the same; the next minute sends again', async () => {
    const email = uniqueEmail('minute');
    const user = await registerUser(app, { name: 'Minute', email, password: PASSWORD });
    await resetLink(email);
    const again = await post(app, '/auth/password-reset', { email });
    assert.equal(again.statusCode, 202);
    assert.deepEqual(again.json(), { status: 202, response: 'Accepted', message: RESET_REQUESTED });
    // The verification resend counts against the same address.
    assert.equal((await post(app, '/auth/verify-email/resend', { email })).statusCode, 202);
    const issued = async () =>
      (await suite.pool.query('SELECT count(*)::int AS n FROM email_tokens WHERE user_id = $1', [user.id])).rows[0].n;
    assert.equal(await issued(), 1);
    clock.advance(60_001);
    await resetLink(email);
    assert.equal(await issued(), 2);
  });

  test('ten requests for one address at once, from ten clients: one token, one mail', async () => {
    const email = uniqueEmail('burst');
    const user = await registerUser(app, { name: 'Burst', email, password: PASSWORD });
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(app, '/auth/password-reset', { email })));
    assert.deepEqual(new Set(answers.map((r) => r.statusCode)), new Set([202]));
    const { rows } = await suite.pool.query('SELECT count(*)::int AS n FROM email_tokens WHERE user_id = $1', [user.id]);
    assert.equal(rows[0].n, 1);
    await smtp.waitForMail(email);
  });

  test('with REDIS_URL the per-address and per-IP limits are shared by every instance', { skip: withoutRedis }, async () => {
    const redis = connectRedis(process.env.REDIS_URL!, () => {});
    const other = connectRedis(process.env.REDIS_URL!, () => {});
    try {
      await Promise.all([waitReady(redis), waitReady(other)]);
      const env = { SMTP_URL: smtp.url, MAIL_REQUESTS_MAX_PER_IP: '3' };
      const first = await suite.app(env, { redis });
      const second = await suite.app(env, { redis: other });
      const email = uniqueEmail('shared');
      const user = await registerUser(first, { name: 'Shared', email, password: PASSWORD });
      assert.equal((await post(first, '/auth/password-reset', { email })).statusCode, 202);
      assert.equal((await post(second, '/auth/password-reset', { email })).statusCode, 202);
      const { rows } = await suite.pool.query('SELECT count(*)::int AS n FROM email_tokens WHERE user_id = $1', [user.id]);
      assert.equal(rows[0].n, 1);
      await smtp.waitForMail(email);
      const ip = uniqueIp();
      for (const target of [first, second, first])
        assert.equal((await post(target, '/auth/password-reset', { email: uniqueEmail('n') }, ip)).statusCode, 202);
      assertError(await post(second, '/auth/password-reset', { email: uniqueEmail('n') }, ip), 429, /^Too many requests/);
    } finally {
      redis.disconnect();
      other.disconnect();
    }
  });

  test('per client IP: beyond MAIL_REQUESTS_MAX_PER_IP, 429 with Retry-After; other clients are unaffected', async () => {
    const limited = await suite.app({ SMTP_URL: smtp.url, MAIL_REQUESTS_MAX_PER_IP: '2' }, { clock });
    const ip = uniqueIp();
    for (let i = 0; i < 2; i++)
      assert.equal((await post(limited, '/auth/password-reset', { email: uniqueEmail('ip') }, ip)).statusCode, 202);
    const refused = await post(limited, '/auth/verify-email/resend', { email: uniqueEmail('ip') }, ip);
    assertError(refused, 429, /^Too many requests from this address, try again in \d+ seconds\.$/);
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.equal((await post(limited, '/auth/password-reset', { email: uniqueEmail('ip') })).statusCode, 202);
  });

  test('bad input is 400 and sends nothing', async () => {
    const before = smtp.received.length;
    assertError(await post(app, '/auth/password-reset', {}), 400, "body must have required property 'email'");
    assertError(await post(app, '/auth/password-reset', { email: 'not-an-address' }), 400, 'body/email must be a valid email address');
    // Unknown properties are dropped, as on every accounts route.
    assert.equal((await post(app, '/auth/password-reset', { email: uniqueEmail(), role: 'admin' })).statusCode, 202);
    assertError(await post(app, '/auth/password-reset', { email: 42 }), 400, 'body/email must be string');
    assertError(await post(app, '/auth/password-reset/confirm', { token: 'a'.repeat(257), new_password: NEW_PASSWORD }), 400, /token/);
    assertError(await post(app, '/auth/password-reset/confirm', { token: 'abc' }), 400, "body must have required property 'new_password'");
    const raw = await app.inject({
      method: 'POST',
      url: '/auth/password-reset',
      payload: 'email=a@b.c',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(raw.statusCode, 415);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(smtp.received.length, before);
  });
});

describe('email verification (REQUIRE_EMAIL_VERIFICATION)', () => {
  test('registration mails a link; login is 403 until it is followed (401 first for a wrong password); then 200', async () => {
    const email = uniqueEmail('verify');
    const user = await registerUser(verifying, { name: 'Verify', email, password: PASSWORD });
    assert.equal(user.emailVerified, false);
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'Confirm your email address');
    const link = linkIn(mail, `${PUBLIC_URL}/verify-email#token=`);

    assertError(await login(verifying, email, 'wrong password 9'), 401, 'Invalid email or password');
    assertError(await login(verifying, email, PASSWORD), 403, EMAIL_NOT_VERIFIED);

    const res = await post(verifying, '/auth/verify-email', { token: tokenOf(link) });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().data.id, user.id);
    assert.equal(res.json().data.emailVerified, true);
    assertError(await post(verifying, '/auth/verify-email', { token: tokenOf(link) }), 400, INVALID_EMAIL_TOKEN);

    const ok = await login(verifying, email, PASSWORD);
    assert.equal(ok.statusCode, 200);
    const me = await verifying.inject({ method: 'GET', url: '/auth/me', headers: bearer(ok.json().data.token) });
    assert.equal(me.json().data.emailVerified, true);
    assert.deepEqual(
      (await events(user.id)).filter((e) => /verif|refused/.test(e)),
      ['email_verification_sent', 'login_refused_unverified', 'email_verified'],
    );
  });

  test('resend: 202 with one body for unknown, verified and unverified addresses; only the unverified one gets a mail', async () => {
    const unverified = uniqueEmail('unverified');
    await registerUser(verifying, { name: 'Unverified', email: unverified, password: PASSWORD });
    const firstLink = linkIn(await smtp.waitForMail(unverified), `${PUBLIC_URL}/verify-email#token=`);
    const verified = uniqueEmail('verified');
    await registerUser(verifying, { name: 'Verified', email: verified, password: PASSWORD });
    const verifiedLink = linkIn(await smtp.waitForMail(verified), `${PUBLIC_URL}/verify-email#token=`);
    assert.equal((await post(verifying, '/auth/verify-email', { token: tokenOf(verifiedLink) })).statusCode, 200);
    const unknown = uniqueEmail('nobody');

    const bodies = [];
    for (const email of [unknown, verified, unverified]) {
      const res = await post(verifying, '/auth/verify-email/resend', { email });
      assert.equal(res.statusCode, 202);
      bodies.push(res.body);
    }
    assert.equal(new Set(bodies).size, 1);
    assert.deepEqual(JSON.parse(bodies[0]!), { status: 202, response: 'Accepted', message: VERIFICATION_REQUESTED });
    const second = linkIn(await smtp.waitForMail(unverified), `${PUBLIC_URL}/verify-email#token=`);
    assert.notEqual(second, firstLink);
    assert.equal((await post(verifying, '/auth/verify-email', { token: tokenOf(second) })).statusCode, 200);
    // Verifying retires the earlier link.
    assertError(await post(verifying, '/auth/verify-email', { token: tokenOf(firstLink) }), 400, INVALID_EMAIL_TOKEN);
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(!smtp.received.some((m) => m.to === unknown));
    assert.equal(smtp.received.filter((m) => m.to === verified).length, 1);
  });

  test('a verification link expires after 24 hours', async () => {
    const email = uniqueEmail('late');
    await registerUser(verifying, { name: 'Late', email, password: PASSWORD });
    const link = linkIn(await smtp.waitForMail(email), `${PUBLIC_URL}/verify-email#token=`);
    clock.advance(24 * 3600_000 + 1);
    assertError(await post(verifying, '/auth/verify-email', { token: tokenOf(link) }), 400, INVALID_EMAIL_TOKEN);
    assertError(await login(verifying, email, PASSWORD), 403, EMAIL_NOT_VERIFIED);
  });

  test('off (the default): registration sends no mail and login works; the user carries emailVerified false', async () => {
    const email = uniqueEmail('optional');
    const user = await registerUser(app, { name: 'Optional', email, password: PASSWORD });
    assert.equal(user.emailVerified, false);
    assert.equal((await login(app, email, PASSWORD)).statusCode, 200);
    await assert.rejects(smtp.waitForMail(email, { timeout: 300 }), /no mail/);
    // Verification is still available on request.
    assert.equal((await post(app, '/auth/verify-email/resend', { email })).statusCode, 202);
    const link = linkIn(await smtp.waitForMail(email), `${PUBLIC_URL}/verify-email#token=`);
    assert.equal((await post(app, '/auth/verify-email', { token: tokenOf(link) })).json().data.emailVerified, true);
  });

  test('REQUIRE_EMAIL_VERIFICATION without SMTP_URL stops the start with a clear reason', async () => {
    await assert.rejects(
      startAccounts({ pool: suite.pool, env: { REQUIRE_EMAIL_VERIFICATION: 'true' } }),
      /REQUIRE_EMAIL_VERIFICATION is on but SMTP_URL is not set/,
    );
  });
});

describe('SMTP outage', () => {
  test('a reset requested while the SMTP server is down is answered 202 at once, and its mail arrives when the server is back', async () => {
    const flaky = await startSmtp();
    // A database of its own: the workers of this file's other apps would send its mail to their server.
    const outage = await startAccounts({
      env: { SMTP_URL: flaky.url, ACCOUNTS_PUBLIC_URL: PUBLIC_URL },
      mailWorker: { retryBaseMs: 100, retryMaxMs: 200 },
    });
    const outageApp = outage.app;
    try {
      const email = uniqueEmail('outage');
      await registerUser(outageApp, { name: 'Outage', email, password: PASSWORD });
      await flaky.stop();
      const started = Date.now();
      const res = await post(outageApp, '/auth/password-reset', { email });
      assert.equal(res.statusCode, 202);
      assert.ok(Date.now() - started < 2000, 'the request does not wait for SMTP');
      const attempts = async () =>
        (await outage.pool.query('SELECT attempts FROM mail_outbox WHERE recipient = $1', [email])).rows[0]?.attempts ?? 0;
      while ((await attempts()) < 2) await new Promise((r) => setTimeout(r, 50));
      await flaky.start();
      const link = linkIn(await flaky.waitForMail(email), `${PUBLIC_URL}/reset-password#token=`);
      assert.equal(
        (await post(outageApp, '/auth/password-reset/confirm', { token: tokenOf(link), new_password: NEW_PASSWORD })).statusCode,
        200,
      );
    } finally {
      await outage.close();
      await flaky.close();
    }
  });
});

describe('without SMTP_URL', () => {
  test('the mail endpoints answer 503 with a clear message, and the start warns once', async () => {
    const warnings = new LogCapture();
    const noMail = await suite.app({ LOG_LEVEL: 'warn' }, { logs: warnings });
    assertError(await post(noMail, '/auth/password-reset', { email: uniqueEmail() }), 503, MAIL_NOT_CONFIGURED);
    assertError(await post(noMail, '/auth/verify-email/resend', { email: uniqueEmail() }), 503, MAIL_NOT_CONFIGURED);
    const lines = warnings.lines().filter((l) => l.event === 'mail_not_configured');
    assert.equal(lines.length, 1);
    assert.match(String(lines[0]!.msg), /SMTP_URL is not set/);
  });
});

test('no token or link reaches the audit log or the service log', async () => {
  const links = smtp.received.map((m) => m.text.match(/#token=([A-Za-z0-9_-]+)/)?.[1]).filter((t): t is string => t !== undefined);
  assert.ok(links.length >= 5);
  const audit = JSON.stringify((await suite.pool.query('SELECT * FROM audit_log')).rows);
  const logText = logs.text();
  assert.ok(logText.includes('password_reset_requested'));
  for (const token of links) {
    assert.ok(!audit.includes(token), 'a token in the audit log');
    assert.ok(!logText.includes(token), 'a token in the log');
  }
  // Sent mail leaves no link behind in the outbox.
  const { rows } = await suite.pool.query("SELECT count(*)::int AS n FROM mail_outbox WHERE text_body LIKE '%#token=%'");
  assert.equal(rows[0].n, 0);
});

noSecretInAnyResponse();
