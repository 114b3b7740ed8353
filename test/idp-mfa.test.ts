// GoTrue's MFA with TOTP factors, through the real supabase-js: enrol, challenge, verify with a code
// computed here from the secret (RFC 6238), the session's aal and amr, and the rules around them:
// expiry, replay, the budget of codes per challenge, factor and user under concurrency, other users'
// factors, unenrol at aal2, the admin API, and a row-level security policy that requires aal2.
// Each user's client has an address of its own (TRUST_PROXY), so per-address limits stay per test.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SupabaseClient } from '@supabase/supabase-js';
import { decodeJwt } from 'jose';
import pg from 'pg';
import { base32Decode, totpCode, totpStep } from '../src/kit/totp.js';
import { uniqueIp } from './helpers/client-ips.js';
import { uniqueEmail } from './helpers/emails.js';
import { idpRequest } from './helpers/http.js';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { serviceClient, supabase } from './helpers/supabase.js';

const PER_CHALLENGE = 5;
const PER_FACTOR = 8;
const PER_USER = 12;
const PER_ADDRESS = 15;
const MAX_FACTORS = 3;

let idp: RunningIdp;
let db: pg.Client;
// The idp's clock: the file's start plus an offset tests move forward (expiry, the next time
// step). It does not run on its own: with real time, a 30 s step boundary crossed between the
// code a test used and the code it computes next would turn an expected replay into a new code.
const startedAt = Date.now();
let offsetMs = 0;
const idpNow = () => startedAt + offsetMs;

before(async () => {
  idp = await startIdp({
    env: {
      TRUST_PROXY: '127.0.0.1',
      IDP_EXTERNAL_ANONYMOUS_USERS_ENABLED: 'true',
      IDP_MFA_MAX_ATTEMPTS_PER_CHALLENGE: String(PER_CHALLENGE),
      IDP_MFA_MAX_ATTEMPTS_PER_FACTOR: String(PER_FACTOR),
      IDP_MFA_MAX_ATTEMPTS_PER_USER: String(PER_USER),
      IDP_MFA_RATE_LIMIT_CHALLENGE_AND_VERIFY: String(PER_ADDRESS),
      IDP_MFA_MAX_ENROLLED_FACTORS: String(MAX_FACTORS),
    },
    clock: idpNow,
  });
  db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();
  await db.query(`
    create table public.vault (id int primary key, secret text not null);
    alter table public.vault enable row level security;
    create policy vault_aal2 on public.vault for select to authenticated using ((select auth.jwt()) ->> 'aal' = 'aal2');
    grant select on public.vault to authenticated;
    insert into public.vault values (1, 'behind a second factor');`);
});
after(async () => {
  await db?.end();
  await idp?.close();
});

interface SignedIn {
  client: SupabaseClient;
  email: string;
  password: string;
  ip: string;
  userId: string;
}

/** A user signed in with supabase-js from an address of its own. */
async function signedIn(tag: string, existing?: { email: string; password: string }, ip = uniqueIp()): Promise<SignedIn> {
  const account = existing ?? (await createUser(idp, uniqueEmail(tag)));
  const client = supabase(idp, idp.publishableKey, { 'X-Forwarded-For': ip });
  const { data, error } = await client.auth.signInWithPassword({ email: account.email, password: account.password });
  assert.equal(error, null);
  return { client, email: account.email, password: account.password, ip, userId: data.user!.id };
}

/** The code of the idp's current time step. */
const codeNow = (secret: string) => totpCode(base32Decode(secret), totpStep(idpNow()));

/** Moves the idp's clock to the next time step, so a new code exists. */
function nextStep(): void {
  offsetMs += 30_000;
}

async function enrol(user: SignedIn, friendlyName?: string) {
  const { data, error } = await user.client.auth.mfa.enroll({ factorType: 'totp', friendlyName });
  assert.equal(error, null);
  return data!;
}

async function challenge(user: SignedIn, factorId: string): Promise<string> {
  const { data, error } = await user.client.auth.mfa.challenge({ factorId });
  assert.equal(error, null);
  return data!.id;
}

/** Enrols a factor and verifies it: the session is aal2. */
async function verifiedFactor(user: SignedIn, friendlyName?: string) {
  const factor = await enrol(user, friendlyName);
  nextStep();
  const { error } = await user.client.auth.mfa.challengeAndVerify({ factorId: factor.id, code: codeNow(factor.totp.secret) });
  assert.equal(error, null);
  return factor;
}

async function accessClaims(client: SupabaseClient) {
  const { data } = await client.auth.getSession();
  return decodeJwt(data.session!.access_token) as { aal: string; amr: { method: string; timestamp: number }[]; session_id: string };
}

/** A raw call from `ip` with the user's token. */
async function raw(user: SignedIn, method: string, path: string, body?: unknown, ip = user.ip) {
  const { data } = await user.client.auth.getSession();
  const res = await idpRequest(idp, method, `/auth/v1${path}`, {
    token: data.session!.access_token,
    headers: { 'X-Forwarded-For': ip },
    body,
  });
  const json = res.body as Record<string, unknown>;
  // GoTrue's error code, in either form of its error body.
  const code = (json?.error_code ?? json?.code) as string | undefined;
  return { status: res.status, body: { ...json, code } as Record<string, unknown> & { code?: string } };
}

describe('enrol, challenge, verify', () => {
  test('enrol answers the secret, its otpauth URI and a QR code; the factor is unverified until a code is verified', async () => {
    const user = await signedIn('mfa-enrol');
    const factor = await enrol(user, 'phone app');
    assert.equal(factor.type, 'totp');
    assert.equal(factor.friendly_name, 'phone app');
    assert.match(factor.totp.secret, /^[A-Z2-7]{32}$/);
    const uri = new URL(factor.totp.uri);
    assert.equal(uri.protocol, 'otpauth:');
    assert.equal(uri.searchParams.get('secret'), factor.totp.secret);
    // No issuer sent: the host of the site URL, as GoTrue.
    assert.equal(uri.searchParams.get('issuer'), new URL(idp.url).host);
    assert.ok(decodeURIComponent(uri.pathname).endsWith(user.email));
    // GoTrue answers the SVG; supabase-js makes it a data URI.
    assert.match(factor.totp.qr_code, /^data:image\/svg\+xml;utf-8,<svg/);

    const listed = await user.client.auth.mfa.listFactors();
    assert.equal(listed.error, null);
    assert.deepEqual(
      listed.data!.all.map((f) => [f.id, f.status, f.factor_type, f.friendly_name]),
      [[factor.id, 'unverified', 'totp', 'phone app']],
    );
    assert.equal(listed.data!.totp.length, 0);
    // An unverified factor raises nothing.
    const aal = await user.client.auth.mfa.getAuthenticatorAssuranceLevel();
    assert.equal(aal.data!.currentLevel, 'aal1');
    assert.equal(aal.data!.nextLevel, 'aal1');
  });

  test('a verified code gives the session aal2 and amr totp, kept by a refresh; the factor is verified', async () => {
    const user = await signedIn('mfa-verify');
    const before = await accessClaims(user.client);
    assert.equal(before.aal, 'aal1');
    assert.deepEqual(
      before.amr.map((e) => e.method),
      ['password'],
    );

    const factor = await enrol(user);
    const aal1Refresh = (await user.client.auth.getSession()).data.session!.refresh_token;
    // A second later, as a person types the code: the amr entries are ordered by their time.
    offsetMs += 1_000;
    const challengeId = await challenge(user, factor.id);
    const verified = await user.client.auth.mfa.verify({ factorId: factor.id, challengeId, code: codeNow(factor.totp.secret) });
    assert.equal(verified.error, null);
    // The aal1 refresh token cannot refresh into the raised session.
    const stale = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=refresh_token', { body: { refresh_token: aal1Refresh } });
    assert.equal(stale.status, 400);
    assert.equal((stale.body as { code: string }).code, 'refresh_token_not_found');
    const claims = await accessClaims(user.client);
    assert.equal(claims.aal, 'aal2');
    assert.equal(claims.session_id, before.session_id, 'the same session, raised');
    assert.deepEqual(
      claims.amr.map((e) => e.method),
      ['totp', 'password'],
    );
    assert.ok(claims.amr[0]!.timestamp > claims.amr[1]!.timestamp);

    const aal = await user.client.auth.mfa.getAuthenticatorAssuranceLevel();
    assert.equal(aal.data!.currentLevel, 'aal2');
    assert.equal(aal.data!.nextLevel, 'aal2');
    const listed = await user.client.auth.mfa.listFactors();
    assert.deepEqual(
      listed.data!.totp.map((f) => [f.id, f.status]),
      [[factor.id, 'verified']],
    );
    const { data: got } = await user.client.auth.getUser();
    assert.equal(got.user!.factors?.[0]?.status, 'verified');

    // A refresh keeps what the session was raised to.
    const refreshed = await user.client.auth.refreshSession();
    assert.equal(refreshed.error, null);
    const after = await accessClaims(user.client);
    assert.equal(after.aal, 'aal2');
    assert.deepEqual(
      after.amr.map((e) => e.method),
      ['totp', 'password'],
    );
  });

  test('a new sign-in of a user with a verified factor is aal1 with aal2 as the next level, and its other aal1 sessions end on verify', async () => {
    const first = await signedIn('mfa-next-level');
    const factor = await verifiedFactor(first);
    const second = await signedIn('mfa-next-level', first);
    const third = await signedIn('mfa-next-level', first);
    const { data: session } = await second.client.auth.getSession();
    const aal = await second.client.auth.mfa.getAuthenticatorAssuranceLevel(session.session!.access_token);
    assert.equal(aal.data!.currentLevel, 'aal1');
    assert.equal(aal.data!.nextLevel, 'aal2');

    nextStep();
    assert.equal((await second.client.auth.mfa.challengeAndVerify({ factorId: factor.id, code: codeNow(factor.totp.secret) })).error, null);
    // GoTrue's InvalidateSessionsWithAALLessThan: the third (aal1) session is gone; the first, aal2, stays.
    const ended = await raw(third, 'GET', '/user');
    assert.equal(ended.status, 403);
    assert.equal(ended.body.code, 'session_not_found');
    assert.equal((await raw(first, 'GET', '/user')).status, 200);
  });

  test('an empty code is a 400; a wrong one a 422 mfa_verification_failed, the session unchanged', async () => {
    const user = await signedIn('mfa-wrong');
    const factor = await enrol(user);
    const challengeId = await challenge(user, factor.id);
    const empty = await raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: challengeId, code: '' });
    assert.equal(empty.status, 400);
    assert.equal(empty.body.code, 'validation_failed');
    const wrong = await raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: challengeId, code: '12345x' });
    assert.equal(wrong.status, 422);
    assert.equal(wrong.body.code, 'mfa_verification_failed');
    const notUuid = await raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: 'nope', code: '123456' });
    assert.equal(notUuid.status, 400);
    const unknown = await raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: crypto.randomUUID(), code: '123456' });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.code, 'mfa_factor_not_found');
    assert.equal((await accessClaims(user.client)).aal, 'aal1');
  });

  test('a challenge expires after IDP_MFA_CHALLENGE_EXPIRY_DURATION (300 s): 422 mfa_challenge_expired', async () => {
    const user = await signedIn('mfa-expiry');
    const factor = await enrol(user);
    const { data } = await user.client.auth.mfa.challenge({ factorId: factor.id });
    assert.ok(Math.abs(data!.expires_at - (Math.floor(idpNow() / 1000) + 300)) <= 1);
    offsetMs += 301_000;
    const late = await user.client.auth.mfa.verify({ factorId: factor.id, challengeId: data!.id, code: codeNow(factor.totp.secret) });
    assert.equal(late.error?.status, 422);
    assert.equal(late.error?.code, 'mfa_challenge_expired');
    assert.equal((await accessClaims(user.client)).aal, 'aal1');
  });

  test('a code is accepted once: the same code against a new challenge is refused, the next step’s accepted', async () => {
    const user = await signedIn('mfa-replay');
    const factor = await verifiedFactor(user);
    const used = codeNow(factor.totp.secret);
    const again = await signedIn('mfa-replay', user);
    const replay = await again.client.auth.mfa.verify({ factorId: factor.id, challengeId: await challenge(again, factor.id), code: used });
    assert.equal(replay.error?.code, 'mfa_verification_failed');
    assert.equal((await accessClaims(again.client)).aal, 'aal1');
    // The same code twice at once: one session is raised at most.
    const racers = await Promise.all([signedIn('mfa-replay', user), signedIn('mfa-replay', user)]);
    // Both challenges first: a verify ends the user's other aal1 sessions (as GoTrue's does), so a
    // challenge asked after the other racer's verify would find its session gone.
    const challenges = await Promise.all(racers.map((r) => challenge(r, factor.id)));
    nextStep();
    const code = codeNow(factor.totp.secret);
    const outcomes = await Promise.all(
      racers.map(async (r, i) => (await r.client.auth.mfa.verify({ factorId: factor.id, challengeId: challenges[i]!, code })).error),
    );
    assert.equal(outcomes.filter((e) => e === null).length, 1);
  });

  test('a challenge is verified from the address it was issued to, and once', async () => {
    const user = await signedIn('mfa-address');
    const factor = await enrol(user);
    const challengeId = await challenge(user, factor.id);
    const elsewhere = await raw(
      user,
      'POST',
      `/factors/${factor.id}/verify`,
      { challenge_id: challengeId, code: codeNow(factor.totp.secret) },
      uniqueIp(),
    );
    assert.equal(elsewhere.status, 422);
    assert.equal(elsewhere.body.code, 'mfa_ip_address_mismatch');
    const ok = await raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: challengeId, code: codeNow(factor.totp.secret) });
    assert.equal(ok.status, 200);
    nextStep();
    const token = ok.body.access_token as string;
    const reuse = await idpRequest(idp, 'POST', `/auth/v1/factors/${factor.id}/verify`, {
      token,
      headers: { 'X-Forwarded-For': user.ip },
      body: { challenge_id: challengeId, code: codeNow(factor.totp.secret) },
    });
    assert.equal(reuse.status, 422);
    assert.equal((reuse.body as { code: string }).code, 'mfa_ip_address_mismatch');
  });

  test('anonymous users may not enrol: 403 no_authorization', async () => {
    const client = supabase(idp, idp.publishableKey, { 'X-Forwarded-For': uniqueIp() });
    assert.equal((await client.auth.signInAnonymously()).error, null);
    const { error } = await client.auth.mfa.enroll({ factorType: 'totp' });
    assert.equal(error?.status, 403);
    assert.equal(error?.code, 'no_authorization');
  });
});

describe('enrolment rules', () => {
  test('names are unique per user, other types are not enabled, and a user holds at most IDP_MFA_MAX_ENROLLED_FACTORS, even when enrolling at once', async () => {
    const user = await signedIn('mfa-rules');
    await enrol(user, 'laptop');
    const dup = await user.client.auth.mfa.enroll({ factorType: 'totp', friendlyName: 'laptop' });
    assert.equal(dup.error?.code, 'mfa_factor_name_conflict');
    const phone = await raw(user, 'POST', '/factors', { factor_type: 'phone', phone: '+15555550100' });
    assert.equal(phone.body.code, 'mfa_phone_enroll_not_enabled');
    const other = await raw(user, 'POST', '/factors', { factor_type: 'sms' });
    assert.equal(other.status, 400);
    const long = await raw(user, 'POST', '/factors', { factor_type: 'totp', friendly_name: 'x'.repeat(256) });
    assert.equal(long.status, 400);

    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => user.client.auth.mfa.enroll({ factorType: 'totp', friendlyName: `key ${i}` })),
    );
    assert.equal(results.filter((r) => r.error === null).length, MAX_FACTORS - 1);
    assert.ok(results.filter((r) => r.error).every((r) => r.error?.code === 'too_many_enrolled_mfa_factors'));
    assert.equal((await user.client.auth.mfa.listFactors()).data!.all.length, MAX_FACTORS);
  });

  test('with a verified factor, enrolling another needs aal2 (403 insufficient_aal); verifying removes the other unverified factors', async () => {
    const user = await signedIn('mfa-second');
    const spare = await enrol(user, 'spare');
    await verifiedFactor(user, 'main');
    const listed = await user.client.auth.mfa.listFactors();
    assert.deepEqual(
      listed.data!.all.map((f) => f.friendly_name),
      ['main'],
      `unverified ${spare.id} removed`,
    );
    const aal1 = await signedIn('mfa-second', user);
    const refused = await aal1.client.auth.mfa.enroll({ factorType: 'totp', friendlyName: 'another' });
    assert.equal(refused.error?.status, 403);
    assert.equal(refused.error?.code, 'insufficient_aal');
    assert.equal((await user.client.auth.mfa.enroll({ factorType: 'totp', friendlyName: 'another' })).error, null);
  });

  test('unenrol: an unverified factor at aal1; a verified one only at aal2 (422 insufficient_aal), which lowers its sessions to aal1', async () => {
    const user = await signedIn('mfa-unenrol');
    const loose = await enrol(user, 'loose');
    assert.equal((await user.client.auth.mfa.unenroll({ factorId: loose.id })).error, null);
    const factor = await verifiedFactor(user, 'kept');
    const aal1 = await signedIn('mfa-unenrol', user);
    const refused = await aal1.client.auth.mfa.unenroll({ factorId: factor.id });
    assert.equal(refused.error?.status, 422);
    assert.equal(refused.error?.code, 'insufficient_aal');

    const removed = await user.client.auth.mfa.unenroll({ factorId: factor.id });
    assert.equal(removed.error, null);
    assert.equal(removed.data!.id, factor.id);
    assert.equal((await user.client.auth.refreshSession()).error, null);
    const claims = await accessClaims(user.client);
    assert.equal(claims.aal, 'aal1');
    assert.deepEqual(
      claims.amr.map((e) => e.method),
      ['password'],
    );
    assert.equal((await user.client.auth.mfa.listFactors()).data!.all.length, 0);
  });

  test("another user's factor is not found (404 mfa_factor_not_found), nor is a malformed id", async () => {
    const owner = await signedIn('mfa-owner');
    const factor = await enrol(owner);
    const challengeId = await challenge(owner, factor.id);
    const other = await signedIn('mfa-intruder');
    for (const [method, path, body] of [
      ['POST', `/factors/${factor.id}/challenge`, {}],
      ['POST', `/factors/${factor.id}/verify`, { challenge_id: challengeId, code: codeNow(factor.totp.secret) }],
      ['DELETE', `/factors/${factor.id}`, undefined],
    ] as const) {
      const res = await raw(other, method, path, body);
      assert.equal(res.status, 404, path);
      assert.equal(res.body.code, 'mfa_factor_not_found');
    }
    const malformed = await raw(other, 'POST', '/factors/not-a-uuid/challenge', {});
    assert.equal(malformed.status, 404);
    assert.equal(malformed.body.code, 'validation_failed');
    assert.equal((await owner.client.auth.mfa.listFactors()).data!.all.length, 1);
  });
});

describe('guessing codes', () => {
  const wrongCode = (secret: string) => String((Number(codeNow(secret)) + 500_000) % 1_000_000).padStart(6, '0');

  test(`50 wrong codes at once against one challenge: at most ${PER_CHALLENGE} compared, and the challenge is void`, async () => {
    const user = await signedIn('mfa-guess-challenge');
    const factor = await enrol(user);
    const challengeId = await challenge(user, factor.id);
    const wrong = wrongCode(factor.totp.secret);
    const results = await Promise.all(
      Array.from({ length: 50 }, () => raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: challengeId, code: wrong })),
    );
    const compared = results.filter((r) => r.body.code === 'mfa_verification_failed').length;
    assert.equal(compared, PER_CHALLENGE);
    assert.ok(results.every((r) => r.status === 422 || r.status === 429));
    offsetMs += 60_000; // past the address's minute
    const right = await raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: challengeId, code: codeNow(factor.totp.secret) });
    assert.equal(right.status, 422);
    assert.equal(right.body.code, 'mfa_factor_not_found');
  });

  test(`50 addresses each with a challenge and a wrong code: at most ${PER_FACTOR} compared for the factor, then even the right code waits`, async () => {
    const user = await signedIn('mfa-guess-factor');
    const factor = await enrol(user);
    const wrong = wrongCode(factor.totp.secret);
    const results = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const ip = uniqueIp();
        const issued = await raw(user, 'POST', `/factors/${factor.id}/challenge`, {}, ip);
        assert.equal(issued.status, 200);
        return raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: issued.body.id as string, code: wrong }, ip);
      }),
    );
    assert.equal(results.filter((r) => r.body.code === 'mfa_verification_failed').length, PER_FACTOR);
    assert.equal(results.filter((r) => r.status === 429).length, 50 - PER_FACTOR);
    const right = await raw(user, 'POST', `/factors/${factor.id}/verify`, {
      challenge_id: await challenge(user, factor.id),
      code: codeNow(factor.totp.secret),
    });
    assert.equal(right.status, 429);
    assert.equal(right.body.code, 'over_request_rate_limit');
  });

  test(`across a user's factors at most ${PER_USER} codes are compared`, async () => {
    const user = await signedIn('mfa-guess-user');
    const factors = [await enrol(user, 'a'), await enrol(user, 'b')];
    let compared = 0;
    for (const factor of factors) {
      const wrong = wrongCode(factor.totp.secret);
      const results = await Promise.all(
        Array.from({ length: 25 }, async () => {
          const ip = uniqueIp();
          const issued = await raw(user, 'POST', `/factors/${factor.id}/challenge`, {}, ip);
          return raw(user, 'POST', `/factors/${factor.id}/verify`, { challenge_id: issued.body.id as string, code: wrong }, ip);
        }),
      );
      compared += results.filter((r) => r.body.code === 'mfa_verification_failed').length;
    }
    assert.equal(compared, PER_USER);
  });

  test(`challenges from one address: ${PER_ADDRESS} a minute`, async () => {
    const user = await signedIn('mfa-address-limit');
    const factor = await enrol(user);
    const statuses = [];
    for (let i = 0; i <= PER_ADDRESS; i++) statuses.push((await raw(user, 'POST', `/factors/${factor.id}/challenge`, {})).status);
    assert.deepEqual(statuses, [...Array(PER_ADDRESS).fill(200), 429]);
  });
});

describe('admin factor API and row-level security', () => {
  test('the secret key lists and removes any factor of a user; the publishable key cannot', async () => {
    const user = await signedIn('mfa-admin');
    const factor = await verifiedFactor(user, 'admin managed');
    const admin = serviceClient(idp);
    const listed = await admin.auth.admin.mfa.listFactors({ userId: user.userId });
    assert.equal(listed.error, null);
    assert.deepEqual(
      listed.data!.factors.map((f) => [f.id, f.status, f.friendly_name]),
      [[factor.id, 'verified', 'admin managed']],
    );
    const notAdmin = await idpRequest(idp, 'GET', `/auth/v1/admin/users/${user.userId}/factors`, {});
    assert.equal(notAdmin.status, 403);
    const unknown = await admin.auth.admin.mfa.deleteFactor({ userId: user.userId, id: crypto.randomUUID() });
    assert.equal(unknown.error?.status, 404);

    const removed = await idpRequest(idp, 'DELETE', `/auth/v1/admin/users/${user.userId}/factors/${factor.id}`, {
      apikey: idp.secretKey,
    });
    assert.equal(removed.status, 200);
    assert.equal((removed.body as { id: string }).id, factor.id);
    assert.deepEqual((await admin.auth.admin.mfa.listFactors({ userId: user.userId })).data!.factors, []);
    assert.equal((await user.client.auth.refreshSession()).error, null);
    assert.equal((await accessClaims(user.client)).aal, 'aal1');
  });

  test("a policy on auth.jwt() ->> 'aal' shows rows only once the session is aal2", async () => {
    const user = await signedIn('mfa-rls');
    const factor = await enrol(user);
    const hidden = await user.client.from('vault').select('secret');
    assert.equal(hidden.error, null);
    assert.deepEqual(hidden.data, []);
    nextStep();
    assert.equal((await user.client.auth.mfa.challengeAndVerify({ factorId: factor.id, code: codeNow(factor.totp.secret) })).error, null);
    const shown = await user.client.from('vault').select('secret');
    assert.deepEqual(shown.data, [{ secret: 'behind a second factor' }]);
  });
});
