import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createPool } from '../src/kit/db.js';
import { emailDigester } from '../src/accounts/login-throttle.js';
import { TEST_SECRET, accountsSuite, assertError, bearer, json, noSecretInAnyResponse } from './helpers/accounts.js';
import { LogCapture } from './helpers/logs.js';
import { uniqueEmail } from './helpers/emails.js';
import { request } from './helpers/http.js';
import { closedPort } from './helpers/ports.js';

const suite = accountsSuite();

test('/healthz answers 200 and /readyz 200 while the database is reachable', async () => {
  const app = await suite.app();
  const health = await app.inject({ method: 'GET', url: '/healthz' });
  assert.equal(health.statusCode, 200);
  assert.deepEqual(health.json(), { status: 'ok' });
  const ready = await app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(ready.statusCode, 200);
  assert.deepEqual(ready.json(), { status: 'ready' });
});

test('/readyz answers 503 JSON when the database is unreachable', async () => {
  const pool = createPool(`postgres://postgres@127.0.0.1:${await closedPort()}/accounts`, { connectionTimeoutMillis: 1000 });
  const app = await suite.app({}, { pool });
  try {
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    assertError(res, 503, /database/);
    assert.match(String(res.headers['content-type']), /application\/json/);
    // Requests that need the database say so too, rather than 500.
    const login = await json(app, 'POST', '/auth/login', { email: 'a@example.com', password: 'password-1' });
    assertError(login, 503, /unavailable/);
  } finally {
    await pool.end();
  }
});

test('a debug-level log of register, login, me and a failed login holds no password, hash, token or email', async () => {
  const logs = new LogCapture();
  const app = await suite.app({ LOG_LEVEL: 'debug' }, { logs });
  const email = uniqueEmail('logged');
  const password = 'Sup3r-secret-passphrase';
  const wrongPassword = 'Wr0ng-secret-passphrase';
  const registered = await json(app, 'POST', '/auth/register', { name: 'Logged', email, password });
  assert.equal(registered.statusCode, 201);
  const userId: string = registered.json().data.id;
  const loggedIn = await json(app, 'POST', '/auth/login', { email, password });
  const token: string = loggedIn.json().data.token;
  assert.equal((await app.inject({ method: 'GET', url: '/auth/me', headers: bearer(token) })).statusCode, 200);
  assert.equal((await json(app, 'POST', '/auth/login', { email, password: wrongPassword })).statusCode, 401);

  const text = logs.text();
  assert.ok(logs.lines().length >= 8, 'debug logging produced lines');
  for (const secret of [password, wrongPassword, token, token.split('.')[2]!, email]) {
    assert.ok(!text.includes(secret), `log contains ${secret.slice(0, 12)}…`);
  }
  assert.doesNotMatch(text, /\$2[aby]\$/);

  const success = logs.lines().find((l) => l.event === 'login_succeeded');
  assert.equal(success?.userId, userId);
  assert.equal(success?.ip, '127.0.0.1');
  const failure = logs.lines().find((l) => l.event === 'login_failed');
  assert.equal(failure?.emailHash, emailDigester(TEST_SECRET)(email));
  assert.equal(failure?.userId, userId);
  assert.equal(failure?.ip, '127.0.0.1');
});

test('the full flow works over real HTTP', async () => {
  const app = await suite.app();
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  const email = uniqueEmail('http');
  const created = await request(base, 'POST', '/auth/register', { body: { name: 'Over HTTP', email, password: 'http password' } });
  assert.equal(created.status, 201);
  const login = await request(base, 'POST', '/auth/login', { body: { email, password: 'http password' } });
  assert.equal(login.status, 200);
  const me = await request(base, 'GET', '/auth/me', { token: login.body.data.token });
  assert.deepEqual(me.body.data, created.body.data);
  assert.ok(me.headers.get('x-request-id'));
  const missing = await request(base, 'GET', '/missing');
  assert.equal(missing.status, 404);
  assert.deepEqual(Object.keys(missing.body).sort(), ['message', 'response', 'status']);
  const badJson = await request(base, 'POST', '/auth/login', { raw: '{"email":' });
  assert.equal(badJson.status, 400);
  assert.equal(badJson.body.status, 400);
});

test('the OpenAPI document lists every route with its response schemas', async () => {
  const app = await suite.app();
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
  assert.deepEqual(
    Object.keys(doc.paths as object)
      .filter((p) => !['/healthz', '/readyz'].includes(p))
      .sort(),
    [
      '/.well-known/jwks.json',
      '/admin/audit',
      '/admin/users',
      '/admin/users/{id}',
      '/admin/users/{id}/factors',
      '/auth/browser/login',
      '/auth/browser/login/factor',
      '/auth/browser/logout',
      '/auth/browser/passkey-sign-in',
      '/auth/browser/password',
      '/auth/browser/refresh',
      '/auth/email-signin',
      '/auth/factors',
      '/auth/factors/recovery-codes',
      '/auth/factors/totp',
      '/auth/factors/totp/confirm',
      '/auth/login',
      '/auth/login/factor',
      '/auth/logout',
      '/auth/me',
      '/auth/passkeys',
      '/auth/passkeys/registration-options',
      '/auth/passkeys/sign-in',
      '/auth/passkeys/sign-in/options',
      '/auth/passkeys/{id}',
      '/auth/password',
      '/auth/password-reset',
      '/auth/password-reset/check',
      '/auth/password-reset/confirm',
      '/auth/refresh',
      '/auth/register',
      '/auth/sessions',
      '/auth/sessions/{id}',
      '/auth/verify-email',
      '/auth/verify-email/resend',
    ],
  );
  for (const path of ['/auth/password-reset', '/auth/verify-email/resend']) {
    assert.deepEqual(Object.keys(doc.paths[path].post.responses).sort(), ['202', '400', '413', '415', '429', '500', '503']);
  }
  assert.deepEqual(Object.keys(doc.paths['/auth/password-reset/confirm'].post.responses).sort(), [
    '200',
    '400',
    '413',
    '415',
    '500',
    '503',
  ]);
  assert.ok(doc.paths['/auth/refresh'].post.responses['401']);
  assert.ok(doc.paths['/auth/login'].post.responses['429']);
  assert.ok(doc.paths['/admin/users'].get.responses['403']);
  assert.ok(doc.paths['/.well-known/jwks.json'].get.responses['404'], 'the key set is documented as absent under HS256');
  assert.ok(!JSON.stringify(doc).includes('password_hash'));
});

noSecretInAnyResponse();
