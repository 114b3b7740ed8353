// Sign-up settings through the real supabase-js: GET /auth/v1/settings, anonymous sign-ins off by
// default, IDP_DISABLE_SIGNUP (sign-up and anonymous sign-in refused, the admin API, invitations and generate_link still create users, as GoTrue's), and
// sign-up `data` copied into the email identity's identity_data, as GoTrue's signup.go does.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuthApiError } from '@supabase/supabase-js';
import { type RunningIdp, signIn, startIdp } from './helpers/idp.js';
import { uniqueEmail } from './helpers/emails.js';
import { idpRequest } from './helpers/http.js';
import { serviceClient, supabase } from './helpers/supabase.js';

const PASSWORD = 'correct-horse-battery-1';

let open: RunningIdp; // the test defaults: sign-ups allowed, autoconfirm on
let confirming: RunningIdp; // autoconfirm off
let closed: RunningIdp; // IDP_DISABLE_SIGNUP, anonymous sign-ins on

before(async () => {
  // One after the other, so that a start that fails leaves nothing running that after() misses.
  open = await startIdp();
  confirming = await startIdp({ env: { IDP_AUTOCONFIRM: 'false' } });
  closed = await startIdp({ env: { IDP_DISABLE_SIGNUP: 'true', IDP_EXTERNAL_ANONYMOUS_USERS_ENABLED: 'true' } });
});
after(async () => {
  await Promise.all([open?.close(), confirming?.close(), closed?.close()]);
});

async function userCount(idp: RunningIdp): Promise<number> {
  const res = await idpRequest(idp, 'GET', '/auth/v1/admin/users?per_page=1', { apikey: idp.secretKey });
  assert.equal(res.status, 200, res.text);
  return Number(res.headers.get('x-total-count'));
}

describe('GET /auth/v1/settings', () => {
  test("GoTrue's shape: email the only provider, disable_signup, mailer_autoconfirm and anonymous_users as configured", async () => {
    const res = await idpRequest(open, 'GET', '/auth/v1/settings');
    assert.equal(res.status, 200, res.text);
    const settings = res.body as { external: Record<string, boolean>; [key: string]: unknown };
    assert.equal(settings.disable_signup, false);
    assert.equal(settings.mailer_autoconfirm, true);
    assert.equal(settings.phone_autoconfirm, false);
    assert.equal(settings.saml_enabled, false);
    assert.equal(settings.external.email, true);
    assert.equal(settings.external.anonymous_users, false);
    assert.equal(settings.external.phone, false);
    assert.equal(settings.external.google, false);
    assert.deepEqual(
      Object.entries(settings.external)
        .filter(([, on]) => on)
        .map(([name]) => name),
      ['email'],
    );

    const other = (await idpRequest(closed, 'GET', '/auth/v1/settings')).body as typeof settings;
    assert.equal(other.disable_signup, true);
    assert.equal(other.external.anonymous_users, true);
    assert.equal(((await idpRequest(confirming, 'GET', '/auth/v1/settings')).body as typeof settings).mailer_autoconfirm, false);
  });

  test('needs the apikey, as every route behind the gateway', async () => {
    const res = await idpRequest(open, 'GET', '/auth/v1/settings', { apikey: null });
    assert.equal(res.status, 401);
  });
});

test('anonymous sign-ins are off by default: 422 anonymous_provider_disabled, no user', async () => {
  const before = await userCount(open);
  const { data, error } = await supabase(open).auth.signInAnonymously();
  assert.ok(error instanceof AuthApiError);
  assert.deepEqual([error.status, error.code, error.message], [422, 'anonymous_provider_disabled', 'Anonymous sign-ins are disabled']);
  assert.equal(data.session, null);
  assert.equal(await userCount(open), before);
});

describe('IDP_DISABLE_SIGNUP', () => {
  test('signUp: 422 signup_disabled "Signups not allowed for this instance", and no user is made', async () => {
    const before = await userCount(closed);
    const address = uniqueEmail('closed');
    const { data, error } = await supabase(closed).auth.signUp({ email: address, password: PASSWORD });
    assert.ok(error instanceof AuthApiError);
    assert.deepEqual([error.status, error.code, error.message], [422, 'signup_disabled', 'Signups not allowed for this instance']);
    assert.equal(data.user, null);
    assert.equal(await userCount(closed), before);
    // Refused before the body is looked at: a malformed address gets the same answer.
    const malformed = await supabase(closed).auth.signUp({ email: 'not-an-address', password: PASSWORD });
    assert.equal(malformed.error?.code, 'signup_disabled');
  });

  test('anonymous sign-ins are refused too: 422 signup_disabled, no user', async () => {
    const before = await userCount(closed);
    const { error } = await supabase(closed).auth.signInAnonymously();
    assert.ok(error instanceof AuthApiError);
    assert.deepEqual([error.status, error.code, error.message], [422, 'signup_disabled', 'Signups not allowed for this instance']);
    assert.equal(await userCount(closed), before);
  });

  test('the admin API still creates users, who sign in; invitations and generate_link still make users', async () => {
    const admin = serviceClient(closed).auth.admin;
    const address = uniqueEmail('closed-admin');
    const created = await admin.createUser({ email: address, password: PASSWORD, email_confirm: true });
    assert.equal(created.error, null);
    const session = await signIn(closed, address, PASSWORD);
    assert.equal(session.user.id, created.data.user?.id);

    const invited = await admin.inviteUserByEmail(uniqueEmail('closed-invite'));
    assert.equal(invited.error, null);
    assert.ok(invited.data.user?.invited_at);

    const link = await admin.generateLink({ type: 'signup', email: uniqueEmail('closed-link'), password: PASSWORD });
    assert.equal(link.error, null);
    assert.ok(link.data.properties?.action_link);
  });
});

describe('sign-up data in identity_data', () => {
  test("each key of data is added to the email identity's identity_data; GoTrue's own claims keep their values", async () => {
    for (const idp of [open, confirming]) {
      const address = uniqueEmail('identity-data');
      const data = { first_name: 'Ada', plan: { tier: 'pro' }, sub: 'someone-else', email: 'other@example.com', email_verified: true };
      const { data: signedUp, error } = await supabase(idp).auth.signUp({ email: address, password: PASSWORD, options: { data } });
      assert.equal(error, null);
      const user = signedUp.user!;
      assert.equal(user.identities?.length, 1);
      assert.deepEqual(user.identities![0]!.identity_data, {
        sub: user.id,
        email: address,
        email_verified: false,
        phone_verified: false,
        first_name: 'Ada',
        plan: { tier: 'pro' },
      });
      // user_metadata keeps data as sent (plus email_verified once confirmed).
      assert.equal(user.user_metadata.first_name, 'Ada');
      assert.equal(user.user_metadata.sub, 'someone-else');
    }
  });

  test('the admin API does not copy user_metadata into identity_data (GoTrue copies only sign-up data)', async () => {
    const created = await serviceClient(open).auth.admin.createUser({
      email: uniqueEmail('identity-admin'),
      password: PASSWORD,
      user_metadata: { first_name: 'Grace' },
    });
    assert.equal(created.error, null);
    assert.equal(created.data.user?.identities?.[0]?.identity_data?.first_name, undefined);
  });
});
