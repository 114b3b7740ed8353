// Anonymous sign-ins (GoTrue's EXTERNAL_ANONYMOUS_USERS_ENABLED) through the real supabase-js:
// signInAnonymously, the user and its token, the per-address hourly limit, converting the user to a permanent one by a confirmed address (mailed, or at once
// with autoconfirm), the admin API giving it an address, and row-level security reading the
// token's is_anonymous claim.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuthApiError, type SupabaseClient } from '@supabase/supabase-js';
import pg from 'pg';
import { createUser, type RunningIdp, signIn, startIdp } from './helpers/idp.js';
import { uniqueIp } from './helpers/client-ips.js';
import { uniqueEmail } from './helpers/emails.js';
import { idpRequest } from './helpers/http.js';
import { decodeJwt } from 'jose';
import { startSmtp, type TestSmtp } from './helpers/smtp.js';
import { serviceClient, supabase } from './helpers/supabase.js';

const ANONYMOUS_LIMIT = 3;
const PASSWORD = 'correct-horse-battery-1';

let smtp: TestSmtp;
let confirming: RunningIdp; // anonymous sign-ins on, addresses confirmed by mail
let autoconfirming: RunningIdp; // anonymous sign-ins on, autoconfirm on (npm start's setting)
let db: pg.Client; // the confirming idp's database

before(async () => {
  smtp = await startSmtp();
  // Each client names its own address (TRUST_PROXY), so the low hourly limit holds per test.
  const anonymous = {
    IDP_EXTERNAL_ANONYMOUS_USERS_ENABLED: 'true',
    IDP_RATE_LIMIT_ANONYMOUS_USERS: String(ANONYMOUS_LIMIT),
    TRUST_PROXY: '127.0.0.1',
  };
  // One after the other, so that a start that fails leaves nothing running that after() misses.
  confirming = await startIdp({ env: { ...anonymous, IDP_AUTOCONFIRM: 'false', SMTP_URL: smtp.url } });
  autoconfirming = await startIdp({ env: anonymous });
  db = new pg.Client({ connectionString: confirming.databaseUrl });
  await db.connect();
  await db.query(`
    create table public.posts (
      id bigint generated always as identity primary key,
      user_id uuid not null default auth.uid() references auth.users (id) on delete cascade,
      body text not null);
    alter table public.posts enable row level security;
    create policy posts_read_own on public.posts for select to authenticated using ((select auth.uid()) = user_id);
    -- Only permanent users may write: the claim the idp puts in every access token.
    create policy posts_write_permanent on public.posts for insert to authenticated
      with check ((select auth.uid()) = user_id and ((select auth.jwt()) ->> 'is_anonymous')::boolean is false);
    grant select, insert (body) on public.posts to authenticated;`);
});
after(async () => {
  await db?.end();
  await Promise.all([confirming?.close(), autoconfirming?.close()]);
  await smtp?.close();
});

/** supabase-js as a client at its own address (the idps trust 127.0.0.1's X-Forwarded-For). */
function clientAt(idp: RunningIdp, ip = uniqueIp()): SupabaseClient {
  return supabase(idp, idp.publishableKey, { 'X-Forwarded-For': ip });
}

async function userCount(idp: RunningIdp): Promise<number> {
  const res = await idpRequest(idp, 'GET', '/auth/v1/admin/users?per_page=1', { apikey: idp.secretKey });
  assert.equal(res.status, 200, res.text);
  return Number(res.headers.get('x-total-count'));
}

/** A signed-in anonymous user, on a client that keeps its session. */
async function anonymousUser(idp: RunningIdp, data?: Record<string, unknown>) {
  const client = clientAt(idp);
  const { data: signedIn, error } = await client.auth.signInAnonymously(data ? { options: { data } } : undefined);
  assert.equal(error, null);
  assert.ok(signedIn.session && signedIn.user);
  return { client, session: signedIn.session, user: signedIn.user };
}

function assertAuthError(error: unknown, status: number, code: string, message: string) {
  assert.ok(error instanceof AuthApiError, `expected an AuthApiError, got ${String(error)}`);
  assert.deepEqual([error.status, error.code, error.message], [status, code, message]);
}

/** The six-digit code of the next mail to `to`. */
async function mailedCode(to: string): Promise<string> {
  const mail = await smtp.waitForMail(to);
  return /enter the code: (\d{6})/.exec(mail.text)![1]!;
}

describe('signInAnonymously', () => {
  test('a session for a new user: is_anonymous, no email or identity, data as user_metadata; the token says so too', async () => {
    const { client, session, user } = await anonymousUser(confirming, { theme: 'dark' });
    assert.equal(user.is_anonymous, true);
    assert.equal(user.email, '');
    assert.equal(user.role, 'authenticated');
    assert.equal(user.aud, 'authenticated');
    assert.deepEqual(user.identities, []);
    assert.deepEqual(user.app_metadata, {});
    assert.deepEqual(user.user_metadata, { theme: 'dark' });

    const claims = decodeJwt(session.access_token);
    assert.equal(claims.is_anonymous, true);
    assert.equal(claims.role, 'authenticated');
    assert.equal(claims.sub, user.id);
    assert.equal(claims.email, '');
    assert.equal((claims.amr as Array<{ method: string }>)[0]!.method, 'anonymous');

    const fetched = await client.auth.getUser();
    assert.equal(fetched.data.user?.is_anonymous, true);
    const refreshed = await client.auth.refreshSession();
    assert.equal(refreshed.error, null);
    assert.equal(decodeJwt(refreshed.data.session!.access_token).is_anonymous, true);

    const { rows } = await db.query('SELECT email, encrypted_password, is_anonymous FROM auth.users WHERE id = $1', [user.id]);
    assert.deepEqual(rows, [{ email: null, encrypted_password: null, is_anonymous: true }]);
  });

  test('bad data: 400 validation_failed over the metadata limit, no user', async () => {
    const before = await userCount(confirming);
    const { error } = await clientAt(confirming).auth.signInAnonymously({ options: { data: { blob: 'x'.repeat(5000) } } });
    assert.ok(error instanceof AuthApiError);
    assert.deepEqual([error.status, error.code], [400, 'validation_failed']);
    assert.equal(await userCount(confirming), before);
  });

  test('per address: past IDP_RATE_LIMIT_ANONYMOUS_USERS in the hour, 429 with Retry-After and no user; another address signs in', async () => {
    const ip = uniqueIp();
    const before = await userCount(confirming);
    const results = await Promise.all(Array.from({ length: ANONYMOUS_LIMIT + 2 }, () => clientAt(confirming, ip).auth.signInAnonymously()));
    const refused = results.filter((r) => r.error);
    assert.equal(results.length - refused.length, ANONYMOUS_LIMIT, 'concurrent sign-ins cannot pass the limit together');
    for (const r of refused) assertAuthError(r.error, 429, 'over_request_rate_limit', 'Request rate limit reached');
    const raw = await idpRequest(confirming, 'POST', '/auth/v1/signup', { headers: { 'x-forwarded-for': ip }, body: {} });
    assert.equal(raw.status, 429);
    assert.match(raw.headers.get('retry-after') ?? '', /^\d+$/);
    assert.equal(await userCount(confirming), before + ANONYMOUS_LIMIT);
    assert.equal((await clientAt(confirming).auth.signInAnonymously()).error, null);
  });
});

describe('becoming permanent', () => {
  test('a password without an address: 422 validation_failed, nothing stored', async () => {
    const { client, user } = await anonymousUser(confirming);
    const { error } = await client.auth.updateUser({ password: PASSWORD });
    assertAuthError(error, 422, 'validation_failed', 'Updating password of an anonymous user without an email or phone is not allowed');
    const { rows } = await db.query('SELECT encrypted_password FROM auth.users WHERE id = $1', [user.id]);
    assert.equal(rows[0].encrypted_password, null);
  });

  test('updateUser({ email }) mails the new address only; the confirmed code makes the user permanent', async () => {
    const { client, user } = await anonymousUser(confirming, { theme: 'dark' });
    const address = uniqueEmail('anon-convert');
    const pending = await client.auth.updateUser({ email: address });
    assert.equal(pending.error, null);
    assert.equal(pending.data.user?.is_anonymous, true, 'still anonymous until the address is confirmed');
    assert.equal(pending.data.user?.new_email, address);
    assert.equal(pending.data.user?.email, '');

    const { data, error } = await supabase(confirming).auth.verifyOtp({
      type: 'email_change',
      email: address,
      token: await mailedCode(address),
    });
    assert.equal(error, null);
    const permanent = data.user!;
    assert.equal(permanent.id, user.id);
    assert.equal(permanent.is_anonymous, false);
    assert.equal(permanent.email, address);
    assert.ok(permanent.email_confirmed_at);
    assert.deepEqual(permanent.app_metadata, { provider: 'email', providers: ['email'] });
    assert.deepEqual(permanent.user_metadata, { theme: 'dark', email_verified: true });
    assert.equal(permanent.identities?.length, 1);
    assert.deepEqual(permanent.identities![0]!.identity_data, {
      sub: user.id,
      email: address,
      email_verified: true,
      phone_verified: false,
    });
    assert.equal(decodeJwt(data.session!.access_token).is_anonymous, false);
    // The anonymous session's next token says so too.
    const refreshed = await client.auth.refreshSession();
    assert.equal(decodeJwt(refreshed.data.session!.access_token).is_anonymous, false);
  });

  test('updateUser({ email, password }): the password is kept; once the address is confirmed it signs in', async () => {
    const { client, user } = await anonymousUser(confirming);
    const address = uniqueEmail('anon-password');
    assert.equal((await client.auth.updateUser({ email: address, password: PASSWORD })).error, null);
    const stillAnonymous = await client.auth.getUser();
    assert.equal(stillAnonymous.data.user?.is_anonymous, true);
    await assert.rejects(signIn(confirming, address, PASSWORD), 'no address to sign in with before it is confirmed');

    const verified = await supabase(confirming).auth.verifyOtp({ type: 'email_change', email: address, token: await mailedCode(address) });
    assert.equal(verified.error, null);
    const session = await signIn(confirming, address, PASSWORD);
    assert.equal(session.user.id, user.id);
    assert.equal(decodeJwt(session.access_token).is_anonymous, false);
  });

  test('with IDP_AUTOCONFIRM the address is taken at once, without a mail; an address someone has is 422 and changes nothing', async () => {
    const taken = await createUser(autoconfirming, uniqueEmail('anon-taken'));
    const { client, user } = await anonymousUser(autoconfirming);
    const refused = await client.auth.updateUser({ email: taken.email, password: PASSWORD });
    assertAuthError(refused.error, 422, 'email_exists', 'A user with this email address has already been registered');
    const unchanged = await idpRequest(autoconfirming, 'GET', `/auth/v1/admin/users/${user.id}`, { apikey: autoconfirming.secretKey });
    assert.equal((unchanged.body as { is_anonymous: boolean }).is_anonymous, true);

    const address = uniqueEmail('anon-auto');
    const { data, error } = await client.auth.updateUser({ email: address, password: PASSWORD });
    assert.equal(error, null);
    assert.equal(data.user?.is_anonymous, false);
    assert.equal(data.user?.email, address);
    assert.ok(data.user?.email_confirmed_at);
    assert.equal(data.user?.identities?.length, 1);
    const session = await signIn(autoconfirming, address, PASSWORD);
    assert.equal(session.user.id, user.id);
    assert.equal(decodeJwt(session.access_token).is_anonymous, false);
  });

  test('the admin API: an address with email_confirm makes the user permanent; without it, an identity but still anonymous', async () => {
    const admin = serviceClient(confirming).auth.admin;
    const confirmed = await anonymousUser(confirming);
    const a = await admin.updateUserById(confirmed.user.id, { email: uniqueEmail('anon-admin'), email_confirm: true });
    assert.equal(a.error, null);
    assert.equal(a.data.user?.is_anonymous, false);
    assert.equal(a.data.user?.identities?.length, 1);
    assert.equal(a.data.user?.identities?.[0]?.identity_data?.email_verified, true);

    const unconfirmed = await anonymousUser(confirming);
    const b = await admin.updateUserById(unconfirmed.user.id, { email: uniqueEmail('anon-admin-pending') });
    assert.equal(b.error, null);
    assert.equal(b.data.user?.is_anonymous, true);
    assert.equal(b.data.user?.identities?.length, 1);
    assert.equal(b.data.user?.identities?.[0]?.identity_data?.email_verified, false);
  });
});

describe('row-level security', () => {
  test("a policy on auth.jwt()->>'is_anonymous' refuses the anonymous user's insert and allows it once permanent", async () => {
    const { client } = await anonymousUser(confirming);
    const refused = await client.from('posts').insert({ body: 'as a guest' });
    assert.equal(refused.status, 403);
    assert.equal(refused.error?.code, '42501');

    const address = uniqueEmail('anon-rls');
    assert.equal((await client.auth.updateUser({ email: address })).error, null);
    const verified = await client.auth.verifyOtp({ type: 'email_change', email: address, token: await mailedCode(address) });
    assert.equal(verified.error, null);
    const inserted = await client.from('posts').insert({ body: 'as a member' }).select('body');
    assert.equal(inserted.error, null);
    assert.deepEqual(inserted.data, [{ body: 'as a member' }]);
    const read = await client.from('posts').select('body');
    assert.deepEqual(read.data, [{ body: 'as a member' }]);
  });
});
