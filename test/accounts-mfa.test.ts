// Second factors: TOTP enrolment, the login challenge, replay and attempt limits,
// recovery codes, step-up for sensitive operations, and their audit events and mails
// (received by a real SMTP server). The clock is injected, so TOTP steps, challenge
// expiry and the step-up window are exact.
import assert from 'node:assert/strict';
import type { TokenPair as Pair } from '../src/accounts/sessions.js';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { CHALLENGE_MAX_ATTEMPTS, FACTOR_FAILURE_LIMIT, INVALID_CHALLENGE, INVALID_FACTOR_CODE } from '../src/accounts/factors.js';
import type { PublicUser } from '../src/accounts/repository.js';
import { base32Decode, base32Encode, totpCode, totpStep } from '../src/kit/totp.js';
import { REAUTHENTICATION_REQUIRED } from '../src/accounts/auth.js';
import { createPruner } from '../src/accounts/pruning.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { type TestSmtp, startSmtp } from './helpers/smtp.js';
import { connectRedis } from '../src/kit/redis.js';
import { waitReady, withoutRedis } from './helpers/redis.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
const PASSWORD = 'correct horse 42';
let app: App;
let smtp: TestSmtp;

before(async () => {
  smtp = await startSmtp();
  app = await suite.app({ SMTP_URL: smtp.url }, { clock });
});
after(async () => {
  await smtp.close();
});

const login = (email: string, password = PASSWORD, ip = '127.0.0.1') =>
  app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email, password },
    remoteAddress: ip,
  });
const factorStep = (body: unknown, ip = '127.0.0.1') =>
  app.inject({ method: 'POST', url: '/auth/login/factor', payload: body as object, remoteAddress: ip });
const nowCode = (secret: Buffer) => totpCode(secret, totpStep(clock()));

/**
 * The i-th six-digit code that is none of the codes the secret has in the steps around `atMs`
 * (which the drift window accepts), so a "wrong" guess is never right by chance.
 */
function wrongCode(secret: Buffer, atMs: number, i = 0): string {
  const step = totpStep(atMs);
  const right = new Set([-2, -1, 0, 1, 2].map((d) => totpCode(secret, step + d)));
  let n = Number(totpCode(secret, step)) + 1 + i * 7;
  while (right.has(String(n % 1_000_000).padStart(6, '0'))) n++;
  return String(n % 1_000_000).padStart(6, '0');
}
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

async function challengeFor(email: string): Promise<string> {
  const res = await login(email);
  assert.equal(res.statusCode, 200, res.body);
  const data = res.json().data;
  assert.equal(data.mfa_required, true, res.body);
  return data.challenge as string;
}

/** A user with TOTP on: its secret and its recovery codes. Leaves the clock on the next time step. */
async function userWithTotp(label: string): Promise<{ user: PublicUser; secret: Buffer; recoveryCodes: string[] }> {
  const user = await registerUser(app, { name: 'Factor User', email: uniqueEmail(label), password: PASSWORD });
  const { token } = await signedIn(user.email);
  const begun = await json(app, 'POST', '/auth/factors/totp', undefined, bearer(token));
  assert.equal(begun.statusCode, 200, begun.body);
  const secret = base32Decode(begun.json().data.secret);
  const confirmed = await json(app, 'POST', '/auth/factors/totp/confirm', { code: nowCode(secret) }, bearer(token));
  assert.equal(confirmed.statusCode, 200, confirmed.body);
  await smtp.waitForMail(user.email);
  clock.advance(30_000);
  return { user, secret, recoveryCodes: confirmed.json().data.recovery_codes };
}

describe('TOTP', () => {
  test('the codes are those of RFC 6238 (SHA-1 test vectors, last six digits)', () => {
    const secret = Buffer.from('12345678901234567890');
    assert.equal(totpCode(secret, totpStep(59_000)), '287082');
    assert.equal(totpCode(secret, totpStep(1_111_111_109_000)), '081804');
    assert.equal(totpCode(secret, totpStep(2_000_000_000_000)), '279037');
    assert.deepEqual(base32Decode(base32Encode(secret)), secret);
  });

  test('enrolment: a secret and its otpauth URI once, on only after a right code; the secret is stored sealed and never shown again', async () => {
    const user = await registerUser(app, { name: 'Enroller', email: uniqueEmail('enrol'), password: PASSWORD });
    const { token } = await signedIn(user.email);
    const begun = await json(app, 'POST', '/auth/factors/totp', undefined, bearer(token));
    assert.equal(begun.statusCode, 200, begun.body);
    const { secret, otpauth_uri } = begun.json().data as { secret: string; otpauth_uri: string };
    assert.match(secret, /^[A-Z2-7]{32}$/);
    const uri = new URL(otpauth_uri);
    assert.equal(uri.protocol, 'otpauth:');
    assert.equal(uri.searchParams.get('secret'), secret);
    assert.ok(decodeURIComponent(uri.pathname).endsWith(user.email));
    // The same URI drawn as a QR code: an SVG image in a data: URL (what the account page shows).
    const qr = (begun.json().data as { otpauth_qr: string }).otpauth_qr;
    const qrPrefix = 'data:image/svg+xml;base64,';
    assert.ok(qr.startsWith(qrPrefix), qr.slice(0, 40));
    assert.match(
      Buffer.from(qr.slice(qrPrefix.length), 'base64').toString(),
      /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"[\s\S]*<path /,
    );
    const raw = base32Decode(secret);
    const stored = (await suite.pool.query('SELECT secret_sealed FROM totp_factors WHERE user_id = $1', [user.id])).rows[0]
      .secret_sealed as Buffer;
    assert.equal(stored.indexOf(raw), -1, 'the secret is stored in clear');

    // Pending: a login still gives tokens, and the status says off.
    assert.ok((await signedIn(user.email)).token);
    const pendingStatus = await app.inject({ method: 'GET', url: '/auth/factors', headers: bearer(token) });
    assert.deepEqual(pendingStatus.json().data, { totp: { enabled: false, confirmed_at: null }, recovery_codes_remaining: 0 });

    const wrong = wrongCode(raw, clock());
    assertError(await json(app, 'POST', '/auth/factors/totp/confirm', { code: wrong }, bearer(token)), 400, INVALID_FACTOR_CODE);
    assertError(await json(app, 'POST', '/auth/factors/totp/confirm', { code: 'abcdef' }, bearer(token)), 400, INVALID_FACTOR_CODE);
    assertError(await json(app, 'POST', '/auth/factors/totp/confirm', { code: 123456 }, bearer(token)), 400, /code/);
    const confirmed = await json(app, 'POST', '/auth/factors/totp/confirm', { code: nowCode(raw) }, bearer(token));
    assert.equal(confirmed.statusCode, 200, confirmed.body);
    const codes = confirmed.json().data.recovery_codes as string[];
    assert.equal(codes.length, 10);
    assert.equal(new Set(codes).size, 10);
    for (const code of codes) assert.match(code, /^[A-Z2-9]{5}-[A-Z2-9]{5}$/);
    const storedCodes = await suite.pool.query('SELECT code_hash FROM recovery_codes WHERE user_id = $1', [user.id]);
    assert.equal(storedCodes.rowCount, 10);
    for (const row of storedCodes.rows) for (const code of codes) assert.equal((row.code_hash as Buffer).indexOf(code), -1);

    // On: the secret is never answered again, and a second enrolment is refused.
    const status = await app.inject({ method: 'GET', url: '/auth/factors', headers: bearer(token) });
    assert.equal(status.json().data.totp.enabled, true);
    assert.equal(status.json().data.recovery_codes_remaining, 10);
    assert.ok(!status.body.includes(secret));
    assertError(await json(app, 'POST', '/auth/factors/totp', undefined, bearer(token)), 409, /already on/);
    const mail = await smtp.waitForMail(user.email);
    assert.match(mail.subject, /Two-step sign-in is on/);
    assert.ok(!mail.text.includes(secret));
    assert.ok((await events(user.id)).some((e) => e.event === 'factor_added' && e.details.factor === 'totp'));
  });

  test('login: the right password gives a challenge, not a token; the code then gives a pair whose token says how', async () => {
    const { user, secret } = await userWithTotp('login');
    const res = await login(user.email);
    assert.equal(res.statusCode, 200, res.body);
    const data = res.json().data;
    assert.deepEqual(Object.keys(data).sort(), ['challenge', 'expires_in', 'methods', 'mfa_required']);
    assert.equal(data.expires_in, 300);
    assert.ok(!res.body.includes('"token"'));
    // The challenge is not an access token.
    assertError(await app.inject({ method: 'GET', url: '/auth/me', headers: bearer(data.challenge) }), 401, 'Invalid or expired token.');
    // A wrong password is still the plain 401, with or without a factor.
    assertError(await login(user.email, 'wrong password 1'), 401, 'Invalid email or password');

    const done = await factorStep({ challenge: data.challenge, code: nowCode(secret) });
    assert.equal(done.statusCode, 200, done.body);
    const pair = done.json().data as Pair;
    assert.equal(pair.user.id, user.id);
    const claims = decodeJwt(pair.token);
    assert.deepEqual(claims.amr, ['pwd', 'otp', 'mfa']);
    assert.equal(claims.auth_time, Math.floor(clock() / 1000));
    assert.equal((await app.inject({ method: 'GET', url: '/auth/me', headers: bearer(pair.token) })).statusCode, 200);
    // A refresh keeps how and when the session was authenticated.
    clock.advance(5_000);
    const refreshed = await json(app, 'POST', '/auth/refresh', { refresh_token: pair.refresh_token });
    assert.equal(refreshed.statusCode, 200, refreshed.body);
    assert.deepEqual(decodeJwt(refreshed.json().data.token).amr, ['pwd', 'otp', 'mfa']);
    assert.equal(decodeJwt(refreshed.json().data.token).auth_time, claims.auth_time);
    // Single use.
    assertError(await factorStep({ challenge: data.challenge, code: nowCode(secret) }), 401, INVALID_CHALLENGE);
  });

  test('replay: a code already used is refused, even with a new challenge; the next step’s code works', async () => {
    const { user, secret } = await userWithTotp('replay');
    const code = nowCode(secret);
    assert.equal((await factorStep({ challenge: await challengeFor(user.email), code })).statusCode, 200);
    assertError(await factorStep({ challenge: await challengeFor(user.email), code }), 401, INVALID_FACTOR_CODE);
    // Nor the code of the step before (still within the drift window).
    clock.advance(30_000);
    assertError(await factorStep({ challenge: await challengeFor(user.email), code }), 401, INVALID_FACTOR_CODE);
    assert.equal((await factorStep({ challenge: await challengeFor(user.email), code: nowCode(secret) })).statusCode, 200);
    assert.ok((await events(user.id)).some((e) => e.event === 'second_factor_failed'));
  });

  test('a challenge expires after 5 minutes and allows 5 tries', async () => {
    const { user, secret } = await userWithTotp('expiry');
    const old = await challengeFor(user.email);
    clock.advance(5 * 60_000 + 1);
    assertError(await factorStep({ challenge: old, code: nowCode(secret) }), 401, INVALID_CHALLENGE);

    const challenge = await challengeFor(user.email);
    const wrong = wrongCode(secret, clock());
    for (let i = 0; i < CHALLENGE_MAX_ATTEMPTS; i++) assertError(await factorStep({ challenge, code: wrong }), 401, INVALID_FACTOR_CODE);
    // Out of tries: even the right code is refused; the password must be given again.
    assertError(await factorStep({ challenge, code: nowCode(secret) }), 401, INVALID_CHALLENGE);
    assert.equal((await factorStep({ challenge: await challengeFor(user.email), code: nowCode(secret) })).statusCode, 200);
  });

  test('bad input is a 4xx that changes nothing', async () => {
    const { user, secret } = await userWithTotp('input');
    const challenge = await challengeFor(user.email);
    assertError(await factorStep({ challenge }), 400, 'Give exactly one of code, recovery_code and passkey');
    assertError(
      await factorStep({ challenge, code: '123456', recovery_code: 'ABCDE-FGHJK' }),
      400,
      'Give exactly one of code, recovery_code and passkey',
    );
    assertError(await factorStep({ challenge, code: 123456 }), 400, /code/);
    assertError(await factorStep({ challenge: 'x'.repeat(200), code: '123456' }), 400, /challenge/);
    assertError(await factorStep({ challenge: 'not-a-challenge', code: '123456' }), 401, INVALID_CHALLENGE);
    assertError(await factorStep({ challenge: 'A'.repeat(43), code: '123456' }), 401, INVALID_CHALLENGE);
    assertError(await factorStep({ challenge, code: "1' OR 1=1 --" }), 401, INVALID_FACTOR_CODE);
    // The challenge still works for the right code (the 400s spent none of its 5 tries).
    assert.equal((await factorStep({ challenge, code: nowCode(secret) })).statusCode, 200);
  });
});

test('used and expired challenges are pruned; live ones stay', async () => {
  const { user, secret } = await userWithTotp('prune');
  const used = await challengeFor(user.email);
  assert.equal((await factorStep({ challenge: used, code: nowCode(secret) })).statusCode, 200);
  await challengeFor(user.email);
  clock.advance(5 * 60_000 + 1);
  const live = await challengeFor(user.email);
  const pruner = createPruner({ pool: suite.pool, clock, idleMs: 86_400_000, maxLifetimeMs: 86_400_000 });
  const counts = await pruner.runOnce();
  pruner.stop();
  assert.ok(counts.loginChallenges >= 2);
  const left = await suite.pool.query('SELECT count(*)::int AS n FROM login_challenges WHERE user_id = $1', [user.id]);
  assert.equal(left.rows[0].n, 1);
  clock.advance(30_000);
  assert.equal((await factorStep({ challenge: live, code: nowCode(secret) })).statusCode, 200);
});

describe('the attempt budget per account', () => {
  test('200 parallel guesses over many challenges, addresses and both kinds of code: exactly 10 are checked', async () => {
    const { user, secret } = await userWithTotp('budget');
    const challenges: string[] = [];
    for (let i = 0; i < 200 / CHALLENGE_MAX_ATTEMPTS; i++) challenges.push(await challengeFor(user.email));
    const right = nowCode(secret);
    const guesses = Array.from({ length: 200 }, (_, i) => {
      const wrong = wrongCode(secret, clock(), i);
      const answer =
        i % 2 === 0 ? { code: wrong } : { recovery_code: `ZZZZZ-ZZZ${String.fromCharCode(65 + (i % 26))}${i % 10 > 1 ? i % 10 : 2}` };
      return factorStep({ challenge: challenges[i % challenges.length], ...answer }, `10.0.${Math.floor(i / 250)}.${i % 250}`);
    });
    const answers = await Promise.all(guesses);
    const counts = new Map<number, number>();
    for (const res of answers) counts.set(res.statusCode, (counts.get(res.statusCode) ?? 0) + 1);
    assert.equal(counts.get(401), FACTOR_FAILURE_LIMIT.max, JSON.stringify([...counts]));
    assert.equal(counts.get(429), 200 - FACTOR_FAILURE_LIMIT.max);
    const refused = answers.find((res) => res.statusCode === 429)!;
    assert.ok(Number(refused.headers['retry-after']) > 0);
    const failed = (await events(user.id)).filter((e) => e.event === 'second_factor_failed');
    assert.equal(failed.length, FACTOR_FAILURE_LIMIT.max);
    // The budget is spent: even the right code waits for the window.
    assertError(await factorStep({ challenge: await challengeFor(user.email), code: right }), 429, /Too many failed second-factor checks/);
    clock.advance(FACTOR_FAILURE_LIMIT.windowMs);
    assert.equal((await factorStep({ challenge: await challengeFor(user.email), code: nowCode(secret) })).statusCode, 200);
  });
});

test('with REDIS_URL the budget is shared: two instances together check exactly 10 guesses', { skip: withoutRedis }, async () => {
  const redis = connectRedis(process.env.REDIS_URL!, () => {});
  const other = connectRedis(process.env.REDIS_URL!, () => {});
  try {
    await Promise.all([waitReady(redis), waitReady(other)]);
    // The real clock here: the counters' windows live in Redis.
    const first = await suite.app({}, { redis });
    const second = await suite.app({}, { redis: other });
    const user = await registerUser(first, { name: 'Shared Budget', email: uniqueEmail('shared'), password: PASSWORD });
    const token = (await json(first, 'POST', '/auth/login', { email: user.email, password: PASSWORD })).json().data.token;
    const secret = base32Decode((await json(first, 'POST', '/auth/factors/totp', undefined, bearer(token))).json().data.secret);
    const right = totpCode(secret, totpStep(Date.now()));
    assert.equal((await json(first, 'POST', '/auth/factors/totp/confirm', { code: right }, bearer(token))).statusCode, 200);
    const challenges: string[] = [];
    for (let i = 0; i < 20; i++)
      challenges.push((await json(second, 'POST', '/auth/login', { email: user.email, password: PASSWORD })).json().data.challenge);
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) => {
        const wrong = wrongCode(secret, clock(), i);
        return json(i % 2 === 0 ? first : second, 'POST', '/auth/login/factor', { challenge: challenges[i % 20], code: wrong });
      }),
    );
    const statuses = answers.map((res) => res.statusCode);
    assert.equal(statuses.filter((s) => s === 401).length, FACTOR_FAILURE_LIMIT.max);
    assert.equal(statuses.filter((s) => s === 429).length, 100 - FACTOR_FAILURE_LIMIT.max);
    assert.equal(await redis.get(`accounts:factor-failures:account:${user.id}`), String(FACTOR_FAILURE_LIMIT.max));
    await redis.del(`accounts:factor-failures:account:${user.id}`);
  } finally {
    redis.disconnect();
    other.disconnect();
  }
});

describe('recovery codes', () => {
  test('single use under 10 concurrent uses: exactly one signs in; its use is audited with the count left and mailed', async () => {
    const { user, recoveryCodes } = await userWithTotp('recovery');
    const challenges: string[] = [];
    for (let i = 0; i < 10; i++) challenges.push(await challengeFor(user.email));
    const code = recoveryCodes[0]!.toLowerCase().replace('-', ' ');
    const answers = await Promise.all(challenges.map((challenge) => factorStep({ challenge, recovery_code: code })));
    assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, ...Array(9).fill(401)]);
    const pair = answers.find((r) => r.statusCode === 200)!.json().data as Pair;
    assert.deepEqual(decodeJwt(pair.token).amr, ['pwd', 'mfa']);
    const used = (await events(user.id)).filter((e) => e.event === 'recovery_code_used');
    assert.equal(used.length, 1);
    assert.equal(used[0]!.details.remaining, '9');
    const mail = await smtp.waitForMail(user.email);
    assert.match(mail.subject, /recovery code was used/);
    assert.match(mail.text, /9 of 10/);
    // Spent: refused with a fresh challenge too; another code works.
    assertError(await factorStep({ challenge: await challengeFor(user.email), recovery_code: recoveryCodes[0] }), 401, INVALID_FACTOR_CODE);
    assert.equal((await factorStep({ challenge: await challengeFor(user.email), recovery_code: recoveryCodes[1] })).statusCode, 200);
  });

  test('regenerating gives a new set (shown once) and voids the old one', async () => {
    const { user, secret, recoveryCodes } = await userWithTotp('regen');
    const pair = (await factorStep({ challenge: await challengeFor(user.email), code: nowCode(secret) })).json().data as Pair;
    const res = await json(app, 'POST', '/auth/factors/recovery-codes', undefined, bearer(pair.token));
    assert.equal(res.statusCode, 200, res.body);
    const fresh = res.json().data.recovery_codes as string[];
    assert.equal(fresh.length, 10);
    assertError(await factorStep({ challenge: await challengeFor(user.email), recovery_code: recoveryCodes[2] }), 401, INVALID_FACTOR_CODE);
    assert.equal((await factorStep({ challenge: await challengeFor(user.email), recovery_code: fresh[0] })).statusCode, 200);
    assert.ok((await events(user.id)).some((e) => e.event === 'recovery_codes_regenerated'));
  });
});

describe('step-up', () => {
  test('password change and factor removal need a sign-in within REAUTH_MAX_AGE; a refresh does not renew it', async () => {
    const { user, secret } = await userWithTotp('stepup');
    const pair = (await factorStep({ challenge: await challengeFor(user.email), code: nowCode(secret) })).json().data as Pair;
    clock.advance(10 * 60_000 + 1000);
    const refreshed = (await json(app, 'POST', '/auth/refresh', { refresh_token: pair.refresh_token })).json().data as Pair;
    for (const token of [pair.token, refreshed.token]) {
      const removal = await app.inject({ method: 'DELETE', url: '/auth/factors/totp', headers: bearer(token) });
      assertError(removal, 401, REAUTHENTICATION_REQUIRED);
      assert.match(String(removal.headers['www-authenticate']), /error="insufficient_user_authentication".*max_age=600/);
      assertError(
        await json(app, 'POST', '/auth/password', { current_password: PASSWORD, new_password: 'another password 9' }, bearer(token)),
        401,
        REAUTHENTICATION_REQUIRED,
      );
      assertError(await json(app, 'POST', '/auth/factors/recovery-codes', undefined, bearer(token)), 401, REAUTHENTICATION_REQUIRED);
      // Reading is not sensitive.
      assert.equal((await app.inject({ method: 'GET', url: '/auth/factors', headers: bearer(token) })).statusCode, 200);
    }
    assert.equal((await suite.pool.query('SELECT 1 FROM totp_factors WHERE user_id = $1', [user.id])).rowCount, 1);

    // Signing in again (password and code) allows it.
    clock.advance(30_000);
    const again = (await factorStep({ challenge: await challengeFor(user.email), code: nowCode(secret) })).json().data as Pair;
    const removal = await app.inject({ method: 'DELETE', url: '/auth/factors/totp', headers: bearer(again.token) });
    assert.equal(removal.statusCode, 200, removal.body);
    assert.equal((await suite.pool.query('SELECT 1 FROM recovery_codes WHERE user_id = $1', [user.id])).rowCount, 0);
    assert.ok((await events(user.id)).some((e) => e.event === 'factor_removed' && e.details.factor === 'totp'));
    assert.match((await smtp.waitForMail(user.email)).subject, /Two-step sign-in is off/);
    // Off: the password alone signs in again, with the contract's token.
    const plain = await signedIn(user.email);
    assert.deepEqual(Object.keys(decodeJwt(plain.token)).sort(), ['exp', 'iat', 'id', 'role']);
  });

  test('a user without a factor: the password change needs a recent login too; a login renews it', async () => {
    const user = await registerUser(app, { name: 'Plain User', email: uniqueEmail('plain'), password: PASSWORD });
    const pair = await signedIn(user.email);
    clock.advance(10 * 60_000 + 1000);
    const refreshed = (await json(app, 'POST', '/auth/refresh', { refresh_token: pair.refresh_token })).json().data as Pair;
    assert.equal(decodeJwt(refreshed.token).auth_time, decodeJwt(pair.token).iat);
    const body = { current_password: PASSWORD, new_password: 'another password 9' };
    assertError(await json(app, 'POST', '/auth/password', body, bearer(refreshed.token)), 401, REAUTHENTICATION_REQUIRED);
    const fresh = await signedIn(user.email);
    assert.equal((await json(app, 'POST', '/auth/password', body, bearer(fresh.token))).statusCode, 200);
  });

  test('the browser session: the second step sets the cookie; its password change asks for a recent sign-in', async () => {
    const { user, secret } = await userWithTotp('browser');
    const csrf = { 'x-csrf-protection': '1' };
    const first = await json(app, 'POST', '/auth/browser/login', { email: user.email, password: PASSWORD }, csrf);
    assert.equal(first.statusCode, 200, first.body);
    assert.equal(first.json().data.mfa_required, true);
    assert.equal(first.headers['set-cookie'], undefined);
    const second = await json(
      app,
      'POST',
      '/auth/browser/login/factor',
      { challenge: first.json().data.challenge, code: nowCode(secret) },
      csrf,
    );
    assert.equal(second.statusCode, 200, second.body);
    assert.match(String(second.headers['set-cookie']), /accounts_refresh=/);
    clock.advance(10 * 60_000 + 1000);
    assertError(
      await json(
        app,
        'POST',
        '/auth/browser/password',
        { current_password: PASSWORD, new_password: 'another password 9' },
        {
          ...csrf,
          ...bearer(second.json().data.token),
        },
      ),
      401,
      REAUTHENTICATION_REQUIRED,
    );
  });
});

noSecretInAnyResponse();
