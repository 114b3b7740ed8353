// Where the idp's Auth follows supabase/auth's source on details a client can see: how the minimum
// password length is counted (bytes, Go's len), that addresses are not trimmed, and the identity
// data written at sign-up (email_verified false, whatever the confirmation, plus the sign-up
// data). Through supabase-js against the real idp.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sharedIdp } from './helpers/idp.js';
import { serviceClient, supabase } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';

const ctx = sharedIdp();

function assertAuthError(error: unknown, expected: { status: number; code: string; message: string }) {
  assert.ok(error, 'expected an error');
  const e = error as { status: number; code?: string; message: string };
  assert.deepEqual({ status: e.status, code: e.code, message: e.message }, expected);
}

describe('minimum password length: bytes of UTF-8, as GoTrue counts it', () => {
  test('3 accented letters (6 bytes) and 2 CJK characters (6 bytes) are long enough; 5 ASCII letters are not', async () => {
    for (const password of ['ééé', '日本']) {
      const { data, error } = await supabase(ctx.idp).auth.signUp({ email: uniqueEmail('bytes'), password });
      assert.equal(error, null, password);
      assert.ok(data.session, password);
      const login = await supabase(ctx.idp).auth.signInWithPassword({ email: data.user!.email!, password });
      assert.equal(login.error, null);
    }
    const short = await supabase(ctx.idp).auth.signUp({ email: uniqueEmail('bytes'), password: 'abcde' });
    assertAuthError(short.error, { status: 422, code: 'weak_password', message: 'Password should be at least 6 characters.' });
    // "éabc": 4 characters, 5 bytes: short. "éabcd": 5 characters, 6 bytes: long enough.
    const fiveBytes = await supabase(ctx.idp).auth.signUp({ email: uniqueEmail('bytes'), password: 'éabc' });
    assertAuthError(fiveBytes.error, { status: 422, code: 'weak_password', message: 'Password should be at least 6 characters.' });
    assert.equal((await supabase(ctx.idp).auth.signUp({ email: uniqueEmail('bytes'), password: 'éabcd' })).error, null);
  });
});

describe('addresses are not trimmed', () => {
  test('sign-up with surrounding spaces is an invalid format, and nothing is created', async () => {
    const address = uniqueEmail('trim');
    for (const spaced of [` ${address}`, `${address} `, `\t${address}`]) {
      const { error } = await supabase(ctx.idp).auth.signUp({ email: spaced, password: 'a long passphrase' });
      assertAuthError(error, { status: 400, code: 'validation_failed', message: 'Unable to validate email address: invalid format' });
    }
    const { rowCount } = await ctx.db.query('SELECT 1 FROM auth.users WHERE email = $1', [address]);
    assert.equal(rowCount, 0);
  });

  test('sign-in with surrounding spaces finds no one: the usual invalid_credentials', async () => {
    const address = uniqueEmail('trim-login');
    assert.equal((await supabase(ctx.idp).auth.signUp({ email: address, password: 'a long passphrase' })).error, null);
    const spaced = await supabase(ctx.idp).auth.signInWithPassword({ email: ` ${address}`, password: 'a long passphrase' });
    assertAuthError(spaced.error, { status: 400, code: 'invalid_credentials', message: 'Invalid login credentials' });
    // Case still does not matter, as in GoTrue (addresses are compared lower-cased).
    assert.equal(
      (await supabase(ctx.idp).auth.signInWithPassword({ email: address.toUpperCase(), password: 'a long passphrase' })).error,
      null,
    );
  });

  test('admin createUser refuses a spaced address the same way', async () => {
    const { error } = await serviceClient(ctx.idp).auth.admin.createUser({
      email: ` ${uniqueEmail('trim-admin')}`,
      password: 'a long passphrase',
      email_confirm: true,
    });
    assertAuthError(error, { status: 400, code: 'validation_failed', message: 'Unable to validate email address: invalid format' });
  });
});

describe('identity data written at sign-up', () => {
  test('{sub, email, email_verified: false, phone_verified: false} plus the sign-up data, even when the address is confirmed at once', async () => {
    const address = uniqueEmail('identity');
    const { data, error } = await supabase(ctx.idp).auth.signUp({
      email: address,
      password: 'a long passphrase',
      options: { data: { plan: 'pro' } },
    });
    assert.equal(error, null);
    const user = data.user!;
    // GoTrue's signup.go adds each key of data that its claims do not already have.
    assert.deepEqual(user.identities![0]!.identity_data, {
      sub: user.id,
      email: address,
      email_verified: false,
      phone_verified: false,
      plan: 'pro',
    });
    // The confirmation shows where GoTrue shows it: the timestamps and user_metadata.
    assert.ok(user.email_confirmed_at);
    assert.deepEqual(user.user_metadata, { plan: 'pro', email_verified: true });
    const fetched = await supabase(ctx.idp).auth.getUser(data.session!.access_token);
    assert.equal(fetched.data.user!.identities![0]!.identity_data!.email_verified, false);
  });

  test('admin-created users, confirmed or not, get the same identity data', async () => {
    for (const email_confirm of [true, false]) {
      const address = uniqueEmail('identity-admin');
      const { data, error } = await serviceClient(ctx.idp).auth.admin.createUser({
        email: address,
        password: 'a long passphrase',
        email_confirm,
      });
      assert.equal(error, null);
      const { rows } = await ctx.db.query('SELECT identity_data FROM auth.identities WHERE user_id = $1', [data.user!.id]);
      assert.deepEqual(rows[0].identity_data, { sub: data.user!.id, email: address, email_verified: false, phone_verified: false });
    }
  });
});
