// The idp's mails end to end: supabase-js asks (resetPasswordForEmail, signUp without autoconfirm,
// resend), a real SMTP server receives the mail, the test opens the link as a browser would and
// completes the flow with the session it gets. Also: the per-address mail interval
// (over_email_send_rate_limit) counted alike for unknown addresses, the per-address limit on
// /verify, and the answer without SMTP_URL.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { type RunningIdp, createUser, signIn, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';
import { linkIn, startSmtp, type TestSmtp } from './helpers/smtp.js';
import { serviceClient, supabase } from './helpers/supabase.js';
import { startAll } from './helpers/services.js';

const APP = 'http://127.0.0.1:4100';
let smtp: TestSmtp;
let idp: RunningIdp;
let confirming: RunningIdp;
// The confirming idp's clock: real time, which the resend test stops and moves on, so "within
// the interval" and "after it" hold however slowly a loaded machine delivers the first mail.
let frozenAt: number | undefined;
let offsetMs = 0;
const confirmingClock = () => frozenAt ?? Date.now() + offsetMs;
/** Moves the confirming idp's clock `ms` past where it stands (or stopped), and lets it run from there. */
function moveClockOn(ms: number): void {
  offsetMs = (frozenAt ?? confirmingClock()) + ms - Date.now();
  frozenAt = undefined;
}

before(async () => {
  smtp = await startSmtp();
  const env = { SMTP_URL: smtp.url, MAIL_FROM: 'Auth <auth@example.com>', IDP_APP_URL: APP };
  // The confirming idp allows a mail per address per second, so resending needs only a short step of its clock.
  [idp, confirming] = await startAll([
    startIdp({ env: { ...env } }),
    startIdp({ env: { ...env, IDP_SMTP_MAX_FREQUENCY: '1', IDP_AUTOCONFIRM: 'false' }, clock: confirmingClock }),
  ]);
});
after(async () => {
  await Promise.all([idp?.close(), confirming?.close()]);
  await smtp?.close();
});

async function follow(link: string): Promise<URL> {
  const res = await fetch(link, { redirect: 'manual' });
  await res.arrayBuffer();
  assert.equal(res.status, 303);
  return new URL(res.headers.get('location')!);
}

const fragmentOf = (url: URL) => Object.fromEntries(new URLSearchParams(url.hash.slice(1)));

describe("an app's own links (IDP_MAILER_LINK_*), site name, no code", () => {
  let branded: RunningIdp;
  before(async () => {
    branded = await startIdp({
      env: {
        SMTP_URL: smtp.url,
        MAIL_FROM: 'Notes <notes@example.com>',
        IDP_APP_URL: APP,
        IDP_AUTOCONFIRM: 'false',
        IDP_MAILER_SITE_NAME: 'Notes',
        IDP_MAILER_OFFER_CODE: 'false',
        IDP_MAILER_LINK_RECOVERY: '{{ .SiteURL }}/reset-password?token_hash={{ .TokenHash }}&type=recovery',
        IDP_MAILER_LINK_SIGNUP: '{{ .SiteURL }}/confirm?token_hash={{ .TokenHash }}&type=signup&next={{ .RedirectTo }}&email={{ .Email }}',
      },
    });
  });
  after(() => branded?.close());

  test("recovery: the app's page with token_hash and type, opened in a new tab; the hash verifies once by POST /verify", async () => {
    const user = await createUser(branded, uniqueEmail('branded+recover'));
    assert.equal((await supabase(branded).auth.resetPasswordForEmail(user.email, { redirectTo: `${APP}/reset-password` })).error, null);
    const mail = await smtp.waitForMail(user.email);
    assert.equal(mail.subject, 'Reset your Notes password');
    assert.equal(mail.parsed.from?.value[0]?.name, 'Notes');
    assert.equal(mail.from, 'notes@example.com');
    const link = linkIn(mail, `${APP}/reset-password?`);
    assert.match(link, /^http:\/\/127\.0\.0\.1:4100\/reset-password\?token_hash=[0-9a-f]{56}&type=recovery$/);
    assert.ok((mail.html ?? '').includes(`<a href="${link.replaceAll('&', '&#38;')}" target="_blank" rel="noopener">`), mail.html);
    // No six-digit code the app has nowhere to enter, in either part.
    assert.doesNotMatch(mail.text, /\b\d{6}\b|code/i);
    assert.doesNotMatch(mail.html ?? '', /\b\d{6}\b|code/i);
    assert.match(mail.text, /ignore this mail/);

    const tokenHash = new URL(link).searchParams.get('token_hash')!;
    const verified = await supabase(branded).auth.verifyOtp({ token_hash: tokenHash, type: 'recovery' });
    assert.equal(verified.error, null);
    assert.equal(verified.data.user?.id, user.id);
    const again = await supabase(branded).auth.verifyOtp({ token_hash: tokenHash, type: 'recovery' });
    assert.equal(again.error?.code, 'otp_expired');
  });

  test('signup: every placeholder filled (the address encoded); a kind without a template keeps the GET /verify link', async () => {
    const address = uniqueEmail('branded+signup');
    const signUp = await supabase(branded).auth.signUp({
      email: address,
      password: 'a long passphrase',
      options: { emailRedirectTo: `${APP}/welcome` },
    });
    assert.equal(signUp.error, null);
    const mail = await smtp.waitForMail(address);
    assert.equal(mail.subject, 'Confirm your Notes account');
    const link = new URL(linkIn(mail, `${APP}/confirm?`));
    assert.equal(link.searchParams.get('type'), 'signup');
    assert.equal(link.searchParams.get('next'), `${APP}/welcome`);
    assert.equal(link.searchParams.get('email'), address);
    assert.ok(link.search.includes(`email=${encodeURIComponent(address)}`), link.search);
    const verified = await supabase(branded).auth.verifyOtp({ token_hash: link.searchParams.get('token_hash')!, type: 'signup' });
    assert.equal(verified.error, null);
    assert.ok(verified.data.user?.email_confirmed_at);

    const invited = uniqueEmail('branded+invite');
    assert.equal((await serviceClient(branded).auth.admin.inviteUserByEmail(invited)).error, null);
    const invitation = await smtp.waitForMail(invited);
    assert.equal(invitation.subject, 'You have been invited to Notes');
    linkIn(invitation, `${branded.url}/auth/v1/verify?token=`);
  });
});

describe('password recovery mail', () => {
  test('resetPasswordForEmail: the mail carries the link and code; the link signs in for a new password', async () => {
    const user = await createUser(idp, uniqueEmail('recover-mail'));
    const { error } = await supabase(idp).auth.resetPasswordForEmail(user.email, { redirectTo: `${APP}/reset-password` });
    assert.equal(error, null);
    const mail = await smtp.waitForMail(user.email);
    assert.equal(mail.subject, 'Reset Your Password');
    assert.equal(mail.from, 'auth@example.com');
    assert.match(mail.text, /enter the code: \d{6}/);
    const link = linkIn(mail, `${idp.url}/auth/v1/verify?token=`);
    assert.match(mail.html ?? '', /href="http:\/\/127\.0\.0\.1:\d+\/auth\/v1\/verify\?token=[^"]+" target="_blank" rel="noopener"/);

    const landing = await follow(link);
    assert.equal(`${landing.origin}${landing.pathname}`, `${APP}/reset-password`);
    const session = fragmentOf(landing);
    assert.equal(session.type, 'recovery');
    const client = supabase(idp);
    assert.equal(
      (await client.auth.setSession({ access_token: session.access_token!, refresh_token: session.refresh_token! })).error,
      null,
    );
    assert.equal((await client.auth.updateUser({ password: 'the-new-passphrase' })).error, null);
    await signIn(idp, user.email, 'the-new-passphrase');
    await assert.rejects(signIn(idp, user.email, user.password));
    // The link was used up.
    assert.equal(fragmentOf(await follow(link)).error_code, 'otp_expired');
  });

  test('the code from the mail works with verifyOtp instead of the link', async () => {
    const user = await createUser(idp, uniqueEmail('recover-code'));
    await supabase(idp).auth.resetPasswordForEmail(user.email);
    const mail = await smtp.waitForMail(user.email);
    const code = /enter the code: (\d{6})/.exec(mail.text)![1]!;
    const { data, error } = await supabase(idp).auth.verifyOtp({ email: user.email, token: code, type: 'recovery' });
    assert.equal(error, null);
    assert.equal(data.user?.id, user.id);
  });

  test('an unknown address: the same answer and no mail', async () => {
    const nobody = uniqueEmail('recover-nobody');
    const known = await createUser(idp, uniqueEmail('recover-known'));
    const a = await idpRequest(idp, 'POST', '/auth/v1/recover', { body: { email: nobody } });
    const b = await idpRequest(idp, 'POST', '/auth/v1/recover', { body: { email: known.email } });
    assert.deepEqual([a.status, a.body], [200, {}]);
    assert.deepEqual([b.status, b.body], [200, {}]);
    await smtp.waitForMail(known.email);
    await assert.rejects(smtp.waitForMail(nobody, { timeout: 500 }));
  });

  test('the answer does not wait for the token write: a registered address costs what an unknown one does until the answer', async () => {
    const user = await createUser(idp, uniqueEmail('recover-detached'));
    const blocker = new pg.Client({ connectionString: idp.databaseUrl });
    await blocker.connect();
    try {
      // While the token table is locked no token can be written; the answer comes anyway.
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE auth.one_time_tokens IN ACCESS EXCLUSIVE MODE');
      const answered = await Promise.race([
        idpRequest(idp, 'POST', '/auth/v1/recover', { body: { email: user.email } }),
        new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 3000)),
      ]);
      assert.notEqual(answered, 'waited');
      assert.deepEqual(answered === 'waited' ? undefined : [answered.status, answered.body], [200, {}]);
      await assert.rejects(smtp.waitForMail(user.email, { timeout: 300 }));
      await blocker.query('COMMIT');
      // Released: the token is written and its mail goes out.
      await smtp.waitForMail(user.email);
    } finally {
      await blocker.end();
    }
  });

  test('a token write that fails after the answer is logged at error, with no address or token', async () => {
    const failing = await startIdp({ env: { SMTP_URL: smtp.url, LOG_LEVEL: 'error' } });
    const db = new pg.Client({ connectionString: failing.databaseUrl });
    await db.connect();
    try {
      const user = await createUser(failing, uniqueEmail('recover-write-fails'));
      await db.query('ALTER TABLE auth.one_time_tokens RENAME TO one_time_tokens_away');
      const res = await idpRequest(failing, 'POST', '/auth/v1/recover', { body: { email: user.email } });
      assert.deepEqual([res.status, res.body], [200, {}]);
      const deadline = Date.now() + 20_000;
      while (!failing.logs.lines().some((line) => line.msg === 'mail token could not be written')) {
        assert.ok(Date.now() < deadline, 'the failure was not logged');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.ok(!failing.logs.text().includes(user.email));
      await assert.rejects(smtp.waitForMail(user.email, { timeout: 300 }));
    } finally {
      await db.query('ALTER TABLE IF EXISTS auth.one_time_tokens_away RENAME TO one_time_tokens').catch(() => {});
      await db.end();
      await failing.close();
    }
  });

  test('a second mail to one address within the interval: 429 over_email_send_rate_limit, known or not', async () => {
    for (const email of [(await createUser(idp, uniqueEmail('recover-twice'))).email, uniqueEmail('recover-twice-nobody')]) {
      assert.equal((await supabase(idp).auth.resetPasswordForEmail(email)).error, null);
      const again = await idpRequest(idp, 'POST', '/auth/v1/recover', { body: { email } });
      assert.equal(again.status, 429);
      assert.equal(again.body.code, 'over_email_send_rate_limit');
      assert.match(again.body.message, /^For security purposes, you can only request this after \d+ seconds\.$/);
      assert.ok(Number(again.headers.get('retry-after')) > 0);
    }
  });

  test('concurrent requests for one address: exactly one is accepted and one mail goes out', async () => {
    const user = await createUser(idp, uniqueEmail('recover-burst'));
    const replies = await Promise.all(
      Array.from({ length: 10 }, () => idpRequest(idp, 'POST', '/auth/v1/recover', { body: { email: user.email } })),
    );
    assert.deepEqual(replies.map((r) => r.status).sort(), [200, ...Array(9).fill(429)]);
    await smtp.waitForMail(user.email);
    await assert.rejects(smtp.waitForMail(user.email, { timeout: 500 }));
  });

  test('bad input: 400 validation_failed, nothing sent', async () => {
    for (const [body, message] of [
      [{}, 'Password recovery requires an email'],
      [{ email: 'not-an-address' }, 'Unable to validate email address: invalid format'],
    ] as const) {
      const res = await idpRequest(idp, 'POST', '/auth/v1/recover', { body });
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, { code: 'validation_failed', message });
    }
  });
});

describe('sign-up confirmation mail (IDP_AUTOCONFIRM=false)', () => {
  test('signUp mails a link; before it the user cannot sign in, after it they can', async () => {
    const email = uniqueEmail('confirm-mail');
    const { data, error } = await supabase(confirming).auth.signUp({
      email,
      password: 'correct-horse-1',
      options: { emailRedirectTo: `${APP}/welcome` },
    });
    assert.equal(error, null);
    assert.equal(data.session, null);
    await assert.rejects(signIn(confirming, email, 'correct-horse-1'), /email_not_confirmed/);
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'Confirm Your Signup');
    const landing = await follow(linkIn(mail, `${confirming.url}/auth/v1/verify?token=`));
    assert.equal(`${landing.origin}${landing.pathname}`, `${APP}/welcome`);
    assert.equal(fragmentOf(landing).type, 'signup');
    const session = await signIn(confirming, email, 'correct-horse-1');
    assert.equal((session as unknown as { user: { user_metadata: { email_verified: boolean } } }).user.user_metadata.email_verified, true);
  });

  test('resend mails a new link (the old one stops working); a confirmed or unknown address gets none', async () => {
    const email = uniqueEmail('confirm-resend');
    frozenAt = confirmingClock();
    try {
      await supabase(confirming).auth.signUp({ email, password: 'correct-horse-1' });
      const first = linkIn(await smtp.waitForMail(email), `${confirming.url}/auth/v1/verify?token=`);
      // Within the interval between two mails to one address (no time has passed for the idp): refused.
      const early = await supabase(confirming).auth.resend({ type: 'signup', email });
      assert.equal(early.error?.code, 'over_email_send_rate_limit');
      moveClockOn(1100);
      assert.equal((await supabase(confirming).auth.resend({ type: 'signup', email })).error, null);
      const second = linkIn(await smtp.waitForMail(email), `${confirming.url}/auth/v1/verify?token=`);
      assert.notEqual(second, first);
      assert.equal(fragmentOf(await follow(first)).error_code, 'otp_expired');
      assert.equal(fragmentOf(await follow(second)).type, 'signup');
      // Now confirmed, and an address nobody has: accepted, nothing sent.
      const nobody = uniqueEmail('confirm-resend-nobody');
      moveClockOn(1100);
      for (const address of [email, nobody]) {
        assert.equal((await supabase(confirming).auth.resend({ type: 'signup', email: address })).error, null);
      }
      await assert.rejects(smtp.waitForMail(email, { timeout: 300 }));
      await assert.rejects(smtp.waitForMail(nobody, { timeout: 300 }));
    } finally {
      if (frozenAt !== undefined) moveClockOn(0);
    }
  });

  test('resend refusals: an unknown type, phone types, no address', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ type: 'teleport', email: uniqueEmail('x') }, 'Missing one of these types: signup, email_change, sms, phone_change'],
      [{ type: 'sms', phone: '+15555550100' }, 'Phone users are not supported by this identity provider'],
      [{ type: 'signup' }, 'An email address is required'],
    ];
    for (const [body, message] of cases) {
      const res = await idpRequest(confirming, 'POST', '/auth/v1/resend', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(res.body, { code: 'validation_failed', message });
    }
  });
});

describe('email change by the user (PUT /user)', () => {
  async function signedIn(on: RunningIdp, email: string, password: string) {
    const client = supabase(on);
    const { error } = await client.auth.signInWithPassword({ email, password });
    assert.equal(error, null);
    return client;
  }

  test('IDP_AUTOCONFIRM on: a stolen token still cannot change the address; both addresses get a link, the old one is told', async () => {
    const user = await createUser(idp, uniqueEmail('change-auto'));
    const client = await signedIn(idp, user.email, user.password);
    const next = uniqueEmail('change-auto-new');
    const { data, error } = await client.auth.updateUser({ email: next });
    assert.equal(error, null);
    assert.equal(data.user?.email, user.email, 'not changed yet');
    assert.equal(data.user?.new_email, next);
    const toCurrent = await smtp.waitForMail(user.email);
    assert.equal(toCurrent.subject, 'Confirm Email Change', 'the owner is told at the old address');
    await smtp.waitForMail(next);
    await assert.rejects(signIn(idp, next, user.password));
    await signIn(idp, user.email, user.password);
  });

  test('IDP_AUTOCONFIRM off: a link to each address; the change happens when both are followed', async () => {
    const user = await createUser(confirming, uniqueEmail('change-secure'));
    const client = await signedIn(confirming, user.email, user.password);
    const next = uniqueEmail('change-secure-new');
    const { data, error } = await client.auth.updateUser({ email: next }, { emailRedirectTo: `${APP}/email-changed` });
    assert.equal(error, null);
    assert.equal(data.user?.email, user.email);
    assert.equal(data.user?.new_email, next);
    assert.ok(data.user?.email_change_sent_at);

    const toCurrent = await smtp.waitForMail(user.email);
    const toNew = await smtp.waitForMail(next);
    assert.equal(toNew.subject, 'Confirm Email Change');
    const first = await follow(linkIn(toCurrent, `${confirming.url}/auth/v1/verify?token=`));
    assert.equal(`${first.origin}${first.pathname}`, `${APP}/email-changed`);
    assert.deepEqual(fragmentOf(first), {
      message: 'Confirmation link accepted. Please proceed to confirm link sent to the other email',
      sb: '',
    });
    await signIn(confirming, user.email, user.password); // not changed yet

    const second = await follow(linkIn(toNew, `${confirming.url}/auth/v1/verify?token=`));
    assert.equal(fragmentOf(second).type, 'email_change');
    const session = await signIn(confirming, next, user.password);
    assert.equal(session.user.id, user.id);
    await assert.rejects(signIn(confirming, user.email, user.password));
  });

  test('the codes work too: the first gives a message, the second a session with the new address', async () => {
    const user = await createUser(confirming, uniqueEmail('change-codes'));
    const client = await signedIn(confirming, user.email, user.password);
    const next = uniqueEmail('change-codes-new');
    assert.equal((await client.auth.updateUser({ email: next })).error, null);
    const codeOf = async (to: string) => /enter the code: (\d{6})/.exec((await smtp.waitForMail(to)).text)![1]!;
    const [currentCode, newCode] = [await codeOf(user.email), await codeOf(next)];
    const first = await idpRequest(confirming, 'POST', '/auth/v1/verify', { body: { type: 'email_change', email: next, token: newCode } });
    assert.deepEqual(
      [first.status, first.body],
      [200, { msg: 'Confirmation link accepted. Please proceed to confirm link sent to the other email', code: '200' }],
    );
    const { data, error } = await supabase(confirming).auth.verifyOtp({ type: 'email_change', email: user.email, token: currentCode });
    assert.equal(error, null);
    assert.equal(data.user?.email, next);
    assert.equal(data.user?.new_email, undefined);
  });

  test('an address someone else has: 422 email_exists, nothing pending, no mail', async () => {
    const user = await createUser(confirming, uniqueEmail('change-taken'));
    const other = await createUser(confirming, uniqueEmail('change-taken-other'));
    const client = await signedIn(confirming, user.email, user.password);
    const { error } = await client.auth.updateUser({ email: other.email });
    assert.equal(error?.status, 422);
    assert.equal(error?.code, 'email_exists');
    assert.equal((await client.auth.getUser()).data.user?.new_email, undefined);
    await assert.rejects(smtp.waitForMail(user.email, { timeout: 300 }));
  });
});

describe('logs', () => {
  test('no link, code, token hash or session token reaches the log, at the most verbose level', async () => {
    const verbose = await startIdp({ env: { SMTP_URL: smtp.url, LOG_LEVEL: 'trace' } });
    try {
      const user = await createUser(verbose, uniqueEmail('logs'));
      await supabase(verbose).auth.resetPasswordForEmail(user.email, { redirectTo: `${APP}/reset-password` });
      const mail = await smtp.waitForMail(user.email);
      const link = linkIn(mail, `${verbose.url}/auth/v1/verify?token=`);
      const hash = new URL(link).searchParams.get('token')!;
      const code = /enter the code: (\d{6})/.exec(mail.text)![1]!;
      const session = fragmentOf(await follow(link));
      const log = verbose.logs.text();
      assert.match(log, /\/auth\/v1\/verify/); // the request was logged, its token redacted
      for (const secret of [hash, session.access_token!, session.refresh_token!, `"${code}"`, `code: ${code}`]) {
        assert.ok(!log.includes(secret), `log holds ${secret.slice(0, 12)}…`);
      }
    } finally {
      await verbose.close();
    }
  });
});

describe('invitation (inviteUserByEmail)', () => {
  test('creates the user and mails the link; following it confirms and signs in; a confirmed address is 422', async () => {
    const email = uniqueEmail('invite');
    const { data, error } = await serviceClient(idp).auth.admin.inviteUserByEmail(email, {
      data: { team: 'blue' },
      redirectTo: `${APP}/welcome`,
    });
    assert.equal(error, null);
    assert.equal(data.user?.email, email);
    assert.ok(data.user?.invited_at);
    assert.equal(data.user?.email_confirmed_at, undefined);
    assert.deepEqual(data.user?.user_metadata, { team: 'blue' });
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'You have been invited');
    const landing = await follow(linkIn(mail, `${idp.url}/auth/v1/verify?token=`));
    assert.equal(`${landing.origin}${landing.pathname}`, `${APP}/welcome`);
    assert.equal(fragmentOf(landing).type, 'invite');
    const again = await serviceClient(idp).auth.admin.inviteUserByEmail(email);
    assert.equal(again.error?.status, 422);
    assert.equal(again.error?.code, 'email_exists');
    const anon = await supabase(idp).auth.admin.inviteUserByEmail(uniqueEmail('invite-anon'));
    assert.equal(anon.error?.code, 'not_admin');
  });
});

describe('the outbox behind the REST API', () => {
  test('no API role can read mail_outbox, the secret key included (it holds links until they are sent)', async () => {
    for (const apikey of [idp.publishableKey, idp.secretKey]) {
      const res = await idpRequest(idp, 'GET', '/rest/v1/mail_outbox?select=*', { apikey });
      assert.ok(res.status === 401 || res.status === 403, `${res.status} ${res.text}`);
      assert.equal(res.body.code, '42501');
    }
  });
});

describe('without SMTP_URL', () => {
  test('mail flows answer as GoTrue without an SMTP host (accepted, nothing sent) and the start warns once', async () => {
    const quiet = await startIdp({ env: { LOG_LEVEL: 'warn' } });
    try {
      const user = await createUser(quiet, uniqueEmail('no-smtp'));
      assert.equal((await supabase(quiet).auth.resetPasswordForEmail(user.email)).error, null);
      const warnings = quiet.logs.lines().filter((line) => /SMTP_URL is not set/.test(String(line.msg)));
      assert.equal(warnings.length, 1);
    } finally {
      await quiet.close();
    }
  });
});

describe('/verify limit per client address', () => {
  test('past IDP_RATE_LIMIT_VERIFY: 429 over_request_rate_limit, before any token is looked at', async () => {
    const limited = await startIdp({ env: { IDP_RATE_LIMIT_VERIFY: '3' } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await idpRequest(limited, 'POST', '/auth/v1/verify', { body: { type: 'recovery', token_hash: `guess-${i}` } });
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [403, 403, 403, 429, 429]);
    } finally {
      await limited.close();
    }
  });
});
