// Admins and second factors: an admin resets a user's two-step sign-in (DELETE
// /admin/users/:id/factors: step-up, audit, mail through a real SMTP server, the
// user signs in with the password alone), and REQUIRE_ADMIN_MFA (admin routes need
// an admin signed in with a second factor; admins' tokens say aal). The clock is
// injected, so TOTP steps and the step-up window are exact.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { seedAdmin } from '../src/accounts/admin-seed.js';
import { MFA_ENROLLMENT_REQUIRED, MFA_SIGN_IN_REQUIRED, NO_PERMISSION, REAUTHENTICATION_REQUIRED } from '../src/accounts/auth.js';
import { UsersRepository } from '../src/accounts/repository.js';
import { FACTORS_RESET, NO_FACTORS_TO_RESET } from '../src/accounts/routes/admin-user-factors.js';
import type { TokenPair as Pair } from '../src/accounts/sessions.js';
import { base32Decode, totpCode, totpStep } from '../src/kit/totp.js';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser, testConfig } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { type TestSmtp, startSmtp } from './helpers/smtp.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
const PASSWORD = 'correct horse 42';
const quiet = { info: () => {}, warn: () => {} };
const CONTRACT_CLAIMS = ['exp', 'iat', 'id', 'role'];
let smtp: TestSmtp;
/** Default settings (REQUIRE_ADMIN_MFA off). */
let app: App;
/** The same database with REQUIRE_ADMIN_MFA=true. */
let strict: App;

before(async () => {
  smtp = await startSmtp();
  app = await suite.app({ SMTP_URL: smtp.url }, { clock });
  strict = await suite.app({ SMTP_URL: smtp.url, REQUIRE_ADMIN_MFA: 'true' }, { clock });
});
after(async () => {
  await smtp.close();
});

const nowCode = (secret: Buffer) => totpCode(secret, totpStep(clock()));
const resetFactors = (on: App, token: string | undefined, id: string) =>
  on.inject({ method: 'DELETE', url: `/admin/users/${id}/factors`, headers: token ? bearer(token) : {} });
const get = (on: App, url: string, token: string) => on.inject({ method: 'GET', url, headers: bearer(token) });
const auditOf = async (event: string, targetId: string) =>
  (
    await suite.pool.query('SELECT actor_id, target_id, details FROM audit_log WHERE event = $1 AND target_id = $2 ORDER BY id', [
      event,
      targetId,
    ])
  ).rows as { actor_id: string | null; target_id: string; details: Record<string, string> }[];
const factorRows = async (id: string) => ({
  totp: (await suite.pool.query('SELECT 1 FROM totp_factors WHERE user_id = $1', [id])).rowCount,
  codes: (await suite.pool.query('SELECT 1 FROM recovery_codes WHERE user_id = $1', [id])).rowCount,
});

/** Waits until no mail to `email` is left in the outbox: every one queued has reached the SMTP server. */
async function outboxDrained(email: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rowCount } = await suite.pool.query('SELECT 1 FROM mail_outbox WHERE recipient = $1', [email]);
    if (rowCount === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`mail to ${email} still queued after 20 s`);
}

/** A password login: the pair, or fails when the account asks for a second step. */
async function signedIn(on: App, email: string): Promise<Pair> {
  const res = await json(on, 'POST', '/auth/login', { email, password: PASSWORD });
  assert.equal(res.statusCode, 200, res.body);
  assert.ok(res.json().data.token, res.body);
  return res.json().data as Pair;
}

/** Password, then the TOTP code of now. */
async function signedInWithCode(on: App, email: string, secret: Buffer): Promise<Pair> {
  const first = await json(on, 'POST', '/auth/login', { email, password: PASSWORD });
  assert.equal(first.json().data.mfa_required, true, first.body);
  const second = await json(on, 'POST', '/auth/login/factor', { challenge: first.json().data.challenge, code: nowCode(secret) });
  assert.equal(second.statusCode, 200, second.body);
  return second.json().data as Pair;
}

/** Turns TOTP on with the token's account; its secret and recovery codes. Leaves the clock on the next time step. */
async function enrol(on: App, token: string, email: string): Promise<{ secret: Buffer; recoveryCodes: string[] }> {
  const begun = await json(on, 'POST', '/auth/factors/totp', undefined, bearer(token));
  assert.equal(begun.statusCode, 200, begun.body);
  const secret = base32Decode(begun.json().data.secret);
  const confirmed = await json(on, 'POST', '/auth/factors/totp/confirm', { code: nowCode(secret) }, bearer(token));
  assert.equal(confirmed.statusCode, 200, confirmed.body);
  assert.match((await smtp.waitForMail(email)).subject, /Two-step sign-in is on/);
  clock.advance(30_000);
  return { secret, recoveryCodes: confirmed.json().data.recovery_codes };
}

async function userWithTotp(label: string) {
  const user = await registerUser(app, { name: 'Factor User', email: uniqueEmail(label), password: PASSWORD });
  const { token } = await signedIn(app, user.email);
  return { user, ...(await enrol(app, token, user.email)) };
}

async function newAdmin(label = 'admin'): Promise<{ id: string; email: string }> {
  const email = uniqueEmail(label);
  assert.equal(await seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: email, ADMIN_PASSWORD: PASSWORD }, quiet), 'created');
  const { rows } = await suite.pool.query('SELECT id FROM users WHERE email = $1', [email]);
  return { id: rows[0].id as string, email };
}

describe('DELETE /admin/users/:id/factors', () => {
  test('an admin resets a user’s factors: factor and codes gone, audited, mailed, sessions ended, the password alone signs in', async () => {
    const { user, secret, recoveryCodes } = await userWithTotp('reset');
    const userPair = await signedInWithCode(app, user.email, secret);
    const admin = await newAdmin();
    const adminPair = await signedIn(app, admin.email);

    const res = await resetFactors(app, adminPair.token, user.id);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().message, FACTORS_RESET);
    assert.deepEqual(res.json().data, { reset: true });

    assert.deepEqual(await factorRows(user.id), { totp: 0, codes: 0 });
    const audit = await auditOf('factors_reset', user.id);
    assert.equal(audit.length, 1);
    assert.equal(audit[0]!.actor_id, admin.id);
    assert.equal(audit[0]!.details.factor, 'totp');
    const mail = await smtp.waitForMail(user.email);
    assert.match(mail.subject, /turned off by an administrator/);
    assert.ok(!mail.text.includes(recoveryCodes[0]!));
    // The sessions proved with the factor have ended.
    assertError(await get(app, '/auth/me', userPair.token), 401, 'Invalid or expired token.');
    assertError(await json(app, 'POST', '/auth/refresh', { refresh_token: userPair.refresh_token }), 401, /refresh token/);

    // The password alone signs in, with the contract's token; the factor status says off.
    const plain = await signedIn(app, user.email);
    assert.deepEqual(Object.keys(decodeJwt(plain.token)).sort(), CONTRACT_CLAIMS);
    const status = await get(app, '/auth/factors', plain.token);
    assert.deepEqual(status.json().data, { totp: { enabled: false, confirmed_at: null }, recovery_codes_remaining: 0 });
    // The user can turn it on again.
    await enrol(app, plain.token, user.email);
  });

  test('a user without a factor: 200 reset false, nothing written, no mail; an unknown user 404; a bad id 400', async () => {
    const user = await registerUser(app, { name: 'No Factor', email: uniqueEmail('nofactor'), password: PASSWORD });
    const userPair = await signedIn(app, user.email);
    // An enrolment begun but not confirmed is no factor yet: it is left to the user.
    const begun = await json(app, 'POST', '/auth/factors/totp', undefined, bearer(userPair.token));
    assert.equal(begun.statusCode, 200, begun.body);
    const admin = await newAdmin();
    const { token } = await signedIn(app, admin.email);
    const before = (await suite.pool.query('SELECT count(*)::int AS n FROM audit_log')).rows[0].n;

    for (let i = 0; i < 2; i++) {
      const res = await resetFactors(app, token, user.id);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().message, NO_FACTORS_TO_RESET);
      assert.deepEqual(res.json().data, { reset: false });
    }
    assertError(await resetFactors(app, token, '00000000-0000-4000-8000-000000000000'), 404, 'User not found');
    assertError(await resetFactors(app, token, 'not-a-uuid'), 400, /params\/id/);
    assert.equal((await suite.pool.query('SELECT count(*)::int AS n FROM audit_log')).rows[0].n, before);
    // Nothing queued (a queued mail stays in the outbox until the SMTP server has it).
    assert.equal((await suite.pool.query('SELECT 1 FROM mail_outbox WHERE recipient = $1', [user.email])).rowCount, 0);
    assert.equal(smtp.received.filter((m) => m.to === user.email).length, 0);
    // The user's session goes on, and so does the enrolment.
    assert.equal((await get(app, '/auth/me', userPair.token)).statusCode, 200);
    const secret = base32Decode(begun.json().data.secret);
    const confirmed = await json(app, 'POST', '/auth/factors/totp/confirm', { code: nowCode(secret) }, bearer(userPair.token));
    assert.equal(confirmed.statusCode, 200, confirmed.body);
  });

  test('10 concurrent resets of one user: one resets, one audit row, one mail', async () => {
    const { user } = await userWithTotp('concurrent');
    const admin = await newAdmin();
    const { token } = await signedIn(app, admin.email);
    const answers = await Promise.all(Array.from({ length: 10 }, () => resetFactors(app, token, user.id)));
    assert.deepEqual(
      answers.map((r) => r.statusCode),
      Array(10).fill(200),
    );
    assert.equal(answers.filter((r) => r.json().data.reset === true).length, 1);
    assert.equal((await auditOf('factors_reset', user.id)).length, 1);
    await smtp.waitForMail(user.email);
    await outboxDrained(user.email);
    assert.equal(smtp.received.filter((m) => m.to === user.email && /administrator/.test(m.subject)).length, 1);
  });

  test('401 without a token; 403 for a non-admin (audited) before the id is read; nothing changes', async () => {
    const { user } = await userWithTotp('victim');
    const other = await registerUser(app, { name: 'Not Admin', email: uniqueEmail('notadmin'), password: PASSWORD });
    const { token } = await signedIn(app, other.email);
    assertError(await resetFactors(app, undefined, user.id), 401, 'Access denied. No token provided.');
    assertError(await resetFactors(app, token, user.id), 403, NO_PERMISSION);
    assertError(await resetFactors(app, token, 'not-a-uuid'), 403, NO_PERMISSION);
    // The user itself is no admin either.
    assertError(await resetFactors(app, (await signedIn(app, other.email)).token, other.id), 403, NO_PERMISSION);
    assert.deepEqual(await factorRows(user.id), { totp: 1, codes: 10 });
    const denied = await suite.pool.query("SELECT details FROM audit_log WHERE event = 'access_denied' AND actor_id = $1", [other.id]);
    assert.equal(denied.rowCount, 3);
    assert.equal(denied.rows[0].details.route, '/admin/users/:id/factors');
  });

  test('step-up: an admin sign-in older than REAUTH_MAX_AGE is 401 reauthentication_required for a factor reset, a ban or a deletion, a refresh does not renew it', async () => {
    const { user } = await userWithTotp('stepup');
    const admin = await newAdmin();
    const old = await signedIn(app, admin.email);
    clock.advance(10 * 60_000 + 1000);
    const refreshed = (await json(app, 'POST', '/auth/refresh', { refresh_token: old.refresh_token })).json().data as Pair;
    for (const token of [old.token, refreshed.token]) {
      const res = await resetFactors(app, token, user.id);
      assertError(res, 401, REAUTHENTICATION_REQUIRED);
      assert.match(String(res.headers['www-authenticate']), /insufficient_user_authentication.*max_age=600/);
      // Reading does not ask for it (the contract's listing works for the token's whole life);
      // changing or deleting an account does, and changes nothing without it.
      assert.equal((await get(app, '/admin/users', token)).statusCode, 200);
      assert.equal((await get(app, '/admin/audit', token)).statusCode, 200);
      const ban = await app.inject({ method: 'PATCH', url: `/admin/users/${user.id}`, payload: { banned: true }, headers: bearer(token) });
      assertError(ban, 401, REAUTHENTICATION_REQUIRED);
      const removal = await app.inject({ method: 'DELETE', url: `/admin/users/${user.id}`, headers: bearer(token) });
      assertError(removal, 401, REAUTHENTICATION_REQUIRED);
    }
    const row = await suite.pool.query('SELECT banned_at FROM users WHERE id = $1', [user.id]);
    assert.deepEqual(row.rows, [{ banned_at: null }], 'the user is neither banned nor deleted');
    assert.deepEqual(await factorRows(user.id), { totp: 1, codes: 10 });
    assert.equal((await auditOf('factors_reset', user.id)).length, 0);
    const fresh = await signedIn(app, admin.email);
    assert.equal((await resetFactors(app, fresh.token, user.id)).statusCode, 200);
    assert.deepEqual(await factorRows(user.id), { totp: 0, codes: 0 });
  });
});

describe('REQUIRE_ADMIN_MFA', () => {
  test('the setting: off by default, true/false (and 1/0, yes/no, on/off), anything else a config error', () => {
    assert.equal(testConfig().REQUIRE_ADMIN_MFA, false);
    assert.equal(testConfig({ REQUIRE_ADMIN_MFA: 'true' }).REQUIRE_ADMIN_MFA, true);
    assert.equal(testConfig({ REQUIRE_ADMIN_MFA: 'off' }).REQUIRE_ADMIN_MFA, false);
    assert.throws(() => testConfig({ REQUIRE_ADMIN_MFA: 'admins' }), /REQUIRE_ADMIN_MFA must be true or false/);
  });

  test('off (the default): an admin without a factor lists users with the contract’s token, which has no aal', async () => {
    const admin = await newAdmin('default');
    const pair = await signedIn(app, admin.email);
    assert.deepEqual(Object.keys(decodeJwt(pair.token)).sort(), CONTRACT_CLAIMS);
    const res = await get(app, '/admin/users', pair.token);
    assert.equal(res.statusCode, 200, res.body);
    assert.ok(Array.isArray(res.json()));
  });

  test('on: an admin without a factor is refused with mfa_enrollment_required (audited), can enrol, then after a 2FA login reaches the admin routes', async () => {
    const admin = await newAdmin('strict');
    const user = await registerUser(strict, { name: 'Some User', email: uniqueEmail('strict-user'), password: PASSWORD });
    const first = await signedIn(strict, admin.email);
    assert.equal(decodeJwt(first.token).aal, 'aal1');

    assertError(await get(strict, '/admin/users', first.token), 403, MFA_ENROLLMENT_REQUIRED);
    assertError(await get(strict, '/admin/audit', first.token), 403, MFA_ENROLLMENT_REQUIRED);
    assertError(
      await json(strict, 'PATCH', `/admin/users/${user.id}`, { banned: true }, bearer(first.token)),
      403,
      MFA_ENROLLMENT_REQUIRED,
    );
    assertError(await resetFactors(strict, first.token, user.id), 403, MFA_ENROLLMENT_REQUIRED);
    assertError(
      await strict.inject({ method: 'DELETE', url: `/admin/users/${user.id}`, headers: bearer(first.token) }),
      403,
      MFA_ENROLLMENT_REQUIRED,
    );
    // Not an admin route: the profile answers.
    assert.equal((await get(strict, '/auth/me', first.token)).statusCode, 200);
    // Nothing was done: the user is neither banned nor deleted.
    assert.equal((await suite.pool.query('SELECT 1 FROM users WHERE id = $1 AND banned_at IS NULL', [user.id])).rowCount, 1);
    const denied = await suite.pool.query("SELECT details FROM audit_log WHERE event = 'access_denied' AND actor_id = $1 ORDER BY id", [
      admin.id,
    ]);
    assert.equal(denied.rowCount, 5);
    assert.equal(denied.rows[0].details.reason, 'mfa_enrollment_required');
    assert.equal(denied.rows[0].details.route, '/admin/users');

    // Enrolment is reachable with that token.
    const { secret } = await enrol(strict, first.token, admin.email);
    // The password-only token is still refused, now with the way forward: sign in with the code.
    const stale = await get(strict, '/admin/users', first.token);
    assertError(stale, 401, MFA_SIGN_IN_REQUIRED);
    assert.match(String(stale.headers['www-authenticate']), /insufficient_user_authentication/);

    const second = await signedInWithCode(strict, admin.email, secret);
    const claims = decodeJwt(second.token);
    assert.equal(claims.aal, 'aal2');
    assert.deepEqual(claims.amr, ['pwd', 'otp', 'mfa']);
    const listed = await get(strict, '/admin/users', second.token);
    assert.equal(listed.statusCode, 200, listed.body);
    assert.equal((await get(strict, '/admin/audit', second.token)).statusCode, 200);
    // A refreshed token keeps its level.
    clock.advance(5_000);
    const refreshed = await json(strict, 'POST', '/auth/refresh', { refresh_token: second.refresh_token });
    assert.equal(decodeJwt(refreshed.json().data.token).aal, 'aal2');

    // Removing the factor takes the admin routes with it, for the tokens of before too.
    const removal = await strict.inject({ method: 'DELETE', url: '/auth/factors/totp', headers: bearer(second.token) });
    assert.equal(removal.statusCode, 200, removal.body);
    assertError(await get(strict, '/admin/users', second.token), 403, MFA_ENROLLMENT_REQUIRED);
  });

  test('on: a recovery code counts as a second factor (aal2); users’ tokens carry no aal', async () => {
    const admin = await newAdmin('recovery');
    const { recoveryCodes } = await enrol(strict, (await signedIn(strict, admin.email)).token, admin.email);
    const first = await json(strict, 'POST', '/auth/login', { email: admin.email, password: PASSWORD });
    const pair = (
      await json(strict, 'POST', '/auth/login/factor', { challenge: first.json().data.challenge, recovery_code: recoveryCodes[0] })
    ).json().data as Pair;
    assert.equal(decodeJwt(pair.token).aal, 'aal2');
    assert.equal((await get(strict, '/admin/users', pair.token)).statusCode, 200);
    assert.match((await smtp.waitForMail(admin.email)).subject, /recovery code was used/);

    const user = await registerUser(strict, { name: 'Plain User', email: uniqueEmail('strict-plain'), password: PASSWORD });
    const userPair = await signedIn(strict, user.email);
    assert.deepEqual(Object.keys(decodeJwt(userPair.token)).sort(), CONTRACT_CLAIMS);
    assertError(await get(strict, '/admin/users', userPair.token), 403, NO_PERMISSION);
  });

  test('on: an admin resets another admin’s factors; that admin signs in with the password and is asked to enrol again', async () => {
    const actor = await newAdmin('actor');
    const { secret } = await enrol(strict, (await signedIn(strict, actor.email)).token, actor.email);
    const target = await newAdmin('target');
    const targetSecret = (await enrol(strict, (await signedIn(strict, target.email)).token, target.email)).secret;
    const targetPair = await signedInWithCode(strict, target.email, targetSecret);
    const actorPair = await signedInWithCode(strict, actor.email, secret);

    const res = await resetFactors(strict, actorPair.token, target.id);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json().data, { reset: true });
    assert.match((await smtp.waitForMail(target.email)).subject, /turned off by an administrator/);
    assertError(await get(strict, '/admin/users', targetPair.token), 401, 'Invalid or expired token.');
    const plain = await signedIn(strict, target.email);
    assert.equal(decodeJwt(plain.token).aal, 'aal1');
    assertError(await get(strict, '/admin/users', plain.token), 403, MFA_ENROLLMENT_REQUIRED);
  });
});

noSecretInAnyResponse();
