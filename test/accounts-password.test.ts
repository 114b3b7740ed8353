// POST /auth/password: the new password follows the registration rules, a wrong
import bcrypt from 'bcrypt';
import type { TokenPair as Pair } from '../src/accounts/sessions.js';
// current password is a failed login for the account's limit (counted before bcrypt),
// and success ends every session, refuses older access tokens and answers a new pair.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import type { App } from '../src/kit/http/app.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const PASSWORD = 'first password 1';
const NEW_PASSWORD = 'second password 2';
let app: App;

before(async () => {
  app = await suite.app();
});

async function login(email: string, password = PASSWORD): Promise<Pair> {
  const res = await json(app, 'POST', '/auth/login', { email, password });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data as Pair;
}

const change = (token: string, body: unknown) => json(app, 'POST', '/auth/password', body, bearer(token));
const me = (token: string) => app.inject({ method: 'GET', url: '/auth/me', headers: bearer(token) });
const refresh = (refreshToken: string) => json(app, 'POST', '/auth/refresh', { refresh_token: refreshToken });
const passwordHash = async (id: string) =>
  (await suite.pool.query('SELECT password_hash FROM users WHERE id = $1', [id])).rows[0].password_hash as string;
const events = async (id: string) =>
  (await suite.pool.query('SELECT event FROM audit_log WHERE target_id = $1 ORDER BY id', [id])).rows.map((r) => r.event as string);

test('success: a new pair; every older session and access token stops working; only the new password logs in', async () => {
  const user = await registerUser(app, { name: 'Changer', email: uniqueEmail('change'), password: PASSWORD });
  const here = await login(user.email);
  const elsewhere = await login(user.email);
  const res = await change(here.token, { current_password: PASSWORD, new_password: NEW_PASSWORD });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.equal(body.message, 'Password changed');
  const fresh = body.data as Pair;
  assert.deepEqual(Object.keys(fresh).sort(), ['expires_in', 'refresh_token', 'token', 'user']);
  assert.equal(fresh.user.id, user.id);
  // In the same second as the change: the old tokens are refused, the new one works.
  assertError(await me(here.token), 401, 'Invalid or expired token.');
  assertError(await me(elsewhere.token), 401, 'Invalid or expired token.');
  assertError(await refresh(here.refresh_token), 401, 'Invalid or expired refresh token.');
  assertError(await refresh(elsewhere.refresh_token), 401, 'Invalid or expired refresh token.');
  assert.equal((await me(fresh.token)).statusCode, 200);
  assert.equal((await refresh(fresh.refresh_token)).statusCode, 200);
  assertError(await json(app, 'POST', '/auth/login', { email: user.email, password: PASSWORD }), 401, 'Invalid email or password');
  await login(user.email, NEW_PASSWORD);
  // Hashed again, with the service's hasher (its production cost, 12, is checked in accounts-register).
  const rehashed = await passwordHash(user.id);
  assert.match(rehashed, /^\$2b\$\d\d\$/);
  assert.ok(await bcrypt.compare(NEW_PASSWORD, rehashed));
  assert.ok((await events(user.id)).includes('password_changed'));
});

test('a new password breaking the registration rules is 400 and changes nothing', async () => {
  const user = await registerUser(app, { name: 'Rules', email: uniqueEmail('rules'), password: PASSWORD });
  const pair = await login(user.email);
  const before = await passwordHash(user.id);
  assertError(
    await change(pair.token, { current_password: PASSWORD, new_password: 'short' }),
    400,
    'body/new_password must be between 8 and 72 characters',
  );
  assertError(
    await change(pair.token, { current_password: PASSWORD, new_password: 'é'.repeat(40) }),
    400,
    'body/new_password must be at most 72 bytes in UTF-8',
  );
  assertError(
    await change(pair.token, { current_password: PASSWORD, new_password: 'iloveyou' }),
    400,
    'body/new_password is one of the most commonly used passwords: choose one that is harder to guess',
  );
  assertError(await change(pair.token, { current_password: PASSWORD }), 400, "body must have required property 'new_password'");
  assert.equal(await passwordHash(user.id), before);
  assert.equal((await me(pair.token)).statusCode, 200);
  assert.equal((await refresh(pair.refresh_token)).statusCode, 200);
});

test('a wrong current password is 400, audited, changes nothing, and counts against the login limit', async () => {
  const user = await registerUser(app, { name: 'Guesser', email: uniqueEmail('guess'), password: PASSWORD });
  const pair = await login(user.email);
  const before = await passwordHash(user.id);
  assertError(
    await change(pair.token, { current_password: 'not the password', new_password: NEW_PASSWORD }),
    400,
    'Current password is incorrect',
  );
  assert.equal(await passwordHash(user.id), before);
  assert.equal((await me(pair.token)).statusCode, 200);
  assert.deepEqual((await events(user.id)).filter((e) => e === 'password_change_failed').length, 1);
  // 9 more failures from this address reach its limit of 10 for the account; counted before bcrypt, so 20 at once give 9×400 and 11×429.
  const answers = await Promise.all(
    Array.from({ length: 20 }, () => change(pair.token, { current_password: 'still not it!', new_password: NEW_PASSWORD })),
  );
  const statuses = answers.map((r) => r.statusCode).sort();
  assert.deepEqual(statuses, [...Array(9).fill(400), ...Array(11).fill(429)]);
  const limited = answers.find((r) => r.statusCode === 429)!;
  assertError(limited, 429, /^Too many failed login attempts, try again in \d+ seconds\.$/);
  assert.ok(Number(limited.headers['retry-after']) > 0);
  // The same limiter as login: the right password is refused now, at login and here.
  assertError(await json(app, 'POST', '/auth/login', { email: user.email, password: PASSWORD }), 429, /Too many failed login attempts/);
  assertError(await change(pair.token, { current_password: PASSWORD, new_password: NEW_PASSWORD }), 429, /Too many failed login attempts/);
  assert.equal(await passwordHash(user.id), before);
});

test('a wrong password at login counts against a password change too', async () => {
  const user = await registerUser(app, { name: 'Mixed', email: uniqueEmail('mixed'), password: PASSWORD });
  const pair = await login(user.email);
  for (let i = 0; i < 10; i += 1) {
    assertError(
      await json(app, 'POST', '/auth/login', { email: user.email, password: 'wrong password' }),
      401,
      'Invalid email or password',
    );
  }
  assertError(await change(pair.token, { current_password: PASSWORD, new_password: NEW_PASSWORD }), 429, /Too many failed login attempts/);
});

test('without a valid token it is 401 before anything is read', async () => {
  assertError(
    await json(app, 'POST', '/auth/password', { current_password: PASSWORD, new_password: NEW_PASSWORD }),
    401,
    'Access denied. No token provided.',
  );
  assertError(await change('not.a.token', {}), 401, 'Invalid or expired token.');
});

noSecretInAnyResponse();
