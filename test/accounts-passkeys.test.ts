// Passkeys: registration from a signed-in account, sign-in with a discoverable credential
// alone, a passkey as the second step of a password sign-in, and what must be refused: a
// phishing origin or RP id, a replayed or expired challenge, a signature counter that went
// back, another user's credential, a removal without a recent sign-in. The authenticator is
// a real one in software (test/helpers/webauthn.ts); the clock is injected; mails reach a
// real SMTP server.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { REAUTHENTICATION_REQUIRED } from '../src/accounts/auth.js';
import { FACTOR_FAILURE_LIMIT, INVALID_CHALLENGE, INVALID_FACTOR_CODE } from '../src/accounts/factors.js';
import {
  INVALID_PASSKEY_SIGN_IN,
  INVALID_REGISTRATION_CHALLENGE,
  PASSKEY_ALREADY_REGISTERED,
  PASSKEY_NOT_FOUND,
  PASSKEY_NOT_VERIFIED,
} from '../src/accounts/passkeys.js';
import type { TokenPair as Pair } from '../src/accounts/sessions.js';
import { base32Decode, totpCode, totpStep } from '../src/kit/totp.js';
import { createPruner } from '../src/accounts/pruning.js';
import { PASSKEY_SIGN_IN_OPTIONS_PER_MINUTE } from '../src/accounts/app.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { type TestSmtp, startSmtp } from './helpers/smtp.js';
import { SoftAuthenticator } from './helpers/webauthn.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
const PUBLIC_URL = 'https://accounts.example.test';
const ORIGIN = PUBLIC_URL;
const PASSWORD = 'correct horse 42';
let app: App;
let smtp: TestSmtp;

before(async () => {
  smtp = await startSmtp();
  app = await suite.app({ SMTP_URL: smtp.url, ACCOUNTS_PUBLIC_URL: PUBLIC_URL }, { clock });
});
after(async () => {
  await smtp.close();
});

const login = (email: string, password = PASSWORD) => json(app, 'POST', '/auth/login', { email, password });
const events = async (id: string) =>
  (await suite.pool.query('SELECT event, details FROM audit_log WHERE target_id = $1 ORDER BY id', [id])).rows as {
    event: string;
    details: Record<string, string>;
  }[];

async function signedIn(email: string): Promise<Pair> {
  const res = await login(email);
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data as Pair;
}

async function registrationOptions(token: string) {
  const res = await json(app, 'POST', '/auth/passkeys/registration-options', undefined, bearer(token));
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data;
}

/** A new user with `count` passkeys on one software authenticator; a token of a sign-in just now. */
async function userWithPasskeys(label: string, count = 1) {
  const user = await registerUser(app, { name: 'Passkey User', email: uniqueEmail(label), password: PASSWORD });
  const { token } = await signedIn(user.email);
  const authenticator = new SoftAuthenticator(ORIGIN);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const { json: response } = authenticator.create(await registrationOptions(token));
    const res = await json(app, 'POST', '/auth/passkeys', { name: `Key ${i + 1}`, response }, bearer(token));
    assert.equal(res.statusCode, 201, res.body);
    ids.push(res.json().data.id);
    await smtp.waitForMail(user.email);
  }
  return { user, token, authenticator, ids };
}

let optionsCalls = 0;
/** Sign-in options, each from an address of its own: the per-address limit has a test of its own. */
async function signInOptions(ip = `10.9.${Math.floor(++optionsCalls / 250)}.${optionsCalls % 250}`) {
  const res = await app.inject({ method: 'POST', url: '/auth/passkeys/sign-in/options', remoteAddress: ip });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data;
}

const passkeySignIn = (response: unknown) => json(app, 'POST', '/auth/passkeys/sign-in', { response });

async function challengeFor(email: string) {
  const res = await login(email);
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().data.mfa_required, true, res.body);
  return res.json().data as { challenge: string; methods: string[]; passkey?: { challenge: string; allowCredentials: { id: string }[] } };
}
const factorStep = (body: unknown) => json(app, 'POST', '/auth/login/factor', body);

describe('registration', () => {
  test('a signed-in user adds several passkeys, names and renames them; the list shows no key material; each addition is audited and mailed', async () => {
    const user = await registerUser(app, { name: 'Many Keys', email: uniqueEmail('many'), password: PASSWORD });
    const { token } = await signedIn(user.email);
    const authenticator = new SoftAuthenticator(ORIGIN);

    const first = await registrationOptions(token);
    assert.equal(first.rp.id, 'accounts.example.test');
    assert.equal(first.authenticatorSelection.residentKey, 'required');
    assert.equal(first.attestation, 'none');
    assert.equal(Buffer.from(first.user.id, 'base64url').toString(), user.id);
    assert.deepEqual(first.excludeCredentials, []);
    const one = authenticator.create(first);
    const added = await json(app, 'POST', '/auth/passkeys', { name: '  Laptop  ', response: one.json }, bearer(token));
    assert.equal(added.statusCode, 201, added.body);
    assert.equal(added.json().data.name, 'Laptop');
    assert.equal(added.json().data.last_used_at, null);
    const mail = await smtp.waitForMail(user.email);
    assert.match(mail.subject, /A passkey was added/);
    assert.match(mail.text, /"Laptop"/);

    // The second: the first is excluded, so the authenticator would not make a duplicate.
    clock.advance(1000);
    const second = await registrationOptions(token);
    assert.deepEqual(
      second.excludeCredentials.map((c: { id: string }) => c.id),
      [one.json.id],
    );
    const two = authenticator.create(second);
    assert.equal((await json(app, 'POST', '/auth/passkeys', { name: 'Phone', response: two.json }, bearer(token))).statusCode, 201);
    await smtp.waitForMail(user.email);

    const list = await app.inject({ method: 'GET', url: '/auth/passkeys', headers: bearer(token) });
    assert.equal(list.statusCode, 200, list.body);
    const passkeys = list.json().data as { id: string; name: string }[];
    assert.deepEqual(
      passkeys.map((p) => p.name),
      ['Laptop', 'Phone'],
    );
    assert.deepEqual(Object.keys(passkeys[0]!).sort(), ['created_at', 'id', 'last_used_at', 'name']);
    assert.ok(!list.body.includes(one.json.id), 'the credential id is not shown');

    const renamed = await json(app, 'PATCH', `/auth/passkeys/${passkeys[1]!.id}`, { name: 'Work phone' }, bearer(token));
    assert.equal(renamed.statusCode, 200, renamed.body);
    assert.equal(renamed.json().data.name, 'Work phone');
    assertError(await json(app, 'PATCH', `/auth/passkeys/${passkeys[1]!.id}`, { name: '   ' }, bearer(token)), 400, /body\/name/);
    assertError(await json(app, 'PATCH', `/auth/passkeys/${passkeys[1]!.id}`, { name: 'a\u0000b' }, bearer(token)), 400, /body\/name/);
    assertError(await json(app, 'PATCH', `/auth/passkeys/${passkeys[1]!.id}`, { name: 'x'.repeat(65) }, bearer(token)), 400, /body\/name/);
    assertError(await json(app, 'PATCH', '/auth/passkeys/not-a-uuid', { name: 'x' }, bearer(token)), 400, /params\/id/);

    const added_ = (await events(user.id)).filter((e) => e.event === 'passkey_added');
    assert.deepEqual(
      added_.map((e) => e.details.name),
      ['Laptop', 'Phone'],
    );
    const stored = await suite.pool.query('SELECT counter, transports FROM passkeys WHERE user_id = $1 ORDER BY created_at', [user.id]);
    assert.deepEqual(stored.rows[0].transports, ['internal']);

    // The first credential attested again (a re-registration): refused, nothing stored.
    const duplicate = authenticator.create(await registrationOptions(token), { credential: one.credential });
    assertError(
      await json(app, 'POST', '/auth/passkeys', { name: 'Again', response: duplicate.json }, bearer(token)),
      409,
      PASSKEY_ALREADY_REGISTERED,
    );
    assert.equal((await suite.pool.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rowCount, 2);
  });

  test('options need a token and a recent sign-in; registering needs the caller’s own live challenge', async () => {
    assertError(await json(app, 'POST', '/auth/passkeys/registration-options'), 401, /No token/);
    const { user, token, authenticator } = await userWithPasskeys('own-challenge', 0);
    const other = await userWithPasskeys('other-challenge', 0);
    // Another user's options answered with the caller's token: not the caller's challenge.
    const theirs = authenticator.create(await registrationOptions(other.token));
    assertError(
      await json(app, 'POST', '/auth/passkeys', { name: 'Stolen', response: theirs.json }, bearer(token)),
      400,
      INVALID_REGISTRATION_CHALLENGE,
    );
    // Unknown challenge.
    const fake = authenticator.create({ challenge: 'A'.repeat(43), rp: { id: 'accounts.example.test' }, user: { id: 'eA' } });
    assertError(
      await json(app, 'POST', '/auth/passkeys', { name: 'Fake', response: fake.json }, bearer(token)),
      400,
      INVALID_REGISTRATION_CHALLENGE,
    );
    clock.advance(10 * 60_000 + 1000);
    assertError(await json(app, 'POST', '/auth/passkeys/registration-options', undefined, bearer(token)), 401, REAUTHENTICATION_REQUIRED);
    assert.equal((await suite.pool.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rowCount, 0);
  });

  test('a phishing origin, a wrong RP id and a replayed or expired challenge are refused, and nothing is stored', async () => {
    const { user, token, authenticator } = await userWithPasskeys('phish', 0);
    const add = (response: unknown) => json(app, 'POST', '/auth/passkeys', { name: 'Key', response }, bearer(token));

    const wrongOrigin = authenticator.create(await registrationOptions(token), { origin: 'https://accounts.example.test.evil.example' });
    assertError(await add(wrongOrigin.json), 400, PASSKEY_NOT_VERIFIED);
    const wrongRp = authenticator.create(await registrationOptions(token), { rpId: 'evil.example' });
    assertError(await add(wrongRp.json), 400, PASSKEY_NOT_VERIFIED);
    // The challenge was spent by the refused attempt: the right answer to it is refused too.
    const options = await registrationOptions(token);
    const spoiled = authenticator.create(options, { origin: 'http://accounts.example.test' });
    assertError(await add(spoiled.json), 400, PASSKEY_NOT_VERIFIED);
    assertError(await add(authenticator.create(options).json), 400, INVALID_REGISTRATION_CHALLENGE);

    // Replay: one good answer registers once.
    const good = authenticator.create(await registrationOptions(token));
    assert.equal((await add(good.json)).statusCode, 201);
    assertError(await add(good.json), 400, INVALID_REGISTRATION_CHALLENGE);

    // Expiry: 5 minutes.
    const late = authenticator.create(await registrationOptions(token));
    clock.advance(5 * 60_000 + 1);
    assertError(await add(late.json), 400, INVALID_REGISTRATION_CHALLENGE);
    // A new options call replaces the earlier one: only the newest challenge is live.
    const older = authenticator.create(await registrationOptions(token));
    const newer = authenticator.create(await registrationOptions(token));
    assertError(await add(older.json), 400, INVALID_REGISTRATION_CHALLENGE);
    assert.equal((await add(newer.json)).statusCode, 201);
    assert.equal((await suite.pool.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rowCount, 2);
  });

  test('bad input is a 4xx that changes nothing', async () => {
    const { user, token, authenticator } = await userWithPasskeys('bad-input', 0);
    const add = (body: unknown) => json(app, 'POST', '/auth/passkeys', body, bearer(token));
    const good = authenticator.create(await registrationOptions(token));
    assertError(await add({ name: 'Key' }), 400, /response/);
    assertError(await add({ name: 'Key', response: { ...good.json, type: 'other' } }), 400, /type/);
    assertError(
      await add({ name: 'Key', response: { ...good.json, response: { ...good.json.response, clientDataJSON: '!!' } } }),
      400,
      /clientDataJSON/,
    );
    const notJson = Buffer.from('not json').toString('base64url');
    assertError(
      await add({ name: 'Key', response: { ...good.json, response: { ...good.json.response, clientDataJSON: notJson } } }),
      400,
      PASSKEY_NOT_VERIFIED,
    );
    const badObject = { ...good.json, response: { ...good.json.response, attestationObject: 'AAAA' } };
    assertError(await add({ name: 'Key', response: badObject }), 400, PASSKEY_NOT_VERIFIED);
    assertError(await add({ name: '', response: good.json }), 400, /body\/name/);
    assert.equal((await suite.pool.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rowCount, 0);
    assertError(await passkeySignIn({ id: 'x' }), 400, /response/);
    assertError(
      await passkeySignIn({
        ...authenticatorlessAssertion(),
        response: { clientDataJSON: 'e30', authenticatorData: 'AA', signature: 'AA' },
      }),
      401,
      INVALID_PASSKEY_SIGN_IN,
    );
  });
});

function authenticatorlessAssertion() {
  return { id: 'AAAA', rawId: 'AAAA', type: 'public-key', clientExtensionResults: {} };
}

describe('sign-in with a passkey alone', () => {
  test('options list no credential and require user verification; the answer is what a password sign-in answers; amr hwk, mfa', async () => {
    const { user, authenticator, ids } = await userWithPasskeys('discoverable', 2);
    const options = await signInOptions();
    assert.deepEqual(options.allowCredentials, []);
    assert.equal(options.userVerification, 'required');
    assert.equal(options.rpId, 'accounts.example.test');
    const res = await passkeySignIn(authenticator.get(options));
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.message, 'Login successful');
    assert.deepEqual(Object.keys(body.data).sort(), ['expires_in', 'refresh_token', 'token', 'user']);
    assert.equal(body.data.user.id, user.id);
    const claims = decodeJwt(body.data.token);
    assert.deepEqual(claims.amr, ['hwk', 'mfa']);
    assert.equal((await app.inject({ method: 'GET', url: '/auth/me', headers: bearer(body.data.token) })).statusCode, 200);
    assert.ok(
      (await events(user.id)).some(
        (e) => e.event === 'login_succeeded' && e.details.method === 'passkey' && e.details.passkey_id === ids[0],
      ),
    );
    const used = await suite.pool.query('SELECT last_used_at, counter FROM passkeys WHERE id = $1', [ids[0]]);
    assert.equal(used.rows[0].last_used_at.getTime(), clock());
    assert.equal(Number(used.rows[0].counter), 1);

    // The browser form: the same sign-in, with the refresh token in the cookie.
    const browser = await json(
      app,
      'POST',
      '/auth/browser/passkey-sign-in',
      { response: authenticator.get(await signInOptions()) },
      { 'x-csrf-protection': '1' },
    );
    assert.equal(browser.statusCode, 200, browser.body);
    assert.match(String(browser.headers['set-cookie']), /accounts_refresh=/);
    assert.ok(!browser.body.includes('refresh_token'));
    assertError(
      await json(app, 'POST', '/auth/browser/passkey-sign-in', { response: authenticator.get(await signInOptions()) }),
      403,
      /x-csrf-protection/,
    );
  });

  test('a replayed assertion, an expired challenge, a phishing origin, no user verification and an unknown credential are refused', async () => {
    const { user, authenticator } = await userWithPasskeys('signin-refusals');
    const options = await signInOptions();
    const answer = authenticator.get(options);
    assert.equal((await passkeySignIn(answer)).statusCode, 200);
    assertError(await passkeySignIn(answer), 401, INVALID_PASSKEY_SIGN_IN);

    const late = authenticator.get(await signInOptions());
    clock.advance(5 * 60_000 + 1);
    assertError(await passkeySignIn(late), 401, INVALID_PASSKEY_SIGN_IN);

    assertError(
      await passkeySignIn(authenticator.get(await signInOptions(), { origin: 'https://evil.example' })),
      401,
      INVALID_PASSKEY_SIGN_IN,
    );
    assertError(await passkeySignIn(authenticator.get(await signInOptions(), { rpId: 'evil.example' })), 401, INVALID_PASSKEY_SIGN_IN);
    assertError(await passkeySignIn(authenticator.get(await signInOptions(), { userVerified: false })), 401, INVALID_PASSKEY_SIGN_IN);
    assertError(await passkeySignIn(authenticator.get(await signInOptions(), { wrongSignature: true })), 401, INVALID_PASSKEY_SIGN_IN);
    // A credential this service never registered.
    const stranger = new SoftAuthenticator(ORIGIN);
    stranger.create({
      challenge: 'AAAAAAAAAAAAAAAAAAAAAA',
      rp: { id: 'accounts.example.test' },
      user: { id: Buffer.from(user.id).toString('base64url') },
    });
    assertError(await passkeySignIn(stranger.get(await signInOptions())), 401, INVALID_PASSKEY_SIGN_IN);
    const failures = (await events(user.id)).filter((e) => e.event === 'login_failed').map((e) => e.details.reason);
    assert.ok(failures.includes('passkey_not_verified'), failures.join());
  });

  test('a signature counter that did not increase (a cloned authenticator) is refused, as the library reports it, and audited', async () => {
    const { user, authenticator, ids } = await userWithPasskeys('counter');
    assert.equal((await passkeySignIn(authenticator.get(await signInOptions(), { counter: 5 }))).statusCode, 200);
    assertError(await passkeySignIn(authenticator.get(await signInOptions(), { counter: 3 })), 401, INVALID_PASSKEY_SIGN_IN);
    assertError(await passkeySignIn(authenticator.get(await signInOptions(), { counter: 5 })), 401, INVALID_PASSKEY_SIGN_IN);
    const stored = await suite.pool.query('SELECT counter FROM passkeys WHERE id = $1', [ids[0]]);
    assert.equal(Number(stored.rows[0].counter), 5);
    const reasons = (await events(user.id)).filter((e) => e.event === 'login_failed').map((e) => e.details.reason);
    assert.deepEqual(reasons, ['passkey_counter_not_increased', 'passkey_counter_not_increased']);
    assert.equal((await passkeySignIn(authenticator.get(await signInOptions(), { counter: 6 }))).statusCode, 200);
    // A clone used in parallel: two answers with the same count, each verified against the stored 6; one signs in.
    const twins = [authenticator.get(await signInOptions(), { counter: 10 }), authenticator.get(await signInOptions(), { counter: 10 })];
    const answers = await Promise.all(twins.map((twin) => passkeySignIn(twin)));
    assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, 401]);
  });

  test('another user’s credential does not sign in as this user: the user handle must name the credential’s account', async () => {
    const alice = await userWithPasskeys('alice');
    const bob = await userWithPasskeys('bob');
    const forged = alice.authenticator.get(await signInOptions(), { userHandle: Buffer.from(bob.user.id).toString('base64url') });
    assertError(await passkeySignIn(forged), 401, INVALID_PASSKEY_SIGN_IN);
    // Without a user handle the credential decides: Alice, never Bob.
    const res = await passkeySignIn(alice.authenticator.get(await signInOptions(), { userHandle: null }));
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().data.user.id, alice.user.id);
  });

  test('a banned account is refused after the passkey verifies', async () => {
    const { user, authenticator } = await userWithPasskeys('banned');
    await suite.pool.query('UPDATE users SET banned_at = now() WHERE id = $1', [user.id]);
    assertError(await passkeySignIn(authenticator.get(await signInOptions())), 403, 'This account has been banned.');
  });

  test('sign-in options are limited per client address (each stores a challenge): 30 a minute, then 429 with Retry-After', async () => {
    const ip = '192.0.2.77';
    for (let i = 0; i < PASSKEY_SIGN_IN_OPTIONS_PER_MINUTE; i++) await signInOptions(ip);
    const before = await suite.pool.query('SELECT count(*)::int AS n FROM passkey_challenges');
    const refused = await app.inject({ method: 'POST', url: '/auth/passkeys/sign-in/options', remoteAddress: ip });
    assertError(refused, 429, /Too many passkey sign-ins from this address/);
    assert.ok(Number(refused.headers['retry-after']) > 0);
    const after_ = await suite.pool.query('SELECT count(*)::int AS n FROM passkey_challenges');
    assert.equal(after_.rows[0].n, before.rows[0].n, 'a refused call stores nothing');
    await signInOptions('192.0.2.78');
    clock.advance(60_000);
    await signInOptions(ip);
  });

  test('used and expired passkey challenges are pruned; live ones stay', async () => {
    await signInOptions();
    clock.advance(5 * 60_000 + 1);
    const live = await signInOptions();
    const pruner = createPruner({ pool: suite.pool, clock, idleMs: 86_400_000, maxLifetimeMs: 86_400_000 });
    const counts = await pruner.runOnce();
    pruner.stop();
    assert.ok(counts.passkeyChallenges >= 1);
    const left = await suite.pool.query('SELECT count(*)::int AS n FROM passkey_challenges WHERE expires_at > $1', [new Date(clock())]);
    assert.ok(left.rows[0].n >= 1);
    assert.ok(live.challenge);
  });
});

describe('a passkey as the second step of a password sign-in', () => {
  test('the password gives a challenge listing only this user’s passkeys; a passkey answer signs in with amr pwd, hwk, mfa', async () => {
    const { user, authenticator } = await userWithPasskeys('second', 2);
    const data = await challengeFor(user.email);
    assert.deepEqual(data.methods, ['passkey']);
    const listed = data.passkey!.allowCredentials.map((c) => c.id).sort();
    assert.deepEqual(listed, authenticator.credentials.map((c) => c.id.toString('base64url')).sort());
    const done = await factorStep({ challenge: data.challenge, passkey: authenticator.get(data.passkey!) });
    assert.equal(done.statusCode, 200, done.body);
    assert.deepEqual(decodeJwt(done.json().data.token).amr, ['pwd', 'hwk', 'mfa']);
    assert.ok((await events(user.id)).some((e) => e.event === 'login_succeeded' && e.details.second_factor === 'passkey'));
    // Single use.
    assertError(await factorStep({ challenge: data.challenge, passkey: authenticator.get(data.passkey!) }), 401, INVALID_CHALLENGE);
    // The browser form of the second step takes a passkey too.
    const first = await json(app, 'POST', '/auth/browser/login', { email: user.email, password: PASSWORD }, { 'x-csrf-protection': '1' });
    const browserStep = await json(
      app,
      'POST',
      '/auth/browser/login/factor',
      { challenge: first.json().data.challenge, passkey: authenticator.get(first.json().data.passkey) },
      { 'x-csrf-protection': '1' },
    );
    assert.equal(browserStep.statusCode, 200, browserStep.body);
    assertError(
      await factorStep({ challenge: data.challenge, code: '123456', passkey: authenticator.get(data.passkey!) }),
      400,
      /exactly one/,
    );
  });

  test('the assertion must sign this login’s challenge, with this user’s credential', async () => {
    const alice = await userWithPasskeys('second-alice');
    const bob = await userWithPasskeys('second-bob');
    const bobs = await challengeFor(bob.user.email);
    // Alice's credential, signing Bob's challenge: not one of Bob's.
    const aliceCredential = alice.authenticator.credentials[0]!;
    assertError(
      await factorStep({ challenge: bobs.challenge, passkey: alice.authenticator.get(bobs.passkey!, { credential: aliceCredential }) }),
      401,
      INVALID_FACTOR_CODE,
    );
    // Bob's credential signing another login's WebAuthn challenge.
    const other = await challengeFor(bob.user.email);
    assertError(await factorStep({ challenge: bobs.challenge, passkey: bob.authenticator.get(other.passkey!) }), 401, INVALID_FACTOR_CODE);
    // Bob's credential, the right challenge, a phishing origin.
    assertError(
      await factorStep({ challenge: bobs.challenge, passkey: bob.authenticator.get(bobs.passkey!, { origin: 'https://evil.example' }) }),
      401,
      INVALID_FACTOR_CODE,
    );
    const ok = await factorStep({ challenge: bobs.challenge, passkey: bob.authenticator.get(bobs.passkey!) });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(ok.json().data.user.id, bob.user.id);
    assert.ok((await events(bob.user.id)).some((e) => e.event === 'second_factor_failed' && e.details.method === 'passkey'));
  });

  test('failed passkey answers share the account’s budget with TOTP codes: 10 failures of either kind, then even a right passkey waits', async () => {
    const { user, token, authenticator } = await userWithPasskeys('budget');
    // TOTP on as well.
    const begun = await json(app, 'POST', '/auth/factors/totp', undefined, bearer(token));
    const secret = base32Decode(begun.json().data.secret);
    assert.equal(
      (await json(app, 'POST', '/auth/factors/totp/confirm', { code: totpCode(secret, totpStep(clock())) }, bearer(token))).statusCode,
      200,
    );
    const right = totpCode(secret, totpStep(clock()));
    const wrong = String((Number(right) + 500_000) % 1_000_000).padStart(6, '0');
    const data = await challengeFor(user.email);
    assert.deepEqual(data.methods, ['totp', 'recovery_code', 'passkey']);
    const answers = [];
    for (let i = 0; i < FACTOR_FAILURE_LIMIT.max; i++) {
      const step = await challengeFor(user.email);
      answers.push(
        await factorStep(
          i % 2 === 0
            ? { challenge: step.challenge, passkey: authenticator.get(step.passkey!, { wrongSignature: true }) }
            : { challenge: step.challenge, code: wrong },
        ),
      );
    }
    assert.deepEqual(
      answers.map((r) => r.statusCode),
      Array(FACTOR_FAILURE_LIMIT.max).fill(401),
    );
    const last = await challengeFor(user.email);
    assertError(
      await factorStep({ challenge: last.challenge, passkey: authenticator.get(last.passkey!) }),
      429,
      /Too many failed second-factor checks/,
    );
    // The discoverable sign-in counts in the same budget.
    assertError(await passkeySignIn(authenticator.get(await signInOptions())), 429, /Too many failed second-factor checks/);
    clock.advance(FACTOR_FAILURE_LIMIT.windowMs);
    const later = await challengeFor(user.email);
    assert.equal((await factorStep({ challenge: later.challenge, passkey: authenticator.get(later.passkey!) })).statusCode, 200);
  });

  test('a user with no factor still signs in with the password alone, with the contract’s token', async () => {
    const user = await registerUser(app, { name: 'No Factor', email: uniqueEmail('nofactor'), password: PASSWORD });
    const pair = await signedIn(user.email);
    assert.deepEqual(Object.keys(decodeJwt(pair.token)).sort(), ['exp', 'iat', 'id', 'role']);
  });
});

describe('removal', () => {
  test('needs a recent sign-in; then the passkey is gone, audited and mailed, and signs in no more; another user’s is 404', async () => {
    const { user, authenticator, ids } = await userWithPasskeys('remove', 2);
    const other = await userWithPasskeys('remove-other');
    const fresh = (await passkeySignIn(authenticator.get(await signInOptions()))).json().data as Pair;
    clock.advance(10 * 60_000 + 1000);
    const refreshed = (await json(app, 'POST', '/auth/refresh', { refresh_token: fresh.refresh_token })).json().data as Pair;
    for (const token of [fresh.token, refreshed.token]) {
      assertError(
        await app.inject({ method: 'DELETE', url: `/auth/passkeys/${ids[0]}`, headers: bearer(token) }),
        401,
        REAUTHENTICATION_REQUIRED,
      );
    }
    assert.equal((await suite.pool.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rowCount, 2);

    const again = (await passkeySignIn(authenticator.get(await signInOptions()))).json().data as Pair;
    assertError(
      await app.inject({ method: 'DELETE', url: `/auth/passkeys/${other.ids[0]}`, headers: bearer(again.token) }),
      404,
      PASSKEY_NOT_FOUND,
    );
    const removed = await app.inject({ method: 'DELETE', url: `/auth/passkeys/${ids[0]}`, headers: bearer(again.token) });
    assert.equal(removed.statusCode, 200, removed.body);
    assert.ok((await events(user.id)).some((e) => e.event === 'passkey_removed' && e.details.passkey_id === ids[0]));
    assert.match((await smtp.waitForMail(user.email)).subject, /A passkey was removed/);
    assertError(
      await app.inject({ method: 'DELETE', url: `/auth/passkeys/${ids[0]}`, headers: bearer(again.token) }),
      404,
      PASSKEY_NOT_FOUND,
    );
    // The removed credential no longer signs in; the other one does.
    const removedCredential = authenticator.credentials[0]!;
    assertError(
      await passkeySignIn(authenticator.get(await signInOptions(), { credential: removedCredential })),
      401,
      INVALID_PASSKEY_SIGN_IN,
    );
    assert.equal(
      (await passkeySignIn(authenticator.get(await signInOptions(), { credential: authenticator.credentials[1]! }))).statusCode,
      200,
    );
    assert.equal((await suite.pool.query('SELECT 1 FROM passkeys WHERE user_id = $1', [other.user.id])).rowCount, 1);
  });

  test('an admin’s factor reset removes the passkeys too: the password alone signs in again', async () => {
    const { user } = await userWithPasskeys('reset');
    const admin = await registerUser(app, { name: 'Admin', email: uniqueEmail('admin'), password: PASSWORD });
    await suite.pool.query(`UPDATE users SET role = 'admin' WHERE id = $1`, [admin.id]);
    const adminToken = (await signedIn(admin.email)).token;
    const reset = await app.inject({ method: 'DELETE', url: `/admin/users/${user.id}/factors`, headers: bearer(adminToken) });
    assert.equal(reset.statusCode, 200, reset.body);
    assert.equal((await suite.pool.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rowCount, 0);
    assert.ok((await signedIn(user.email)).token);
  });
});

noSecretInAnyResponse();

describe('REQUIRE_ADMIN_MFA', () => {
  test('a passkey is a second factor an admin may use: without one the admin routes refuse, with one a passkey sign-in reaches them', async () => {
    const strict = await suite.app({ SMTP_URL: smtp.url, ACCOUNTS_PUBLIC_URL: PUBLIC_URL, REQUIRE_ADMIN_MFA: 'true' }, { clock });
    const admin = await registerUser(strict, { name: 'Key Admin', email: uniqueEmail('key-admin'), password: PASSWORD });
    await suite.pool.query(`UPDATE users SET role = 'admin' WHERE id = $1`, [admin.id]);
    const first = await json(strict, 'POST', '/auth/login', { email: admin.email, password: PASSWORD });
    assert.equal(first.statusCode, 200, first.body);
    const passwordOnly = first.json().data.token as string;
    assertError(await strict.inject({ method: 'GET', url: '/admin/users', headers: bearer(passwordOnly) }), 403, /mfa_enrollment_required/);

    // Enrolment stays reachable: the admin adds a passkey with that token.
    const authenticator = new SoftAuthenticator(ORIGIN);
    const options = await json(strict, 'POST', '/auth/passkeys/registration-options', undefined, bearer(passwordOnly));
    assert.equal(options.statusCode, 200, options.body);
    const added = await json(
      strict,
      'POST',
      '/auth/passkeys',
      { name: 'Admin key', response: authenticator.create(options.json().data).json },
      bearer(passwordOnly),
    );
    assert.equal(added.statusCode, 201, added.body);
    await smtp.waitForMail(admin.email);

    const signInOptionsRes = await strict.inject({ method: 'POST', url: '/auth/passkeys/sign-in/options', remoteAddress: '10.77.0.1' });
    assert.equal(signInOptionsRes.statusCode, 200, signInOptionsRes.body);
    const signedIn = await json(strict, 'POST', '/auth/passkeys/sign-in', { response: authenticator.get(signInOptionsRes.json().data) });
    assert.equal(signedIn.statusCode, 200, signedIn.body);
    const token = signedIn.json().data.token as string;
    assert.equal(decodeJwt(token).aal, 'aal2');
    const listed = await strict.inject({ method: 'GET', url: '/admin/users', headers: bearer(token) });
    assert.equal(listed.statusCode, 200, listed.body);
  });
});
