// Supabase Auth subset, driven by the real supabase-js over real HTTP (and raw HTTP where the wire
// itself is the point). Asserts error.code / error.status / error.message exactly as the reference.
import assert from 'node:assert/strict';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { AuthApiError, AuthSessionMissingError, AuthWeakPasswordError } from '@supabase/supabase-js';
import pg from 'pg';
import { PasswordHasher } from '../src/kit/password-hasher.js';
import { createUser, type RunningIdp, signIn, startIdp } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';
import { idpRequest } from './helpers/http.js';
import { startAll } from './helpers/services.js';

let idp: RunningIdp; // autoconfirm on (the local CLI default)
let confirming: RunningIdp; // autoconfirm off (the hosted default)
let db: pg.Client;

before(async () => {
  [idp, confirming] = await startAll([startIdp(), startIdp({ env: { IDP_AUTOCONFIRM: 'false', IDP_JWT_EXPIRY: String(600) } })]);
  db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();
});
after(async () => {
  await db?.end();
  await Promise.all([idp?.close(), confirming?.close()]);
});

function assertAuthError(error: unknown, expected: { name?: string; status: number; code: string | undefined; message: string }) {
  assert.ok(error, 'expected an error');
  const e = error as { name: string; status: number; code?: string; message: string };
  assert.equal(e.message, expected.message);
  assert.equal(e.status, expected.status);
  assert.equal(e.code, expected.code);
  if (expected.name) assert.equal(e.name, expected.name);
}

describe('signUp', () => {
  test('autoconfirm on: a session with a full user, expires_at in seconds equal to exp', async () => {
    const address = uniqueEmail('Signup');
    const { data, error } = await supabase(idp).auth.signUp({
      email: address.toUpperCase(),
      password: 'pw123456',
      options: { data: { plan: 'pro' } },
    });
    assert.equal(error, null);
    const session = data.session!;
    assert.ok(session, 'a session');
    assert.equal(session.token_type, 'bearer');
    assert.equal(session.expires_in, 3600);
    const claims = decodeJwt(session.access_token);
    const header = decodeProtectedHeader(session.access_token);
    assert.equal(header.alg, 'ES256');
    assert.equal(typeof header.kid, 'string');
    assert.equal(session.expires_at, claims.exp);
    assert.equal((claims.exp as number) - (claims.iat as number), 3600);
    assert.ok(Math.abs((claims.iat as number) - Date.now() / 1000) < 60, 'seconds, not milliseconds');
    for (const claim of [
      'iss',
      'sub',
      'aud',
      'exp',
      'iat',
      'email',
      'phone',
      'app_metadata',
      'user_metadata',
      'role',
      'aal',
      'amr',
      'session_id',
      'is_anonymous',
    ]) {
      assert.ok(claim in claims, `claim ${claim}`);
    }
    assert.equal(claims.aud, 'authenticated');
    assert.equal(claims.role, 'authenticated');
    assert.equal(claims.aal, 'aal1');
    assert.equal(claims.is_anonymous, false);
    assert.equal(claims.phone, '');
    assert.equal(claims.iss, `${idp.url}/auth/v1`);
    assert.deepEqual((claims.amr as Array<{ method: string }>)[0]!.method, 'password');

    const user = data.user!;
    assert.equal(user.email, address.toLowerCase(), 'lower-cased');
    assert.equal(user.aud, 'authenticated');
    assert.equal(user.role, 'authenticated');
    assert.equal(user.phone, '');
    assert.ok(user.email_confirmed_at);
    assert.ok(user.confirmed_at);
    assert.ok(user.last_sign_in_at);
    assert.deepEqual(user.app_metadata, { provider: 'email', providers: ['email'] });
    assert.deepEqual(user.user_metadata, { plan: 'pro', email_verified: true });
    assert.equal(user.identities?.length, 1);
    assert.equal(user.identities![0]!.provider, 'email');
    assert.equal(user.identities![0]!.id, user.id);
    assert.equal(user.is_anonymous, false);
    assert.equal(claims.sub, user.id);
    assert.match(user.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

    // Stored as bcrypt cost 10; the refresh token only as its SHA-256.
    const stored = await db.query('SELECT encrypted_password FROM auth.users WHERE id = $1', [user.id]);
    // A bcrypt hash (its production cost, 10, is checked in idp-passwords).
    assert.match(stored.rows[0].encrypted_password, /^\$2[aby]\$\d\d\$/);
    const raw = await db.query('SELECT 1 FROM auth.refresh_tokens WHERE token = $1', [session.refresh_token]);
    assert.equal(raw.rowCount, 0);
    const hashed = await db.query('SELECT 1 FROM auth.refresh_tokens WHERE token = $1', [
      createHash('sha256').update(session.refresh_token).digest('hex'),
    ]);
    assert.equal(hashed.rowCount, 1);
  });

  test('an existing address (any case) with autoconfirm on: 422 user_already_exists', async () => {
    const address = uniqueEmail('dup');
    await supabase(idp).auth.signUp({ email: address, password: 'pw123456' });
    const { data, error } = await supabase(idp).auth.signUp({ email: address.toUpperCase(), password: 'another passphrase 1' });
    assertAuthError(error, { name: 'AuthApiError', status: 422, code: 'user_already_exists', message: 'User already registered' });
    assert.deepEqual(data, { user: null, session: null });
  });

  test('password rules: too short 422 weak_password with reasons, too long and missing 400', async () => {
    const short = await supabase(idp).auth.signUp({ email: uniqueEmail('weak'), password: '12345' });
    assert.ok(short.error instanceof AuthWeakPasswordError);
    assertAuthError(short.error, { status: 422, code: 'weak_password', message: 'Password should be at least 6 characters.' });
    assert.deepEqual(short.error.reasons, ['length']);

    const long = await supabase(idp).auth.signUp({ email: uniqueEmail('long'), password: 'x'.repeat(73) });
    assertAuthError(long.error, { status: 400, code: 'validation_failed', message: 'Password cannot be longer than 72 characters' });
    // 37 characters, 74 bytes: told it is too long in bytes, not in characters.
    const wide = await supabase(idp).auth.signUp({ email: uniqueEmail('wide'), password: 'é'.repeat(37) });
    assertAuthError(wide.error, {
      status: 400,
      code: 'validation_failed',
      message: 'Password cannot be longer than 72 bytes (this one is 74 bytes in UTF-8)',
    });
    const exactly72 = await supabase(idp).auth.signUp({ email: uniqueEmail('max'), password: 'x'.repeat(72) });
    assert.equal(exactly72.error, null);

    const missing = await supabase(idp).auth.signUp({ email: uniqueEmail('nopw'), password: '' });
    assertAuthError(missing.error, { status: 400, code: 'validation_failed', message: 'Signup requires a valid password' });
  });

  test('a common password (any case) is 422 weak_password with the reason pwned at sign-up, PUT /user and admin update; nothing is stored', async () => {
    const pwned = {
      status: 422,
      code: 'weak_password',
      message: 'Password is known to be weak and easy to guess, please choose a different one.',
    };
    for (const common of ['password', 'Password1', 'QWERTYUIOP', 'iloveyou']) {
      const address = uniqueEmail('common');
      const signUp = await supabase(idp).auth.signUp({ email: address, password: common });
      assert.ok(signUp.error instanceof AuthWeakPasswordError, common);
      assertAuthError(signUp.error, pwned);
      assert.deepEqual(signUp.error.reasons, ['pwned']);
      const stored = await db.query('SELECT 1 FROM auth.users WHERE email = $1', [address]);
      assert.equal(stored.rowCount, 0);
    }
    const address = uniqueEmail('changer');
    const user = await createUser(idp, address);
    // The admin API's update checks as PUT /user does (its create checks nothing, as GoTrue's).
    const byAdmin = await supabase(idp, idp.secretKey).auth.admin.updateUserById(user.id, { password: 'letmein1' });
    assertAuthError(byAdmin.error, pwned);
    const client = supabase(idp);
    await client.auth.setSession({ access_token: user.token, refresh_token: user.refreshToken });
    const changed = await client.auth.updateUser({ password: 'sunshine' });
    assertAuthError(changed.error, pwned);
    // The old password still signs in: the refused one was not stored.
    assert.ok((await signIn(idp, address, 'correct-horse-1')).access_token);
  });

  test('address rules: invalid format 400, empty 422 anonymous_provider_disabled', async () => {
    const invalid = await supabase(idp).auth.signUp({ email: 'not-an-email', password: 'pw123456' });
    assertAuthError(invalid.error, { status: 400, code: 'validation_failed', message: 'Unable to validate email address: invalid format' });
    const empty = await supabase(idp).auth.signUp({ email: '', password: 'pw123456' });
    assertAuthError(empty.error, { status: 422, code: 'anonymous_provider_disabled', message: 'Anonymous sign-ins are disabled' });
  });

  test('autoconfirm off: a bare user awaiting confirmation; sign-in says email_not_confirmed only after the password', async () => {
    const address = uniqueEmail('pending');
    const { data, error } = await supabase(confirming).auth.signUp({ email: address, password: 'pw123456' });
    assert.equal(error, null);
    assert.equal(data.session, null);
    assert.ok(data.user?.confirmation_sent_at);
    assert.equal(data.user?.email_confirmed_at, undefined);
    assert.equal(data.user?.identities?.length, 1);

    const login = await supabase(confirming).auth.signInWithPassword({ email: address, password: 'pw123456' });
    assertAuthError(login.error, { name: 'AuthApiError', status: 400, code: 'email_not_confirmed', message: 'Email not confirmed' });
    const wrong = await supabase(confirming).auth.signInWithPassword({ email: address, password: 'wrong-password' });
    assertAuthError(wrong.error, { status: 400, code: 'invalid_credentials', message: 'Invalid login credentials' });

    // Signing up again would re-send the confirmation, but not within a minute of the last mail to
    // the address (GoTrue's SMTP max frequency; idp-email-mail.test.ts has the re-sent mail).
    const again = await supabase(confirming).auth.signUp({ email: address, password: 'other-pw' });
    assert.equal(again.error?.code, 'over_email_send_rate_limit');
    assert.equal(again.error?.status, 429);
  });

  test('autoconfirm off, confirmed address: a made-up user with no identities (no enumeration)', async () => {
    const address = uniqueEmail('taken');
    const created = await idpRequest(confirming, 'POST', '/auth/v1/admin/users', {
      apikey: confirming.secretKey,
      body: { email: address, password: 'pw123456', email_confirm: true },
    });
    assert.equal(created.status, 200);
    const { data, error } = await supabase(confirming).auth.signUp({ email: address, password: 'pw123456', options: { data: { a: 1 } } });
    assert.equal(error, null);
    assert.equal(data.session, null);
    assert.notEqual(data.user?.id, (created.body as { id: string }).id);
    assert.deepEqual(data.user?.identities, []);
    assert.equal(data.user?.role, '');
    assert.deepEqual(data.user?.user_metadata, { a: 1 });
    // The real account is untouched and still signs in.
    const login = await supabase(confirming).auth.signInWithPassword({ email: address, password: 'pw123456' });
    assert.equal(login.error, null);
    assert.equal(login.data.session?.expires_in, 600);
  });
});

describe('signInWithPassword', () => {
  test('a session, and the same 400 invalid_credentials body for an unknown address and a wrong password', async () => {
    const user = await createUser(idp, uniqueEmail('login'));
    const ok = await supabase(idp).auth.signInWithPassword({ email: user.email.toUpperCase(), password: user.password });
    assert.equal(ok.error, null);
    assert.equal(ok.data.user?.id, user.id);

    const unknown = await supabase(idp).auth.signInWithPassword({ email: uniqueEmail('nobody'), password: user.password });
    const wrong = await supabase(idp).auth.signInWithPassword({ email: user.email, password: 'wrong-password' });
    for (const r of [unknown, wrong]) {
      assert.ok(r.error instanceof AuthApiError);
      assertAuthError(r.error, { status: 400, code: 'invalid_credentials', message: 'Invalid login credentials' });
      assert.deepEqual(r.data, { user: null, session: null });
    }
    const rawUnknown = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
      body: { email: uniqueEmail('nobody'), password: 'x' },
    });
    const rawWrong = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email: user.email, password: 'x' } });
    assert.equal(rawUnknown.text, rawWrong.text);
    assert.equal(rawUnknown.text, '{"code":"invalid_credentials","message":"Invalid login credentials"}');
  });

  test('an unknown address costs a bcrypt comparison like a wrong password does', async () => {
    const user = await createUser(idp, uniqueEmail('timing'));
    // Work, not wall time, is compared (timings are noise on a shared machine): each attempt must
    // run exactly one bcrypt comparison against a hash of the same cost, on the kit's hasher.
    const original = PasswordHasher.prototype.verify;
    const calls: string[] = [];
    const costOf = (hash: string) => hash.split('$')[2];
    PasswordHasher.prototype.verify = function (this: PasswordHasher, password: string, hash: string) {
      calls.push(costOf(hash)!);
      return original.call(this, password, hash);
    };
    try {
      await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email: user.email, password: 'wrong-password' } });
      const wrong = calls.splice(0);
      await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
        body: { email: uniqueEmail('ghost'), password: 'wrong-password' },
      });
      const unknown = calls.splice(0);
      assert.equal(wrong.length, 1);
      assert.deepEqual(unknown, wrong);
    } finally {
      PasswordHasher.prototype.verify = original;
    }
  });

  test('an admin-created user without email_confirm cannot sign in even with autoconfirm on', async () => {
    const address = uniqueEmail('unconfirmed');
    const res = await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
      apikey: idp.secretKey,
      body: { email: address, password: 'pw123456' },
    });
    assert.equal(res.status, 200);
    const login = await supabase(idp).auth.signInWithPassword({ email: address, password: 'pw123456' });
    assertAuthError(login.error, { status: 400, code: 'email_not_confirmed', message: 'Email not confirmed' });
  });

  test("a correct password that fails today's policy is flagged as weak_password", async () => {
    const address = uniqueEmail('short');
    await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
      apikey: idp.secretKey,
      body: { email: address, password: '123', email_confirm: true },
    });
    const { data, error } = await supabase(idp).auth.signInWithPassword({ email: address, password: '123' });
    assert.equal(error, null);
    assert.deepEqual(data.weakPassword?.reasons, ['length']);
  });

  test('missing address 400 validation_failed; unknown grant_type 400', async () => {
    const missing = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { password: 'x' } });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body, { code: 'validation_failed', message: 'missing email or phone' });
    const grant = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=magic', { body: {} });
    assert.equal(grant.status, 400);
    assert.deepEqual(grant.body, { code: 'invalid_credentials', message: 'unsupported_grant_type' });
  });
});

describe('error envelope', () => {
  test('versioned clients get {code, message} with the version and error-code headers echoed', async () => {
    const res = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
      body: { email: 'x@example.com', password: 'nope' },
    });
    assert.equal(res.headers.get('x-supabase-api-version'), '2024-01-01');
    assert.equal(res.headers.get('x-sb-error-code'), 'invalid_credentials');
    const legacy = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
      headers: { 'x-supabase-api-version': 'garbage' },
      body: { email: 'x@example.com', password: 'nope' },
    });
    assert.equal(legacy.headers.get('x-supabase-api-version'), null);
    assert.equal(legacy.headers.get('x-sb-error-code'), 'invalid_credentials');
    assert.deepEqual(legacy.body, { code: 400, error_code: 'invalid_credentials', msg: 'Invalid login credentials' });
  });

  test('success responses carry no version header; a body that is not JSON is 400 bad_json', async () => {
    const user = await createUser(idp, uniqueEmail('hdr'));
    const ok = await idpRequest(idp, 'GET', '/auth/v1/user', { token: user.token });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('x-supabase-api-version'), null);
    const bad = await idpRequest(idp, 'POST', '/auth/v1/signup', { raw: '{"email":' });
    assert.equal(bad.status, 400);
    assert.equal((bad.body as { code: string }).code, 'bad_json');
    const wrongType = await idpRequest(idp, 'POST', '/auth/v1/signup', { body: { email: 5, password: 'pw123456' } });
    assert.equal(wrongType.status, 400);
    assert.equal((wrongType.body as { code: string }).code, 'bad_json');
  });

  test("bad_json for a field of the wrong type names the field and the type it must have, in GoTrue's words", async () => {
    const cases: Array<[path: string, body: unknown, message: string]> = [
      [
        '/auth/v1/signup',
        { email: 5, password: 'pw123456' },
        'json: cannot unmarshal number into Go struct field SignupParams.email of type string',
      ],
      [
        '/auth/v1/signup',
        { email: 'a@b.co', data: 'x' },
        'json: cannot unmarshal string into Go struct field SignupParams.data of type map[string]interface {}',
      ],
      ['/auth/v1/signup', [1], 'json: cannot unmarshal array into Go value of type api.SignupParams'],
      [
        '/auth/v1/token?grant_type=password',
        { email: 'a@b.co', password: true },
        'json: cannot unmarshal bool into Go struct field PasswordGrantParams.password of type string',
      ],
      [
        '/auth/v1/token?grant_type=refresh_token',
        { refresh_token: 7 },
        'json: cannot unmarshal number into Go struct field RefreshTokenGrantParams.refresh_token of type string',
      ],
      [
        '/auth/v1/admin/users',
        { email: 'a@b.co', email_confirm: 'yes' },
        'json: cannot unmarshal string into Go struct field AdminUserParams.email_confirm of type bool',
      ],
    ];
    for (const [path, body, message] of cases) {
      const res = await idpRequest(idp, 'POST', path, { body, apikey: idp.secretKey });
      assert.equal(res.status, 400, path);
      assert.deepEqual(res.body, { code: 'bad_json', message: `Could not parse request body as JSON: ${message}` }, path);
    }
  });
});

describe('refresh tokens', () => {
  test('rotation; the immediately previous token gets the current one; an older one revokes the session', async () => {
    const user = await createUser(idp, uniqueEmail('rotate'));
    const rt1 = user.refreshToken;
    const first = await supabase(idp).auth.refreshSession({ refresh_token: rt1 });
    assert.equal(first.error, null);
    const rt2 = first.data.session!.refresh_token;
    assert.notEqual(rt2, rt1);
    assert.equal(first.data.user?.id, user.id);
    assert.ok(first.data.session!.expires_at! > 0);
    const claims = decodeJwt(first.data.session!.access_token);
    assert.equal(claims.session_id, decodeJwt(user.token).session_id, 'same session');

    // The previous token again (a client that lost the last response): the current token back.
    const replay = await supabase(idp).auth.refreshSession({ refresh_token: rt1 });
    assert.equal(replay.error, null);
    assert.equal(replay.data.session!.refresh_token, rt2);

    const second = await supabase(idp).auth.refreshSession({ refresh_token: rt2 });
    assert.equal(second.error, null);
    const rt3 = second.data.session!.refresh_token;
    const sessionToken = second.data.session!.access_token;

    // rt1 is now two rotations old: reuse. The whole session ends.
    const reuse = await supabase(idp).auth.refreshSession({ refresh_token: rt1 });
    assertAuthError(reuse.error, {
      name: 'AuthApiError',
      status: 400,
      code: 'refresh_token_already_used',
      message: 'Invalid Refresh Token: Already Used',
    });
    const afterReuse = await supabase(idp).auth.refreshSession({ refresh_token: rt3 });
    assertAuthError(afterReuse.error, {
      status: 400,
      code: 'refresh_token_not_found',
      message: 'Invalid Refresh Token: Refresh Token Not Found',
    });
    const getUser = await supabase(idp).auth.getUser(sessionToken);
    assert.ok(getUser.error instanceof AuthSessionMissingError);
  });

  test('two refreshes racing with one token both get the same new token', async () => {
    const user = await createUser(idp, uniqueEmail('race'));
    const [a, b] = await Promise.all([
      supabase(idp).auth.refreshSession({ refresh_token: user.refreshToken }),
      supabase(idp).auth.refreshSession({ refresh_token: user.refreshToken }),
    ]);
    assert.equal(a.error, null);
    assert.equal(b.error, null);
    assert.equal(a.data.session!.refresh_token, b.data.session!.refresh_token);
  });

  test('unknown token 400 refresh_token_not_found; empty token is an OAuth invalid_request', async () => {
    const unknown = await supabase(idp).auth.refreshSession({ refresh_token: 'no-such-token' });
    assertAuthError(unknown.error, {
      status: 400,
      code: 'refresh_token_not_found',
      message: 'Invalid Refresh Token: Refresh Token Not Found',
    });
    const empty = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=refresh_token', { body: { refresh_token: '' } });
    assert.equal(empty.status, 400);
    assert.deepEqual(empty.body, { error: 'invalid_request', error_description: 'refresh_token required' });
  });
});

describe('getUser and sign-out', () => {
  test('valid token: the user; with only a key: 403 bad_jwt missing sub; non-bearer: 401 no_authorization', async () => {
    const user = await createUser(idp, uniqueEmail('me'));
    const { data, error } = await supabase(idp).auth.getUser(user.token);
    assert.equal(error, null);
    assert.equal(data.user?.id, user.id);
    assert.equal(data.user?.email, user.email);

    const keyOnly = await idpRequest(idp, 'GET', '/auth/v1/user');
    assert.equal(keyOnly.status, 403);
    assert.deepEqual(keyOnly.body, { code: 'bad_jwt', message: 'invalid claim: missing sub claim' });
    const basic = await idpRequest(idp, 'GET', '/auth/v1/user', { headers: { authorization: 'Basic dXNlcjpwdw==' } });
    assert.equal(basic.status, 401);
    assert.deepEqual(basic.body, { code: 'no_authorization', message: 'This endpoint requires a valid Bearer token' });
  });

  test('a deleted user: 403 user_not_found (checked before the session); refresh 400 not found', async () => {
    const user = await createUser(idp, uniqueEmail('gone'));
    const del = await supabase(idp, idp.secretKey).auth.admin.deleteUser(user.id);
    assert.equal(del.error, null);
    const { error } = await supabase(idp).auth.getUser(user.token);
    assertAuthError(error, {
      name: 'AuthApiError',
      status: 403,
      code: 'user_not_found',
      message: 'User from sub claim in JWT does not exist',
    });
    const refresh = await supabase(idp).auth.refreshSession({ refresh_token: user.refreshToken });
    assertAuthError(refresh.error, {
      status: 400,
      code: 'refresh_token_not_found',
      message: 'Invalid Refresh Token: Refresh Token Not Found',
    });
  });

  test('signed out: getUser with the old token is AuthSessionMissingError, its refresh token is gone', async () => {
    const address = uniqueEmail('bye');
    await createUser(idp, address);
    const client = supabase(idp);
    const login = await client.auth.signInWithPassword({ email: address, password: 'correct-horse-1' });
    const { access_token, refresh_token } = login.data.session!;
    const out = await client.auth.signOut();
    assert.equal(out.error, null);
    const { data, error } = await supabase(idp).auth.getUser(access_token);
    assert.ok(error instanceof AuthSessionMissingError);
    assert.equal(error.message, 'Auth session missing!');
    assert.equal(error.status, 400);
    assert.equal(error.code, undefined);
    assert.equal(data.user, null);
    const raw = await idpRequest(idp, 'GET', '/auth/v1/user', { token: access_token });
    assert.equal(raw.status, 403);
    assert.deepEqual(raw.body, { code: 'session_not_found', message: 'Session from session_id claim in JWT does not exist' });
    const refresh = await supabase(idp).auth.refreshSession({ refresh_token });
    assertAuthError(refresh.error, {
      status: 400,
      code: 'refresh_token_not_found',
      message: 'Invalid Refresh Token: Refresh Token Not Found',
    });
  });

  test('logout scopes: local ends this session, others the rest, global all', async () => {
    const user = await createUser(idp, uniqueEmail('scopes'));
    const s2 = await signIn(idp, user.email, user.password);
    const s3 = await signIn(idp, user.email, user.password);
    const alive = async (token: string) => (await idpRequest(idp, 'GET', '/auth/v1/user', { token })).status === 200;

    assert.equal((await idpRequest(idp, 'POST', '/auth/v1/logout?scope=local', { token: user.token })).status, 204);
    assert.deepEqual([await alive(user.token), await alive(s2.access_token), await alive(s3.access_token)], [false, true, true]);
    assert.equal((await idpRequest(idp, 'POST', '/auth/v1/logout?scope=others', { token: s2.access_token })).status, 204);
    assert.deepEqual([await alive(s2.access_token), await alive(s3.access_token)], [true, false]);
    const s4 = await signIn(idp, user.email, user.password);
    assert.equal(
      (await idpRequest(idp, 'POST', '/auth/v1/logout', { token: s2.access_token, headers: { 'content-type': 'application/json' } }))
        .status,
      204,
    );
    assert.deepEqual([await alive(s2.access_token), await alive(s4.access_token)], [false, false]);
    const badScope = await idpRequest(idp, 'POST', '/auth/v1/logout?scope=everything', { token: s4.access_token });
    assert.equal(badScope.status, 400);
    assert.equal((badScope.body as { code: string }).code, 'validation_failed');
  });
});

describe('admin', () => {
  test('createUser 200 with the user; deleteUser 200 {}; both need the secret key', async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const address = uniqueEmail('admin');
    const created = await admin.createUser({ email: address, password: 'pw123456', email_confirm: true, user_metadata: { name: 'A' } });
    assert.equal(created.error, null);
    const user = created.data.user!;
    assert.equal(user.email, address);
    assert.ok(user.email_confirmed_at);
    assert.deepEqual(user.user_metadata, { name: 'A', email_verified: true });
    assert.equal(user.identities?.length, 1);
    assert.equal((await supabase(idp).auth.signInWithPassword({ email: address, password: 'pw123456' })).error, null);

    const duplicate = await admin.createUser({ email: address, password: 'pw123456' });
    assertAuthError(duplicate.error, {
      status: 422,
      code: 'email_exists',
      message: 'A user with this email address has already been registered',
    });
    const noEmail = await admin.createUser({ password: 'pw123456' });
    assertAuthError(noEmail.error, {
      status: 400,
      code: 'validation_failed',
      message: 'Cannot create a user without either an email or phone',
    });

    const anonAdmin = supabase(idp).auth.admin;
    const notAdmin = await anonAdmin.createUser({ email: uniqueEmail('x'), password: 'pw123456' });
    assertAuthError(notAdmin.error, { name: 'AuthApiError', status: 403, code: 'not_admin', message: 'User not allowed' });
    const notAdminDelete = await anonAdmin.deleteUser(user.id);
    assertAuthError(notAdminDelete.error, { status: 403, code: 'not_admin', message: 'User not allowed' });
    // A user's own token is not admin either, whatever the key.
    const login = await signIn(idp, address, 'pw123456');
    const withUserToken = await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
      apikey: idp.secretKey,
      token: login.access_token,
      body: { email: uniqueEmail('y') },
    });
    assert.equal(withUserToken.status, 403);
    assert.deepEqual(withUserToken.body, { code: 'not_admin', message: 'User not allowed' });

    const deleted = await admin.deleteUser(user.id);
    assert.equal(deleted.error, null);
    assert.deepEqual(deleted.data.user, {});
    const rows = await db.query('SELECT 1 FROM auth.users WHERE id = $1', [user.id]);
    assert.equal(rows.rowCount, 0);
    const again = await admin.deleteUser(user.id);
    assertAuthError(again.error, { status: 404, code: 'user_not_found', message: 'User not found' });
    const notUuid = await idpRequest(idp, 'DELETE', '/auth/v1/admin/users/not-a-uuid', {
      apikey: idp.secretKey,
      body: { should_soft_delete: false },
    });
    assert.equal(notUuid.status, 404);
    assert.deepEqual(notUuid.body, { code: 'validation_failed', message: 'user_id must be an UUID' });
  });

  test("hard delete cascades to the user's notes; soft delete keeps the row but ends the account", async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const hard = await createUser(idp, uniqueEmail('cascade'));
    await db.query(`INSERT INTO public.notes (user_id, title) VALUES ($1, 'n')`, [hard.id]);
    await admin.deleteUser(hard.id);
    assert.equal((await db.query('SELECT 1 FROM public.notes WHERE user_id = $1', [hard.id])).rowCount, 0);

    const soft = await createUser(idp, uniqueEmail('soft'));
    await db.query(`INSERT INTO public.notes (user_id, title) VALUES ($1, 'kept')`, [soft.id]);
    const res = await admin.deleteUser(soft.id, true);
    assert.equal(res.error, null);
    const row = await db.query('SELECT deleted_at, encrypted_password FROM auth.users WHERE id = $1', [soft.id]);
    assert.ok(row.rows[0].deleted_at);
    assert.equal(row.rows[0].encrypted_password, null);
    assert.equal((await db.query('SELECT 1 FROM public.notes WHERE user_id = $1', [soft.id])).rowCount, 1);
    assertAuthError((await supabase(idp).auth.getUser(soft.token)).error, {
      status: 403,
      code: 'user_not_found',
      message: 'User from sub claim in JWT does not exist',
    });
    assertAuthError((await supabase(idp).auth.signInWithPassword({ email: soft.email, password: soft.password })).error, {
      status: 400,
      code: 'invalid_credentials',
      message: 'Invalid login credentials',
    });
    // The address is free again.
    assert.equal((await admin.createUser({ email: soft.email, password: 'pw123456' })).error, null);
  });
});

describe('getClaims and JWKS', () => {
  test('the JWKS is public, cacheable, has no private part, and verifies the tokens locally', async () => {
    const res = await fetch(`${idp.url}/auth/v1/.well-known/jwks.json`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'public, max-age=600');
    const jwks = (await res.json()) as { keys: Array<Record<string, unknown>> };
    assert.equal(jwks.keys.length, 1);
    const key = jwks.keys[0]!;
    assert.equal(key.kty, 'EC');
    assert.equal(key.crv, 'P-256');
    assert.equal(key.alg, 'ES256');
    assert.equal(key.use, 'sig');
    assert.equal('d' in key, false);

    const user = await createUser(idp, uniqueEmail('claims'));
    assert.equal(decodeProtectedHeader(user.token).kid, key.kid);
    const client = supabase(idp);
    const { data, error } = await client.auth.getClaims(user.token);
    assert.equal(error, null);
    assert.equal(data?.claims.sub, user.id);
    assert.equal(data?.claims.role, 'authenticated');
    assert.equal(data?.header.alg, 'ES256');

    // Verified locally against the JWKS, not by asking /user: after sign-out the server refuses the
    // token, yet getClaims still verifies its signature (as with hosted Supabase).
    assert.equal((await idpRequest(idp, 'POST', '/auth/v1/logout', { token: user.token })).status, 204);
    assert.equal((await idpRequest(idp, 'GET', '/auth/v1/user', { token: user.token })).status, 403);
    const local = await supabase(idp).auth.getClaims(user.token);
    assert.equal(local.error, null);
    assert.equal(local.data?.claims.sub, user.id);

    // A tampered token does not verify locally.
    const [h, p, s] = user.token.split('.');
    const forged = Buffer.from(JSON.stringify({ ...decodeJwt(user.token), role: 'service_role' })).toString('base64url');
    const bad = await client.auth.getClaims(`${h}.${forged}.${s}`);
    assert.equal(bad.data, null);
    assert.ok(bad.error);
    void p;
  });
});

describe('gateway', () => {
  test('missing apikey: 401 with the gateway body, on auth and REST alike', async () => {
    for (const path of ['/auth/v1/user', '/rest/v1/notes', '/auth/v1/signup']) {
      const res = await idpRequest(idp, path.endsWith('signup') ? 'POST' : 'GET', path, {
        apikey: null,
        body: path.endsWith('signup') ? {} : undefined,
      });
      assert.equal(res.status, 401, path);
      assert.deepEqual(res.body, { message: 'No API key found in request', hint: 'No `apikey` request header or url param was found.' });
    }
  });

  test('unknown apikey: 401 Invalid API key, surfaced by supabase-js without a code', async () => {
    const wrong = supabase(idp, 'sb_publishable_not_the_right_one');
    const login = await wrong.auth.signInWithPassword({ email: 'a@example.com', password: 'pw123456' });
    assertAuthError(login.error, { name: 'AuthApiError', status: 401, code: undefined, message: 'Invalid API key' });
    const rest = await wrong.from('notes').select('*');
    assert.equal(rest.status, 401);
    assert.deepEqual(rest.error, { message: 'Invalid API key', hint: 'Double check your Supabase `anon` or `service_role` API key.' });
    // A user JWT is no API key.
    const user = await createUser(idp, uniqueEmail('gw'));
    const jwtAsKey = await idpRequest(idp, 'GET', '/rest/v1/notes', { apikey: user.token, token: user.token });
    assert.equal(jwtAsKey.status, 401);
    assert.equal((jwtAsKey.body as { message: string }).message, 'Invalid API key');
  });

  test("Bearer sb_… or no Authorization means the key's own role", async () => {
    const asService = await idpRequest(idp, 'GET', '/rest/v1/notes?select=id', { apikey: idp.secretKey, token: idp.secretKey });
    assert.equal(asService.status, 200);
    const asServiceNoAuth = await idpRequest(idp, 'GET', '/rest/v1/notes?select=id', { apikey: idp.secretKey });
    assert.equal(asServiceNoAuth.status, 200);
    // The publishable key never gains service_role, even with the secret key in Authorization.
    const asAnon = await idpRequest(idp, 'GET', '/rest/v1/notes?select=id', { apikey: idp.publishableKey, token: idp.secretKey });
    assert.equal(asAnon.status, 401);
    assert.equal((asAnon.body as { code: string }).code, '42501');
  });

  test('health, readiness and unknown routes answer outside the gateway', async () => {
    assert.equal((await fetch(`${idp.url}/healthz`)).status, 200);
    assert.equal((await fetch(`${idp.url}/readyz`)).status, 200);
    const missing = await fetch(`${idp.url}/nope`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { message: 'Route GET /nope not found' });
  });
});
