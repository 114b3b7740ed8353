// The admin user API (list, read, change, ban) and PUT /user, driven by the real supabase-js over
// real HTTP against the real idp; raw HTTP where the wire itself (headers, refusals) is the point.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';
import { idpRequest } from './helpers/http.js';
import { startAll } from './helpers/services.js';

let idp: RunningIdp;
let paging: RunningIdp; // holds only the users of the paging test, so its counts are exact
let db: pg.Client;

before(async () => {
  [idp, paging] = await startAll([startIdp(), startIdp()]);
  db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();
});
after(async () => {
  await db?.end();
  await Promise.all([idp?.close(), paging?.close()]);
});

function assertAuthError(error: unknown, expected: { status: number; code: string; message: string }) {
  assert.ok(error, 'expected an error');
  const e = error as { status: number; code?: string; message: string };
  assert.deepEqual({ status: e.status, code: e.code, message: e.message }, expected);
}

/** The session behind `token` is gone (supabase-js reports that as a missing session, so read the wire). */
async function assertSessionEnded(token: string) {
  const res = await idpRequest(idp, 'GET', '/auth/v1/user', { token, headers: { 'x-supabase-api-version': '2024-01-01' } });
  assert.equal(res.status, 403);
  assert.deepEqual(res.body, { code: 'session_not_found', message: 'Session from session_id claim in JWT does not exist' });
}

const notAdmin = { status: 403, code: 'not_admin', message: 'User not allowed' };

describe('admin listUsers', () => {
  test('7 users, perPage 3: pages of 3, 3, 1, newest first; Link and X-Total-Count give nextPage, lastPage, total', async () => {
    const admin = supabase(paging, paging.secretKey).auth.admin;
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { data, error } = await admin.createUser({ email: uniqueEmail(`page${i}`), password: 'pw123456', email_confirm: true });
      assert.equal(error, null);
      ids.push(data.user!.id);
    }
    const seen: string[] = [];
    const expected = [
      { page: 1, count: 3, nextPage: 2 },
      { page: 2, count: 3, nextPage: 3 },
      { page: 3, count: 1, nextPage: null },
    ];
    for (const { page, count, nextPage } of expected) {
      const { data, error } = await admin.listUsers({ page, perPage: 3 });
      assert.equal(error, null);
      assert.equal(data.users.length, count);
      assert.equal((data as { aud?: string }).aud, 'authenticated');
      assert.equal(data.total, 7);
      assert.equal(data.lastPage, 3);
      assert.equal(data.nextPage, nextPage);
      seen.push(...data.users.map((u) => u.id));
    }
    assert.deepEqual(seen, [...ids].reverse());

    const raw = await idpRequest(paging, 'GET', '/auth/v1/admin/users?per_page=3&page=2', { apikey: paging.secretKey });
    assert.equal(raw.status, 200);
    assert.equal(raw.headers.get('x-total-count'), '7');
    assert.equal(
      raw.headers.get('link'),
      '</auth/v1/admin/users?page=3&per_page=3>; rel="next", </auth/v1/admin/users?page=3&per_page=3>; rel="last"',
    );
    const last = await idpRequest(paging, 'GET', '/auth/v1/admin/users?page=3&per_page=3', { apikey: paging.secretKey });
    assert.equal(last.headers.get('link'), '</auth/v1/admin/users?page=3&per_page=3>; rel="last"');
    // Defaults: page 1 of 50.
    const all = await admin.listUsers();
    if (all.error) throw all.error;
    assert.equal(all.data.users.length, 7);
    assert.equal(all.data.lastPage, 1);
    assert.equal(all.data.nextPage, null);
  });

  test('bad paging values are 400 validation_failed', async () => {
    const cases: Array<[string, string]> = [
      ['page=abc', 'Bad Pagination Parameters: strconv.ParseUint: parsing "abc": invalid syntax'],
      ['per_page=-1', 'Bad Pagination Parameters: strconv.ParseUint: parsing "-1": invalid syntax'],
      ['per_page=0', 'Bad Pagination Parameters: per_page must be greater than 0'],
      ['page=0', 'Bad Pagination Parameters: page must be greater than 0'],
    ];
    for (const [query, message] of cases) {
      const res = await idpRequest(idp, 'GET', `/auth/v1/admin/users?${query}`, {
        apikey: idp.secretKey,
        headers: { 'x-supabase-api-version': '2024-01-01' },
      });
      assert.equal(res.status, 400, query);
      assert.deepEqual(res.body, { code: 'validation_failed', message }, query);
    }
  });

  test('per_page is capped at 1000', async () => {
    const res = await idpRequest(paging, 'GET', '/auth/v1/admin/users?per_page=999999', { apikey: paging.secretKey });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('link'), '</auth/v1/admin/users?page=1&per_page=999999>; rel="last"');
  });
});

describe('admin refusals', () => {
  test('the publishable key and a user token are refused for every admin call: 403 not_admin', async () => {
    const target = await createUser(idp, uniqueEmail('target'));
    const anon = supabase(idp).auth.admin;
    assertAuthError((await anon.listUsers()).error, notAdmin);
    assertAuthError((await anon.getUserById(target.id)).error, notAdmin);
    assertAuthError((await anon.updateUserById(target.id, { ban_duration: '24h' })).error, notAdmin);
    // A user's token with the secret key as apikey is that user, not the key's role.
    for (const [method, path, body] of [
      ['GET', '/auth/v1/admin/users', undefined],
      ['GET', `/auth/v1/admin/users/${target.id}`, undefined],
      ['PUT', `/auth/v1/admin/users/${target.id}`, { ban_duration: '24h' }],
    ] as const) {
      const res = await idpRequest(idp, method, path, {
        apikey: idp.secretKey,
        token: target.token,
        body,
        headers: { 'x-supabase-api-version': '2024-01-01' },
      });
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.deepEqual(res.body, { code: 'not_admin', message: 'User not allowed' });
    }
    const row = await db.query('SELECT banned_until FROM auth.users WHERE id = $1', [target.id]);
    assert.equal(row.rows[0].banned_until, null, 'nothing changed');
  });
});

describe('admin getUserById', () => {
  test('the user; 404 user_not_found for an unknown or soft-deleted id; 404 validation_failed for a non-UUID', async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const user = await createUser(idp, uniqueEmail('get'));
    const { data, error } = await admin.getUserById(user.id);
    assert.equal(error, null);
    assert.equal(data.user!.id, user.id);
    assert.equal(data.user!.email, user.email);
    assertAuthError((await admin.getUserById('00000000-0000-4000-8000-000000000000')).error, {
      status: 404,
      code: 'user_not_found',
      message: 'User not found',
    });
    await admin.deleteUser(user.id, true);
    assertAuthError((await admin.getUserById(user.id)).error, { status: 404, code: 'user_not_found', message: 'User not found' });
    const notUuid = await idpRequest(idp, 'GET', '/auth/v1/admin/users/nope', {
      apikey: idp.secretKey,
      headers: { 'x-supabase-api-version': '2024-01-01' },
    });
    assert.equal(notUuid.status, 404);
    assert.deepEqual(notUuid.body, { code: 'validation_failed', message: 'user_id must be an UUID' });
  });
});

describe('admin updateUserById', () => {
  test('metadata merges key by key (null removes), email and password change, email_confirm confirms', async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const created = await admin.createUser({
      email: uniqueEmail('upd'),
      password: 'pw123456',
      user_metadata: { a: 1, b: 2 },
      app_metadata: { plan: 'free' },
    });
    const id = created.data.user!.id;
    assert.equal(created.data.user!.email_confirmed_at, undefined);
    const newEmail = uniqueEmail('updated');
    const { data, error } = await admin.updateUserById(id, {
      email: newEmail.toUpperCase(),
      password: 'new-pass-1',
      email_confirm: true,
      user_metadata: { b: null, c: 3 },
      app_metadata: { plan: 'pro' },
    });
    assert.equal(error, null);
    const user = data.user!;
    assert.equal(user.email, newEmail);
    assert.ok(user.email_confirmed_at);
    assert.deepEqual(user.user_metadata, { a: 1, c: 3 });
    assert.deepEqual(user.app_metadata, { plan: 'pro', provider: 'email', providers: ['email'] });
    assert.equal(user.identities![0]!.identity_data!.email, newEmail);
    assert.equal((await supabase(idp).auth.signInWithPassword({ email: newEmail, password: 'new-pass-1' })).error, null);
    assertAuthError((await supabase(idp).auth.signInWithPassword({ email: newEmail, password: 'pw123456' })).error, {
      status: 400,
      code: 'invalid_credentials',
      message: 'Invalid login credentials',
    });
  });

  test("a new password ends all of the user's sessions", async () => {
    const user = await createUser(idp, uniqueEmail('pwsessions'));
    const { error } = await supabase(idp, idp.secretKey).auth.admin.updateUserById(user.id, { password: 'another-pass-2' });
    assert.equal(error, null);
    await assertSessionEnded(user.token);
  });

  test('refusals change nothing: taken email 422 email_exists, weak password 422, bad ban duration 400, oversized metadata 400, unknown user 404', async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const user = await createUser(idp, uniqueEmail('refuse'));
    const other = await createUser(idp, uniqueEmail('other'));
    const before = (await admin.getUserById(user.id)).data.user;
    assertAuthError((await admin.updateUserById(user.id, { email: other.email, user_metadata: { x: 1 } })).error, {
      status: 422,
      code: 'email_exists',
      message: 'A user with this email address has already been registered',
    });
    assertAuthError((await admin.updateUserById(user.id, { password: '123', user_metadata: { x: 1 } })).error, {
      status: 422,
      code: 'weak_password',
      message: 'Password should be at least 6 characters.',
    });
    assertAuthError((await admin.updateUserById(user.id, { email: 'not an email' })).error, {
      status: 400,
      code: 'validation_failed',
      message: 'Unable to validate email address: invalid format',
    });
    for (const [duration, reason] of [
      ['1d', 'unknown unit "d" in duration "1d"'],
      ['10', 'missing unit in duration "10"'],
      ['forever', 'invalid duration "forever"'],
      ['99999999h', 'invalid duration "99999999h"'],
    ]) {
      assertAuthError((await admin.updateUserById(user.id, { ban_duration: duration, user_metadata: { x: 1 } })).error, {
        status: 400,
        code: 'validation_failed',
        message: `invalid format for ban duration: time: ${reason}`,
      });
    }
    // The cap holds on the merged result: two halves that fit alone do not fit together.
    const half = 'x'.repeat(2100);
    assert.equal((await admin.updateUserById(user.id, { user_metadata: { first: half } })).error, null);
    const merged = await admin.updateUserById(user.id, { user_metadata: { second: half } });
    assert.equal(merged.error?.status, 400);
    assert.equal(merged.error?.code, 'validation_failed');
    assert.match(merged.error!.message, /^user_metadata must be at most 4096 bytes as JSON/);
    assertAuthError((await admin.updateUserById('00000000-0000-4000-8000-000000000000', { user_metadata: { x: 1 } })).error, {
      status: 404,
      code: 'user_not_found',
      message: 'User not found',
    });
    const after = (await admin.getUserById(user.id)).data.user!;
    assert.equal(after.email, before!.email);
    assert.deepEqual(after.user_metadata, { ...before!.user_metadata, first: half });
    assert.equal(after.banned_until, undefined);
    assert.equal((await supabase(idp).auth.signInWithPassword({ email: user.email, password: user.password })).error, null);
  });

  test('the metadata cap holds when updates race: of 6 concurrent halves, only one is stored', async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const user = await createUser(idp, uniqueEmail('race'));
    const half = 'y'.repeat(2100);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => admin.updateUserById(user.id, { user_metadata: { [`k${i}`]: half } })),
    );
    assert.equal(results.filter((r) => r.error === null).length, 1);
    for (const r of results.filter((r) => r.error !== null)) assert.equal(r.error!.status, 400);
    const stored = (await admin.getUserById(user.id)).data.user!.user_metadata;
    assert.equal(Object.keys(stored).filter((k) => k.startsWith('k')).length, 1);
  });

  test('a phone is 400 validation_failed; a field of the wrong type is bad_json naming AdminUserParams', async () => {
    const user = await createUser(idp, uniqueEmail('phone'));
    const phone = await supabase(idp, idp.secretKey).auth.admin.updateUserById(user.id, { phone: '+15555550100' });
    assertAuthError(phone.error, {
      status: 400,
      code: 'validation_failed',
      message: 'Phone users are not supported by this identity provider',
    });
    const res = await idpRequest(idp, 'PUT', `/auth/v1/admin/users/${user.id}`, {
      apikey: idp.secretKey,
      body: { ban_duration: 24 },
      headers: { 'x-supabase-api-version': '2024-01-01' },
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, {
      code: 'bad_json',
      message:
        'Could not parse request body as JSON: json: cannot unmarshal number into Go struct field AdminUserParams.ban_duration of type string',
    });
  });

  test('ban: sign-in 400 user_banned, refresh 400 user_banned (token left as it was), the access token 403 user_banned; "none" lifts it', async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const user = await createUser(idp, uniqueEmail('ban'));
    const banned = await admin.updateUserById(user.id, { ban_duration: '24h' });
    assert.equal(banned.error, null);
    const until = Date.parse(banned.data.user!.banned_until!);
    assert.ok(Math.abs(until - (Date.now() + 24 * 3600_000)) < 60_000, 'about 24h from now');

    assertAuthError((await supabase(idp).auth.signInWithPassword({ email: user.email, password: user.password })).error, {
      status: 400,
      code: 'user_banned',
      message: 'User is banned',
    });
    assertAuthError((await supabase(idp).auth.refreshSession({ refresh_token: user.refreshToken })).error, {
      status: 400,
      code: 'user_banned',
      message: 'Invalid Refresh Token: User Banned',
    });
    assertAuthError((await supabase(idp).auth.getUser(user.token)).error, { status: 403, code: 'user_banned', message: 'User is banned' });

    const lifted = await admin.updateUserById(user.id, { ban_duration: 'none' });
    assert.equal(lifted.error, null);
    assert.equal(lifted.data.user!.banned_until, undefined);
    // The refresh token refused during the ban was not rotated: it still works once.
    const refreshed = await supabase(idp).auth.refreshSession({ refresh_token: user.refreshToken });
    assert.equal(refreshed.error, null);
    assert.equal((await supabase(idp).auth.signInWithPassword({ email: user.email, password: user.password })).error, null);
  });

  test('a ban of "1h30m" ends 90 minutes from now; a past (negative) duration leaves the user unbanned', async () => {
    const admin = supabase(idp, idp.secretKey).auth.admin;
    const user = await createUser(idp, uniqueEmail('ban90'));
    const { data } = await admin.updateUserById(user.id, { ban_duration: '1h30m' });
    assert.ok(Math.abs(Date.parse(data.user!.banned_until!) - (Date.now() + 90 * 60_000)) < 60_000);
    const past = await admin.updateUserById(user.id, { ban_duration: '-1h' });
    assert.equal(past.error, null);
    assert.equal((await supabase(idp).auth.signInWithPassword({ email: user.email, password: user.password })).error, null);
  });
});

describe('PUT /user (updateUser)', () => {
  async function signedInClient(email: string, password: string) {
    const client = supabase(idp);
    const { error } = await client.auth.signInWithPassword({ email, password });
    assert.equal(error, null);
    return client;
  }

  test('data merges into user_metadata; a new password works and ends the other sessions, not this one', async () => {
    const user = await createUser(idp, uniqueEmail('self'));
    const client = await signedInClient(user.email, user.password);
    const first = await client.auth.updateUser({ data: { theme: 'dark', lang: 'en' } });
    assert.equal(first.error, null);
    assert.deepEqual(first.data.user!.user_metadata, { email_verified: true, theme: 'dark', lang: 'en' });
    const second = await client.auth.updateUser({ data: { lang: null, tz: 'UTC' } });
    assert.deepEqual(second.data.user!.user_metadata, { email_verified: true, theme: 'dark', tz: 'UTC' });

    const changed = await client.auth.updateUser({ password: 'brand-new-9' });
    assert.equal(changed.error, null);
    assert.equal(changed.data.user!.id, user.id);
    assert.equal((await client.auth.getUser()).error, null, 'this session stays');
    await assertSessionEnded(user.token);
    assert.equal((await supabase(idp).auth.signInWithPassword({ email: user.email, password: 'brand-new-9' })).error, null);
  });

  test('refusals change nothing: same password 422 same_password, weak 422, a taken address 422, oversized data 400, no token 401', async () => {
    const user = await createUser(idp, uniqueEmail('selfref'));
    const other = await createUser(idp, uniqueEmail('selfref-other'));
    const client = await signedInClient(user.email, user.password);
    assertAuthError((await client.auth.updateUser({ password: user.password, data: { x: 1 } })).error, {
      status: 422,
      code: 'same_password',
      message: 'New password should be different from the old password.',
    });
    assertAuthError((await client.auth.updateUser({ password: 'abc', data: { x: 1 } })).error, {
      status: 422,
      code: 'weak_password',
      message: 'Password should be at least 6 characters.',
    });
    // (A free address is changed: idp-email-mail.test.ts.)
    assertAuthError((await client.auth.updateUser({ email: other.email, data: { x: 1 } })).error, {
      status: 422,
      code: 'email_exists',
      message: 'A user with this email address has already been registered',
    });
    const big = await client.auth.updateUser({ data: { big: 'x'.repeat(5000) } });
    assert.equal(big.error?.status, 400);
    assert.match(big.error!.message, /^data must be at most 4096 bytes as JSON/);
    // The current address again is no change.
    const same = await client.auth.updateUser({ email: user.email.toUpperCase() });
    assert.equal(same.error, null);
    const unchanged = (await client.auth.getUser()).data.user!;
    assert.deepEqual(unchanged.user_metadata, { email_verified: true });
    assert.equal(unchanged.email, user.email);
    assert.equal((await supabase(idp).auth.signInWithPassword({ email: user.email, password: user.password })).error, null);

    const anonymous = await idpRequest(idp, 'PUT', '/auth/v1/user', {
      body: { data: { x: 1 } },
      headers: { authorization: 'Basic x', 'x-supabase-api-version': '2024-01-01' },
    });
    assert.equal(anonymous.status, 401);
    assert.equal((anonymous.body as { code: string }).code, 'no_authorization');
  });

  test('a phone is 400 validation_failed; a field of the wrong type is bad_json naming UserUpdateParams', async () => {
    const user = await createUser(idp, uniqueEmail('selfphone'));
    const client = await signedInClient(user.email, user.password);
    assertAuthError((await client.auth.updateUser({ phone: '+15555550100' })).error, {
      status: 400,
      code: 'validation_failed',
      message: 'Phone users are not supported by this identity provider',
    });
    const res = await idpRequest(idp, 'PUT', '/auth/v1/user', {
      token: user.token,
      body: { data: 'x' },
      headers: { 'x-supabase-api-version': '2024-01-01' },
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, {
      code: 'bad_json',
      message:
        'Could not parse request body as JSON: json: cannot unmarshal string into Go struct field UserUpdateParams.data of type map[string]interface {}',
    });
  });

  test('a banned user cannot update themselves: 403 user_banned', async () => {
    const user = await createUser(idp, uniqueEmail('selfban'));
    await supabase(idp, idp.secretKey).auth.admin.updateUserById(user.id, { ban_duration: '1h' });
    const res = await idpRequest(idp, 'PUT', '/auth/v1/user', {
      token: user.token,
      body: { data: { x: 1 } },
      headers: { 'x-supabase-api-version': '2024-01-01' },
    });
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, { code: 'user_banned', message: 'User is banned' });
  });
});
