// PKCE for mailed links (supabase-js flowType 'pkce'): signInWithOtp and resetPasswordForEmail send
// a code challenge, the mail's link then redirects with ?code= instead of a session in the fragment,
// and exchangeCodeForSession trades it, with the verifier the client kept, for a session once.
// Wrong verifiers, reused, unknown and expired codes are refused with GoTrue's codes.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import { type RunningIdp, createUser, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';
import { linkIn, startSmtp, type TestSmtp } from './helpers/smtp.js';
import { SUPABASE_CLIENT_OPTIONS, serviceClient } from './helpers/supabase.js';
import { startAll } from './helpers/services.js';

const APP = 'http://127.0.0.1:4100';
let smtp: TestSmtp;
let idp: RunningIdp;
let confirming: RunningIdp;
let limited: RunningIdp;
// The idp's clock: real time plus an offset the expiry test moves on.
let offsetMs = 0;

before(async () => {
  smtp = await startSmtp();
  [idp, confirming, limited] = await startAll([
    startIdp({ env: { SMTP_URL: smtp.url, IDP_APP_URL: APP }, clock: () => Date.now() + offsetMs }),
    startIdp({ env: { SMTP_URL: smtp.url, IDP_APP_URL: APP, IDP_AUTOCONFIRM: 'false' } }),
    startIdp({ env: { IDP_RATE_LIMIT_TOKEN_REFRESH: '2' } }),
  ]);
});
after(async () => {
  await Promise.all([idp?.close(), confirming?.close(), limited?.close()]);
  await smtp?.close();
});

/** A browser's supabase-js in PKCE mode: it keeps the code verifier in its storage. */
function pkceClient(on: RunningIdp = idp): SupabaseClient {
  const items = new Map<string, string>();
  const storage = {
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => void items.set(key, value),
    removeItem: (key: string) => void items.delete(key),
  };
  return createClient(on.url, on.publishableKey, {
    ...SUPABASE_CLIENT_OPTIONS,
    auth: { ...SUPABASE_CLIENT_OPTIONS.auth, flowType: 'pkce', storage, persistSession: true },
  });
}

/** Opens the mail's link as a browser would; returns where it redirects. */
async function follow(link: string): Promise<URL> {
  const res = await fetch(link, { redirect: 'manual' });
  await res.arrayBuffer();
  assert.equal(res.status, 303);
  return new URL(res.headers.get('location')!);
}

async function magicLinkCode(client: SupabaseClient, email: string): Promise<string> {
  assert.equal((await client.auth.signInWithOtp({ email, options: { emailRedirectTo: `${APP}/welcome` } })).error, null);
  const mail = await smtp.waitForMail(email);
  const landing = await follow(linkIn(mail, `${idp.url}/auth/v1/verify?token=pkce_`));
  assert.equal(`${landing.origin}${landing.pathname}`, `${APP}/welcome`);
  assert.equal(landing.hash, '', 'no session in the fragment');
  return landing.searchParams.get('code')!;
}

describe('PKCE links', () => {
  test('signInWithOtp: the link redirects with ?code=, exchangeCodeForSession gives the session once', async () => {
    const user = await createUser(idp, uniqueEmail('pkce-otp'));
    const client = pkceClient();
    const code = await magicLinkCode(client, user.email);
    assert.match(code, /^[0-9a-f-]{36}$/);
    const { data, error } = await client.auth.exchangeCodeForSession(code);
    assert.equal(error, null);
    assert.equal(data.user?.id, user.id);
    assert.ok(data.session?.access_token);

    // Once: the same code with a verifier of the right challenge is refused the second time.
    const again = pkceClient();
    const second = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=pkce', {
      body: { auth_code: code, code_verifier: 'x'.repeat(43) },
    });
    assert.equal(second.status, 404);
    assert.equal(second.body.code, 'flow_state_not_found');
    assert.equal((await again.auth.exchangeCodeForSession(code)).error?.name, 'AuthPKCECodeVerifierMissingError');
  });

  test('signUp (IDP_AUTOCONFIRM=false): the confirmation link gives a code, exchanged for a session of the confirmed user', async () => {
    const email = uniqueEmail('pkce-signup');
    const client = pkceClient(confirming);
    const signUp = await client.auth.signUp({ email, password: 'a long passphrase', options: { emailRedirectTo: `${APP}/welcome` } });
    assert.equal(signUp.error, null);
    assert.equal(signUp.data.session, null);
    const landing = await follow(linkIn(await smtp.waitForMail(email), `${confirming.url}/auth/v1/verify?token=pkce_`));
    assert.equal(landing.hash, '');
    const { data, error } = await client.auth.exchangeCodeForSession(landing.searchParams.get('code')!);
    assert.equal(error, null);
    assert.equal(data.user?.email, email);
    assert.ok(data.user?.email_confirmed_at);
  });

  test('resetPasswordForEmail: the recovery link gives a code, exchanged for a session that sets the password', async () => {
    const user = await createUser(idp, uniqueEmail('pkce-recover'));
    const client = pkceClient();
    assert.equal((await client.auth.resetPasswordForEmail(user.email, { redirectTo: `${APP}/reset` })).error, null);
    const landing = await follow(linkIn(await smtp.waitForMail(user.email), `${idp.url}/auth/v1/verify?token=pkce_`));
    const { data, error } = await client.auth.exchangeCodeForSession(landing.searchParams.get('code')!);
    assert.equal(error, null);
    assert.equal(data.user?.id, user.id);
    assert.equal((await client.auth.updateUser({ password: 'another-passphrase-1' })).error, null);
  });

  test('a wrong verifier is 400 bad_code_verifier and leaves the code usable; plain challenges work; one exchange wins', async () => {
    const user = await createUser(idp, uniqueEmail('pkce-plain'));
    const verifier = 'v'.repeat(50);
    const asked = await idpRequest(idp, 'POST', '/auth/v1/otp', {
      body: { email: user.email, code_challenge: verifier, code_challenge_method: 'plain' },
    });
    assert.equal(asked.status, 200);
    const landing = await follow(linkIn(await smtp.waitForMail(user.email), `${idp.url}/auth/v1/verify?token=pkce_`));
    const code = landing.searchParams.get('code')!;
    const wrong = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=pkce', {
      body: { auth_code: code, code_verifier: 'w'.repeat(50) },
    });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.code, 'bad_code_verifier');
    // Ten concurrent exchanges with the right verifier: exactly one session.
    const exchanges = await Promise.all(
      Array.from({ length: 10 }, () =>
        idpRequest(idp, 'POST', '/auth/v1/token?grant_type=pkce', { body: { auth_code: code, code_verifier: verifier } }),
      ),
    );
    const won = exchanges.filter((res) => res.status === 200);
    assert.equal(won.length, 1);
    assert.equal(won[0]!.body.user.id, user.id);
    assert.ok(exchanges.every((res) => res.status === 200 || res.body.code === 'flow_state_not_found'));
  });

  test('a user banned after following the link cannot exchange its code: 400 user_banned, no session', async () => {
    const user = await createUser(idp, uniqueEmail('pkce-banned'));
    const client = pkceClient();
    const code = await magicLinkCode(client, user.email);
    assert.equal((await serviceClient(idp).auth.admin.updateUserById(user.id, { ban_duration: '24h' })).error, null);
    const { data, error } = await client.auth.exchangeCodeForSession(code);
    assert.equal(error?.status, 400);
    assert.equal(error?.code, 'user_banned');
    assert.equal(data.session, null);
  });

  test("the mail's six-digit code still signs in directly, as in GoTrue", async () => {
    const user = await createUser(idp, uniqueEmail('pkce-code'));
    const client = pkceClient();
    assert.equal((await client.auth.signInWithOtp({ email: user.email })).error, null);
    const mail = await smtp.waitForMail(user.email);
    const code = /enter the code: (\d{6})/.exec(mail.text)![1]!;
    const { data, error } = await client.auth.verifyOtp({ email: user.email, token: code, type: 'email' });
    assert.equal(error, null);
    assert.equal(data.user?.id, user.id);
  });

  test('the pkce grant counts with the other grants (IDP_RATE_LIMIT_TOKEN_REFRESH)', async () => {
    const exchange = () =>
      idpRequest(limited, 'POST', '/auth/v1/token?grant_type=pkce', { body: { auth_code: 'x', code_verifier: 'y'.repeat(43) } });
    assert.equal((await exchange()).status, 404);
    assert.equal((await exchange()).status, 404);
    const third = await exchange();
    assert.equal(third.status, 429);
    assert.equal(third.body.code, 'over_request_rate_limit');
  });

  test('an auth code expires five minutes after the link was followed: 422 flow_state_expired', async () => {
    const user = await createUser(idp, uniqueEmail('pkce-expiry'));
    const verifier = 'e'.repeat(64);
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    await idpRequest(idp, 'POST', '/auth/v1/otp', {
      body: { email: user.email, code_challenge: challenge, code_challenge_method: 's256' },
    });
    const landing = await follow(linkIn(await smtp.waitForMail(user.email), `${idp.url}/auth/v1/verify?token=pkce_`));
    offsetMs += 5 * 60_000 + 1000;
    const late = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=pkce', {
      body: { auth_code: landing.searchParams.get('code'), code_verifier: verifier },
    });
    assert.equal(late.status, 422);
    assert.equal(late.body.code, 'flow_state_expired');
  });

  test('bad requests: 400 and nothing sent', async () => {
    const email = uniqueEmail('pkce-bad');
    const cases: [Record<string, unknown>, string][] = [
      [{ email, code_challenge: 'c'.repeat(43) }, 'PKCE flow requires code_challenge_method and code_challenge'],
      [{ email, code_challenge: 'short', code_challenge_method: 's256' }, ''],
      [{ email, code_challenge: 'c'.repeat(43), code_challenge_method: 'md5' }, ''],
    ];
    for (const [body, message] of cases) {
      const res = await idpRequest(idp, 'POST', '/auth/v1/otp', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.code, 'validation_failed');
      if (message) assert.equal(res.body.message, message);
    }
    await assert.rejects(smtp.waitForMail(email, { timeout: 300 }));
    const missing = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=pkce', { body: { auth_code: 'x' } });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.code, 'validation_failed');
    const unknown = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=pkce', {
      body: { auth_code: 'x', code_verifier: 'y'.repeat(43) },
    });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.code, 'flow_state_not_found');
  });
});
