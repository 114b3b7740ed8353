import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import bcrypt from 'bcrypt';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { accountsPasswordHasher, dummyPasswordHash } from '../src/accounts/passwords.js';
import type { PublicUser } from '../src/accounts/repository.js';
import { INVALID_CREDENTIALS } from '../src/accounts/service.js';
import type { App } from '../src/kit/http/app.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const PASSWORD = 'a long enough password';
let app: App;
let alice: PublicUser;

before(async () => {
  app = await suite.app();
  alice = await registerUser(app, { name: 'Alice', email: uniqueEmail('alice'), password: PASSWORD });
});

test('rule 3: login answers 200 with {status, response, message, data: {token, refresh_token, expires_in, user}}', async () => {
  const res = await json(app, 'POST', '/auth/login', { email: alice.email, password: PASSWORD });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.deepEqual(Object.keys(body).sort(), ['data', 'message', 'response', 'status']);
  assert.equal(body.status, 200);
  assert.equal(body.response, 'OK');
  assert.equal(body.message, 'Login successful');
  assert.deepEqual(Object.keys(body.data).sort(), ['expires_in', 'refresh_token', 'token', 'user']);
  assert.equal(body.data.expires_in, 3600);
  assert.match(body.data.refresh_token, /^[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(body.data.user, alice);
  // The token works on the profile route.
  const me = await app.inject({ method: 'GET', url: '/auth/me', headers: bearer(body.data.token) });
  assert.equal(me.statusCode, 200);
  assert.equal(me.json().data.id, alice.id);
});

test('rule 4: the token is HS256 and carries only id, role, iat and exp, expiring after JWT_EXPIRES_IN', async () => {
  const res = await json(app, 'POST', '/auth/login', { email: alice.email, password: PASSWORD });
  const token: string = res.json().data.token;
  assert.deepEqual(decodeProtectedHeader(token), { alg: 'HS256', typ: 'JWT' });
  const claims = decodeJwt(token);
  assert.deepEqual(Object.keys(claims).sort(), ['exp', 'iat', 'id', 'role']);
  assert.equal(claims.id, alice.id);
  assert.equal(claims.role, 'user');
  assert.equal(claims.exp! - claims.iat!, 3600);
  assert.ok(Math.abs(claims.iat! * 1000 - Date.now()) < 60_000);
  assert.ok(!token.includes(Buffer.from(alice.email).toString('base64url').slice(0, 8)));

  const quarterHour = await suite.app({ JWT_EXPIRES_IN: '15m' });
  const short = decodeJwt((await json(quarterHour, 'POST', '/auth/login', { email: alice.email, password: PASSWORD })).json().data.token);
  assert.equal(short.exp! - short.iat!, 900);
});

test('email is matched trimmed and case-insensitively', async () => {
  const res = await json(app, 'POST', '/auth/login', { email: `  ${alice.email.toUpperCase()} `, password: PASSWORD });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().data.user.id, alice.id);
});

test('rule 3: an unknown email and a wrong password give the identical 401', async () => {
  const wrong = await json(app, 'POST', '/auth/login', { email: alice.email, password: 'not the password' });
  const unknown = await json(app, 'POST', '/auth/login', { email: uniqueEmail('nobody'), password: 'not the password' });
  for (const res of [wrong, unknown]) {
    assert.deepEqual(res.json(), { status: 401, response: 'Unauthorized', message: INVALID_CREDENTIALS });
  }
  assert.equal(wrong.body, unknown.body);
  const comparable = (headers: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(headers).filter(([name]) => !['date', 'x-request-id'].includes(name)));
  assert.deepEqual(comparable(wrong.headers), comparable(unknown.headers));
});

test('rule 3: an unknown email costs a cost-12 bcrypt comparison too (the dummy hash)', async () => {
  // The production hasher: what an unknown email costs is the point.
  const production = accountsPasswordHasher();
  const app = await suite.app({}, { deps: { passwordHasher: production } });
  app.addHook('onClose', () => production.close());
  const alice = await registerUser(app, { name: 'Alice', email: uniqueEmail('alice-cost'), password: PASSWORD });
  const hash = await dummyPasswordHash(accountsPasswordHasher({ workers: 1 }));
  assert.match(hash, /^\$2b\$12\$/);
  // CPU time, not wall time: a busy machine stretches the wall clock of a
  // request by any factor, but the CPU one comparison burns stays put. This
  // file's tests run one at a time, so the process's CPU is this request's.
  const cpuOf = async (work: () => Promise<unknown>) => {
    const before = process.cpuUsage();
    await work();
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1000;
  };
  const oneComparison = Math.min(await cpuOf(() => bcrypt.compare('x', hash)), await cpuOf(() => bcrypt.compare('y', hash)));
  const unknown = await cpuOf(async () => {
    const res = await json(app, 'POST', '/auth/login', { email: uniqueEmail('ghost'), password: 'whatever-password' });
    assert.equal(res.statusCode, 401);
  });
  const wrong = await cpuOf(async () => {
    const res = await json(app, 'POST', '/auth/login', { email: alice.email, password: 'whatever-password' });
    assert.equal(res.statusCode, 401);
  });
  // Without the dummy comparison an unknown email costs a few ms of CPU.
  const report = `unknown ${unknown.toFixed(1)} ms, wrong ${wrong.toFixed(1)} ms, one comparison ${oneComparison.toFixed(1)} ms of CPU`;
  assert.ok(unknown > oneComparison * 0.7, report);
  assert.ok(unknown > wrong * 0.7 && wrong > unknown * 0.7, report);
});

const invalidLogins: Array<[string, unknown, string]> = [
  ['missing email', { password: PASSWORD }, "body must have required property 'email'"],
  ['missing password', { email: 'a@example.com' }, "body must have required property 'password'"],
  ['email not a string', { email: ['a@example.com'], password: PASSWORD }, 'body/email must be string'],
  ['invalid email', { email: 'nobody', password: PASSWORD }, 'body/email must be a valid email address'],
  ['password shorter than 8', { email: 'a@example.com', password: 'short' }, 'body/password must be between 8 and 72 characters'],
  ['empty body', {}, "body must have required property 'email'"],
];

test('login input failing validation is 400 with a validation message', async (t) => {
  for (const [label, body, message] of invalidLogins) {
    await t.test(label, async () => assertError(await json(app, 'POST', '/auth/login', body), 400, message));
  }
});

test('no truncation: a password that shares its first 72 bytes with the real one never logs in', async () => {
  // 36 two-byte characters: exactly the 72 bytes bcrypt reads.
  const exact = 'é'.repeat(36);
  const user = await registerUser(app, { name: 'Bytes', email: uniqueEmail('bytes'), password: exact });
  assert.equal((await json(app, 'POST', '/auth/login', { email: user.email, password: exact })).statusCode, 200);
  // bcrypt alone would accept these: it ignores everything after byte 72.
  assert.ok(
    await bcrypt.compare(
      `${exact}x`,
      (await suite.pool.query('SELECT password_hash FROM users WHERE id = $1', [user.id])).rows[0].password_hash,
    ),
  );
  assertError(
    await json(app, 'POST', '/auth/login', { email: user.email, password: `${exact}x` }),
    400,
    'body/password must be at most 72 bytes in UTF-8',
  );
  assertError(await json(app, 'POST', '/auth/login', { email: user.email, password: `${exact}${exact}` }), 400, /body\/password must be/);

  const ascii = 'k'.repeat(72);
  const other = await registerUser(app, { name: 'Chars', email: uniqueEmail('chars'), password: ascii });
  assertError(
    await json(app, 'POST', '/auth/login', { email: other.email, password: `${ascii}k` }),
    400,
    'body/password must be between 8 and 72 characters',
  );
});

noSecretInAnyResponse();
