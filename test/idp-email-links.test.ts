// The idp's one-time links and codes without a mail in between: admin generate_link (what a mail
// would carry), POST /verify with a token hash or with a code and its address, the link itself
// (GET /verify, 303 with the session or the error in the fragment), the redirect allow-list, and
// the attacks on tokens: reuse, expiry, another type, another user, two uses at once. Driven
// through the unmodified supabase-js; raw HTTP where the redirect is the point.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';
import { serviceClient, supabase } from './helpers/supabase.js';

const APP = 'http://127.0.0.1:4000';
const clock = manualClock(Date.now());
let idp: RunningIdp;

before(async () => {
  idp = await startIdp({
    env: {
      IDP_APP_URL: APP,
      IDP_REDIRECT_URLS: 'https://app.example.com/**,https://*.example.org/welcome',
      IDP_MAILER_OTP_EXP: '3600',
      IDP_AUTOCONFIRM: 'false',
    },
    clock,
  });
});
after(async () => {
  await idp?.close();
});

type LinkType = 'signup' | 'invite' | 'recovery' | 'magiclink';

async function generate(type: LinkType, email: string, options: { redirectTo?: string } = {}) {
  const params = { type, email, password: 'correct-horse-1', options } as Parameters<
    ReturnType<typeof serviceClient>['auth']['admin']['generateLink']
  >[0];
  const { data, error } = await serviceClient(idp).auth.admin.generateLink(params);
  assert.equal(error, null);
  return data.properties!;
}

/** Opens a link as a browser would, without following the redirect. */
async function open(link: string): Promise<{ status: number; location: URL }> {
  const res = await fetch(link, { redirect: 'manual' });
  await res.arrayBuffer();
  return { status: res.status, location: new URL(res.headers.get('location') ?? 'http://missing/') };
}

const fragment = (url: URL) => new URLSearchParams(url.hash.slice(1));

const expired = { status: 403, code: 'otp_expired', message: 'Email link is invalid or has expired' };

function assertAuthError(error: unknown, expected: { status: number; code: string; message: string }) {
  assert.ok(error, 'expected an error');
  const e = error as { status: number; code?: string; message: string };
  assert.deepEqual({ status: e.status, code: e.code, message: e.message }, expected);
}

describe('admin generate_link', () => {
  test('recovery: the link, code, token hash and type, as GoTrue returns them, and no mail is needed', async () => {
    const user = await createUser(idp, uniqueEmail('gl-recovery'));
    const link = await generate('recovery', user.email, { redirectTo: 'https://app.example.com/reset' });
    assert.match(link.email_otp, /^\d{6}$/);
    assert.match(link.hashed_token, /^[0-9a-f]{56}$/);
    assert.equal(link.verification_type, 'recovery');
    assert.equal(link.redirect_to, 'https://app.example.com/reset');
    const action = new URL(link.action_link);
    assert.equal(`${action.origin}${action.pathname}`, `${idp.url}/auth/v1/verify`);
    assert.deepEqual(Object.fromEntries(action.searchParams), {
      token: link.hashed_token,
      type: 'recovery',
      redirect_to: 'https://app.example.com/reset',
    });
  });

  test('signup creates an unconfirmed user; invite creates one without a password; both confirm through the link', async () => {
    for (const type of ['signup', 'invite'] as const) {
      const email = uniqueEmail(`gl-${type}`);
      const { data, error } = await serviceClient(idp).auth.admin.generateLink({ type, email, password: 'correct-horse-1' } as never);
      assert.equal(error, null);
      assert.equal(data.user?.email, email);
      assert.equal(data.user?.email_confirmed_at, undefined);
      if (type === 'invite') assert.ok(data.user?.invited_at);
      const opened = await open(data.properties!.action_link);
      assert.equal(opened.status, 303);
      assert.equal(fragment(opened.location).get('type'), type);
      const { data: confirmed } = await serviceClient(idp).auth.admin.getUserById(data.user!.id);
      assert.ok(confirmed.user?.email_confirmed_at, `${type} confirmed`);
    }
  });

  test('refusals: unknown user for recovery and magiclink, a taken address for signup, an unknown type, the publishable key', async () => {
    const user = await createUser(idp, uniqueEmail('gl-refusals'));
    const admin = serviceClient(idp).auth.admin;
    for (const type of ['recovery', 'magiclink'] as const) {
      const { error } = await admin.generateLink({ type, email: uniqueEmail('nobody') });
      assertAuthError(error, { status: 404, code: 'user_not_found', message: 'User not found' });
    }
    const taken = await admin.generateLink({ type: 'signup', email: user.email, password: 'correct-horse-1' });
    assertAuthError(taken.error, {
      status: 422,
      code: 'email_exists',
      message: 'A user with this email address has already been registered',
    });
    const unknown = await admin.generateLink({ type: 'sms' as never, email: user.email } as never);
    assertAuthError(unknown.error, { status: 400, code: 'validation_failed', message: 'Invalid email action link type requested' });
    const anon = await supabase(idp).auth.admin.generateLink({ type: 'recovery', email: user.email });
    assertAuthError(anon.error, { status: 403, code: 'not_admin', message: 'User not allowed' });
  });
});

describe('POST /verify (verifyOtp)', () => {
  test('a token hash gives a session for its user, once', async () => {
    const user = await createUser(idp, uniqueEmail('verify-hash'));
    const link = await generate('recovery', user.email);
    const first = await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' });
    assert.equal(first.error, null);
    assert.equal(first.data.user?.id, user.id);
    assert.ok(first.data.session?.access_token);
    // The session works: the user can set a new password with it.
    const client = supabase(idp);
    await client.auth.setSession(first.data.session!);
    assert.equal((await client.auth.updateUser({ password: 'a-brand-new-one' })).error, null);
    const again = await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' });
    assertAuthError(again.error, expired);
  });

  test('the six-digit code with its address gives a session; with another address or a wrong code it does not', async () => {
    const user = await createUser(idp, uniqueEmail('verify-code'));
    const other = await createUser(idp, uniqueEmail('verify-code-other'));
    const link = await generate('magiclink', user.email);
    const codeRefused = { status: 403, code: 'otp_expired', message: 'Token has expired or is invalid' };
    const wrongAddress = await supabase(idp).auth.verifyOtp({ email: other.email, token: link.email_otp, type: 'magiclink' });
    assertAuthError(wrongAddress.error, codeRefused);
    const wrongCode = await supabase(idp).auth.verifyOtp({
      email: user.email,
      token: link.email_otp === '000000' ? '000001' : '000000',
      type: 'magiclink',
    });
    assertAuthError(wrongCode.error, codeRefused);
    const ok = await supabase(idp).auth.verifyOtp({ email: user.email.toUpperCase(), token: link.email_otp, type: 'magiclink' });
    assert.equal(ok.error, null);
    assert.equal(ok.data.user?.id, user.id);
  });

  test('type email accepts a confirmation or a recovery code', async () => {
    const user = await createUser(idp, uniqueEmail('verify-email-type'));
    const link = await generate('recovery', user.email);
    const ok = await supabase(idp).auth.verifyOtp({ email: user.email, token: link.email_otp, type: 'email' });
    assert.equal(ok.error, null);
    assert.equal(ok.data.user?.id, user.id);
  });

  test('a token of another type is refused and stays usable for its own', async () => {
    const user = await createUser(idp, uniqueEmail('verify-type'));
    const link = await generate('recovery', user.email);
    const asSignup = await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'signup' });
    assertAuthError(asSignup.error, expired);
    const asEmailChange = await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'email_change' });
    assertAuthError(asEmailChange.error, expired);
    const own = await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' });
    assert.equal(own.error, null);
  });

  test('a newer token replaces the older one of its kind', async () => {
    const user = await createUser(idp, uniqueEmail('verify-replaced'));
    const older = await generate('recovery', user.email);
    const newer = await generate('recovery', user.email);
    assertAuthError((await supabase(idp).auth.verifyOtp({ token_hash: older.hashed_token, type: 'recovery' })).error, expired);
    assert.equal((await supabase(idp).auth.verifyOtp({ token_hash: newer.hashed_token, type: 'recovery' })).error, null);
  });

  test('an expired token is refused (GoTrue answers expired and unknown alike)', async () => {
    const user = await createUser(idp, uniqueEmail('verify-expired'));
    const link = await generate('recovery', user.email);
    clock.advance(3600_000 + 1000);
    try {
      const late = await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' });
      assertAuthError(late.error, expired);
    } finally {
      clock.set(Date.now());
    }
  });

  test('a banned user gets no session, and the token survives the refusal', async () => {
    const user = await createUser(idp, uniqueEmail('verify-banned'));
    const link = await generate('recovery', user.email);
    await serviceClient(idp).auth.admin.updateUserById(user.id, { ban_duration: '1h' });
    const banned = await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' });
    assertAuthError(banned.error, { status: 403, code: 'user_banned', message: 'User is banned' });
    await serviceClient(idp).auth.admin.updateUserById(user.id, { ban_duration: 'none' });
    assert.equal((await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' })).error, null);
  });

  test('two verifications of one token at once: exactly one session', async () => {
    const user = await createUser(idp, uniqueEmail('verify-race'));
    const link = await generate('recovery', user.email);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' })),
    );
    assert.equal(results.filter((r) => r.error === null).length, 1);
    for (const r of results.filter((r) => r.error !== null)) assertAuthError(r.error, expired);
  });

  test('malformed requests: GoTrue validation messages, nothing used up', async () => {
    const user = await createUser(idp, uniqueEmail('verify-malformed'));
    const link = await generate('recovery', user.email);
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ token_hash: link.hashed_token }, 400, 'Verify requires a verification type'],
      [{ type: 'recovery' }, 400, 'Verify requires either a token or a token hash'],
      [
        { type: 'recovery', token_hash: link.hashed_token, token: '123456', email: user.email },
        400,
        'Verify requires either a token or a token hash',
      ],
      [{ type: 'recovery', token_hash: link.hashed_token, email: user.email }, 400, 'Only the token_hash and type should be provided'],
      [{ type: 'recovery', token: '123456' }, 400, 'Only an email address or phone number should be provided on verify'],
      [{ type: 'recovery', token: '123456', email: 'not an address' }, 422, 'Invalid email format'],
      [{ type: 'teleport', token_hash: link.hashed_token }, 400, 'Unsupported verification type'],
      // Names every object inherits are no verification types either.
      [{ type: 'constructor', token_hash: link.hashed_token }, 400, 'Unsupported verification type'],
      [{ type: 'toString', token_hash: link.hashed_token }, 400, 'Unsupported verification type'],
      [{ type: '__proto__', token_hash: link.hashed_token }, 400, 'Unsupported verification type'],
    ];
    for (const [body, status, message] of cases) {
      const res = await idpRequest(idp, 'POST', '/auth/v1/verify', { body });
      assert.equal(res.status, status, JSON.stringify(body));
      assert.deepEqual(res.body, { code: 'validation_failed', message }, JSON.stringify(body));
    }
    for (const method of ['GET', 'HEAD'] as const) {
      const inherited = await idpRequest(idp, method, `/auth/v1/verify?token=${link.hashed_token}&type=constructor`);
      assert.ok(inherited.status < 500, `${method} /verify?type=constructor answered ${inherited.status}`);
    }
    const bad = await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 5, token_hash: 'x' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, 'bad_json');
    assert.equal((await supabase(idp).auth.verifyOtp({ token_hash: link.hashed_token, type: 'recovery' })).error, null);
  });
});

describe('GET /verify (the link)', () => {
  test('303 to redirect_to with the session in the fragment, as GoTrue; no apikey needed', async () => {
    const user = await createUser(idp, uniqueEmail('link-ok'));
    const link = await generate('recovery', user.email, { redirectTo: 'https://app.example.com/reset-password' });
    const opened = await open(link.action_link);
    assert.equal(opened.status, 303);
    assert.equal(`${opened.location.origin}${opened.location.pathname}`, 'https://app.example.com/reset-password');
    const values = fragment(opened.location);
    assert.deepEqual([...values.keys()], ['access_token', 'expires_at', 'expires_in', 'refresh_token', 'sb', 'token_type', 'type']);
    assert.equal(values.get('type'), 'recovery');
    assert.equal(values.get('token_type'), 'bearer');
    const { data } = await supabase(idp).auth.getUser(values.get('access_token')!);
    assert.equal(data.user?.id, user.id);
  });

  test('a used, unknown or mistyped link: 303 with the error in the fragment', async () => {
    const user = await createUser(idp, uniqueEmail('link-errors'));
    const link = await generate('recovery', user.email, { redirectTo: 'https://app.example.com/reset-password?from=mail' });
    assert.equal((await open(link.action_link)).status, 303);
    const targets = [
      link.action_link,
      link.action_link.replace(/token=[0-9a-f]+/, 'token=0000'),
      link.action_link.replace('type=recovery', 'type=signup'),
    ];
    for (const target of targets) {
      const opened = await open(target);
      assert.equal(opened.status, 303);
      assert.equal(opened.location.searchParams.get('from'), 'mail');
      assert.deepEqual(Object.fromEntries(fragment(opened.location)), {
        error: 'access_denied',
        error_code: 'otp_expired',
        error_description: 'Email link is invalid or has expired',
        sb: '',
      });
    }
  });

  test('redirect_to outside the allow list falls back to IDP_APP_URL; listed globs and the app host are kept', async () => {
    const user = await createUser(idp, uniqueEmail('link-redirects'));
    const cases: Array<[string, string]> = [
      ['https://evil.example.net/steal', `${APP}/`],
      ['javascript:alert(1)', `${APP}/`],
      ['https://app.example.com/deep/page', 'https://app.example.com/deep/page'],
      ['https://eu.example.org/welcome', 'https://eu.example.org/welcome'],
      ['https://a.b.example.org/welcome', `${APP}/`],
      ['http://127.0.0.1:4000/reset-password', 'http://127.0.0.1:4000/reset-password'],
      // The app URL's host on another port or scheme is another origin.
      ['http://127.0.0.1:9999/reset-password', `${APP}/`],
    ];
    for (const [requested, expected] of cases) {
      const link = await generate('magiclink', user.email, { redirectTo: requested });
      assert.equal(link.redirect_to.replace(/\/?$/, ''), expected.replace(/\/?$/, ''), requested);
      const opened = await open(link.action_link);
      assert.equal(`${opened.location.origin}${opened.location.pathname}`.replace(/\/?$/, ''), expected.replace(/\/?$/, ''), requested);
    }
  });

  test("without redirect_to the Referer is used under the same rule (GoTrue's GetReferrer)", async () => {
    const user = await createUser(idp, uniqueEmail('link-referer'));
    for (const [referer, expected] of [
      ['https://app.example.com/from-here', 'https://app.example.com/from-here'],
      ['https://evil.example.net/', `${APP}/`],
    ] as const) {
      const link = await generate('magiclink', user.email);
      const url = new URL(link.action_link);
      url.searchParams.delete('redirect_to');
      const res = await fetch(url, { redirect: 'manual', headers: { referer } });
      await res.arrayBuffer();
      const location = new URL(res.headers.get('location')!);
      assert.equal(`${location.origin}${location.pathname}`, expected, referer);
    }
  });

  test('a link without token or type is a 400 JSON answer, no redirect', async () => {
    const res = await fetch(`${idp.url}/auth/v1/verify?type=recovery`, {
      redirect: 'manual',
      headers: { 'x-supabase-api-version': '2024-01-01' },
    });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), { code: 'validation_failed', message: 'Verify requires a token or a token hash' });
  });
});
