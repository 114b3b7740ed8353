// Passwordless sign-in by mail (supabase-js signInWithOtp, POST /auth/v1/otp) end to end, with a
// real SMTP server: a known user gets a magic link and code, an unknown address becomes a user
// unless shouldCreateUser is false (422 otp_disabled) or sign-ups are off, the code signs in with
// verifyOtp type 'email', five wrong codes void it, and the per-address mail interval and the
// service's hourly mail quota hold.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { type RunningIdp, createUser, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';
import { linkIn, type ReceivedMail, startSmtp, type TestSmtp } from './helpers/smtp.js';
import { supabase } from './helpers/supabase.js';
import { startAll } from './helpers/services.js';

const APP = 'http://127.0.0.1:4100';
let smtp: TestSmtp;
let idp: RunningIdp;
let confirming: RunningIdp;
let closed: RunningIdp;
let quota: RunningIdp;

before(async () => {
  smtp = await startSmtp();
  const env = { SMTP_URL: smtp.url, IDP_APP_URL: APP };
  [idp, confirming, closed, quota] = await startAll([
    startIdp({ env }),
    startIdp({ env: { ...env, IDP_AUTOCONFIRM: 'false' } }),
    startIdp({ env: { ...env, IDP_DISABLE_SIGNUP: 'true' } }),
    startIdp({ env: { ...env, IDP_RATE_LIMIT_EMAIL_SENT: '1' } }),
  ]);
});
after(async () => {
  await Promise.all([idp?.close(), confirming?.close(), closed?.close(), quota?.close()]);
  await smtp?.close();
});

const codeIn = (mail: ReceivedMail) => /enter the code: (\d{6})/.exec(mail.text)![1]!;

async function userRow(on: RunningIdp, email: string) {
  const db = new pg.Client({ connectionString: on.databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query('SELECT id, email_confirmed_at, raw_user_meta_data FROM auth.users WHERE email = $1', [email]);
    return rows[0] as { id: string; email_confirmed_at: Date | null; raw_user_meta_data: Record<string, unknown> } | undefined;
  } finally {
    await db.end();
  }
}

describe('signInWithOtp for a known user', () => {
  test('a magic link mail with a code; the code signs in with verifyOtp type email', async () => {
    const user = await createUser(idp, uniqueEmail('otp-known'));
    const asked = await supabase(idp).auth.signInWithOtp({ email: user.email });
    assert.equal(asked.error, null);
    assert.deepEqual(asked.data, { user: null, session: null });
    const mail = await smtp.waitForMail(user.email);
    assert.equal(mail.subject, 'Your Magic Link');
    const link = new URL(linkIn(mail, `${idp.url}/auth/v1/verify?token=`));
    assert.equal(link.searchParams.get('type'), 'magiclink');

    const { data, error } = await supabase(idp).auth.verifyOtp({ email: user.email, token: codeIn(mail), type: 'email' });
    assert.equal(error, null);
    assert.equal(data.user?.id, user.id);
    assert.ok(data.session?.access_token);
    // Used up: the link of the same token no longer works.
    const again = await supabase(idp).auth.verifyOtp({ token_hash: link.searchParams.get('token')!, type: 'magiclink' });
    assert.equal(again.error?.code, 'otp_expired');
  });

  test("the link's token hash signs in with verifyOtp type magiclink, and the answer is 200 {}", async () => {
    const user = await createUser(idp, uniqueEmail('otp-hash'));
    const res = await idpRequest(idp, 'POST', '/auth/v1/otp', { body: { email: user.email, create_user: true, data: {} } });
    assert.deepEqual([res.status, res.body], [200, {}]);
    const mail = await smtp.waitForMail(user.email);
    const link = new URL(linkIn(mail, `${idp.url}/auth/v1/verify?token=`));
    const { data, error } = await supabase(idp).auth.verifyOtp({ token_hash: link.searchParams.get('token')!, type: 'magiclink' });
    assert.equal(error, null);
    assert.equal(data.user?.id, user.id);
  });

  test('five wrong codes void the token: the right code then fails', async () => {
    const user = await createUser(idp, uniqueEmail('otp-guess'));
    assert.equal((await supabase(idp).auth.signInWithOtp({ email: user.email })).error, null);
    const code = codeIn(await smtp.waitForMail(user.email));
    for (let i = 1; i <= 5; i++) {
      const wrong = String((Number(code) + i) % 1_000_000).padStart(6, '0');
      const { error } = await supabase(idp).auth.verifyOtp({ email: user.email, token: wrong, type: 'email' });
      assert.equal(error?.code, 'otp_expired');
    }
    const right = await supabase(idp).auth.verifyOtp({ email: user.email, token: code, type: 'email' });
    assert.equal(right.error?.code, 'otp_expired');
    assert.equal(right.data.session, null);
  });

  test('one mail per address per IDP_SMTP_MAX_FREQUENCY, whether or not the address is registered', async () => {
    const user = await createUser(idp, uniqueEmail('otp-frequency'));
    assert.equal((await supabase(idp).auth.signInWithOtp({ email: user.email })).error, null);
    await smtp.waitForMail(user.email);
    const second = await supabase(idp).auth.signInWithOtp({ email: user.email });
    assert.equal(second.error?.status, 429);
    assert.equal(second.error?.code, 'over_email_send_rate_limit');
    assert.match(second.error?.message ?? '', /^For security purposes, you can only request this after \d+ seconds\.$/);
    await assert.rejects(smtp.waitForMail(user.email, { timeout: 500 }));

    const nobody = uniqueEmail('otp-frequency-new');
    assert.equal(
      (await supabase(idp).auth.signInWithOtp({ email: nobody, options: { shouldCreateUser: false } })).error?.code,
      'otp_disabled',
    );
    assert.equal((await supabase(idp).auth.signInWithOtp({ email: nobody })).error, null);
    assert.equal((await supabase(idp).auth.signInWithOtp({ email: nobody })).error?.code, 'over_email_send_rate_limit');
  });
});

describe('signInWithOtp for an unknown address', () => {
  test('shouldCreateUser (the default) creates the user with data and mails a magic link (IDP_AUTOCONFIRM)', async () => {
    const email = uniqueEmail('otp-new');
    const asked = await supabase(idp).auth.signInWithOtp({
      email,
      options: { data: { name: 'Dana' }, emailRedirectTo: `${APP}/welcome` },
    });
    assert.equal(asked.error, null);
    const row = await userRow(idp, email);
    assert.ok(row, 'the user exists');
    assert.equal(row.raw_user_meta_data.name, 'Dana');
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'Your Magic Link');
    const link = new URL(linkIn(mail, `${idp.url}/auth/v1/verify?token=`));
    assert.equal(link.searchParams.get('redirect_to'), `${APP}/welcome`);
    const { data, error } = await supabase(idp).auth.verifyOtp({ email, token: codeIn(mail), type: 'email' });
    assert.equal(error, null);
    assert.equal(data.user?.id, row.id);
    assert.equal(data.user?.user_metadata.name, 'Dana');
    assert.deepEqual(
      data.user?.identities?.map((identity) => identity.provider),
      ['email'],
    );
  });

  test('without IDP_AUTOCONFIRM: an unconfirmed user and the sign-up confirmation, whose code signs in and confirms', async () => {
    const email = uniqueEmail('otp-confirm');
    assert.equal((await supabase(confirming).auth.signInWithOtp({ email })).error, null);
    assert.equal((await userRow(confirming, email))?.email_confirmed_at, null);
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'Confirm Your Signup');
    const { data, error } = await supabase(confirming).auth.verifyOtp({ email, token: codeIn(mail), type: 'email' });
    assert.equal(error, null);
    assert.ok(data.user?.email_confirmed_at);
    assert.ok((await userRow(confirming, email))?.email_confirmed_at);
  });

  test('a user who never confirmed: with IDP_AUTOCONFIRM a magic link, whose code confirms; with IDP_DISABLE_SIGNUP refused', async () => {
    const adminCreate = (on: RunningIdp, label: string) =>
      idpRequest(on, 'POST', '/auth/v1/admin/users', {
        apikey: on.secretKey,
        body: { email: uniqueEmail(label), password: 'correct-horse-1' },
      });
    const created = await adminCreate(idp, 'otp-unconfirmed');
    assert.equal(created.status, 200);
    const email = created.body.email as string;
    assert.equal((await userRow(idp, email))?.email_confirmed_at, null);
    assert.equal((await supabase(idp).auth.signInWithOtp({ email })).error, null);
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'Your Magic Link');
    assert.equal((await supabase(idp).auth.verifyOtp({ email, token: codeIn(mail), type: 'email' })).error, null);
    assert.ok((await userRow(idp, email))?.email_confirmed_at);

    const waiting = await adminCreate(closed, 'otp-unconfirmed-closed');
    const { error } = await supabase(closed).auth.signInWithOtp({ email: waiting.body.email });
    assert.equal(error?.code, 'signup_disabled');
  });

  test('shouldCreateUser false: 422 otp_disabled, nobody created, no mail', async () => {
    const email = uniqueEmail('otp-refused');
    const { error } = await supabase(idp).auth.signInWithOtp({ email, options: { shouldCreateUser: false } });
    assert.equal(error?.status, 422);
    assert.equal(error?.code, 'otp_disabled');
    assert.equal(error?.message, 'Signups not allowed for otp');
    assert.equal(await userRow(idp, email), undefined);
    await assert.rejects(smtp.waitForMail(email, { timeout: 500 }));
    // A known user with shouldCreateUser false still gets the mail.
    const user = await createUser(idp, uniqueEmail('otp-refused-known'));
    assert.equal((await supabase(idp).auth.signInWithOtp({ email: user.email, options: { shouldCreateUser: false } })).error, null);
    await smtp.waitForMail(user.email);
  });

  test('IDP_DISABLE_SIGNUP: an unknown address is 422 signup_disabled and nobody is created; a known user still signs in', async () => {
    const email = uniqueEmail('otp-closed');
    const { error } = await supabase(closed).auth.signInWithOtp({ email });
    assert.equal(error?.status, 422);
    assert.equal(error?.code, 'signup_disabled');
    assert.equal(await userRow(closed, email), undefined);
    await assert.rejects(smtp.waitForMail(email, { timeout: 500 }));

    const admin = await idpRequest(closed, 'POST', '/auth/v1/admin/users', {
      apikey: closed.secretKey,
      body: { email: uniqueEmail('otp-closed-known'), password: 'correct-horse-1', email_confirm: true },
    });
    assert.equal(admin.status, 200);
    const known = admin.body.email as string;
    assert.equal((await supabase(closed).auth.signInWithOtp({ email: known })).error, null);
    const mail = await smtp.waitForMail(known);
    assert.equal((await supabase(closed).auth.verifyOtp({ email: known, token: codeIn(mail), type: 'email' })).error, null);
  });
});

describe('POST /otp requests and limits', () => {
  test('a known and an unknown address get the same answer', async () => {
    const user = await createUser(idp, uniqueEmail('otp-same'));
    const a = await idpRequest(idp, 'POST', '/auth/v1/otp', { body: { email: user.email } });
    const b = await idpRequest(idp, 'POST', '/auth/v1/otp', { body: { email: uniqueEmail('otp-same-new') } });
    assert.deepEqual([a.status, a.body], [200, {}]);
    assert.deepEqual([b.status, b.body], [200, {}]);
  });

  test('bad requests: 400 and nothing created', async () => {
    const cases: [Record<string, unknown>, number, string][] = [
      [{}, 400, 'One of email or phone must be set'],
      [{ phone: '+15550100' }, 400, 'Unsupported phone provider'],
      [{ email: 'a@example.com', phone: '+15550100' }, 400, 'Only an email address or phone number should be provided'],
      [{ email: 'not an address' }, 400, 'Unable to validate email address: invalid format'],
      [{ email: uniqueEmail('otp-bad'), create_user: 'yes' }, 400, ''],
      [{ email: uniqueEmail('otp-bad'), data: 'x' }, 400, ''],
    ];
    for (const [body, status, message] of cases) {
      const res = await idpRequest(idp, 'POST', '/auth/v1/otp', { body });
      assert.equal(res.status, status, JSON.stringify(body));
      if (message) assert.equal(res.body.msg ?? res.body.message, message, JSON.stringify(res.body));
      if (typeof body.email === 'string') assert.equal(await userRow(idp, body.email), undefined);
    }
  });

  test("the service's hourly mail quota: charged for a mail sent, 429 when spent, and then nobody is created", async () => {
    const refused = uniqueEmail('otp-quota-refused');
    // Refused before any mail: spends none of it.
    assert.equal(
      (await supabase(quota).auth.signInWithOtp({ email: refused, options: { shouldCreateUser: false } })).error?.code,
      'otp_disabled',
    );
    const first = uniqueEmail('otp-quota-first');
    assert.equal((await supabase(quota).auth.signInWithOtp({ email: first })).error, null);
    await smtp.waitForMail(first);
    const second = uniqueEmail('otp-quota-second');
    const { error } = await supabase(quota).auth.signInWithOtp({ email: second });
    assert.equal(error?.status, 429);
    assert.equal(error?.code, 'over_email_send_rate_limit');
    assert.equal(await userRow(quota, second), undefined);
  });
});
