import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { buildApp } from '../src/accounts/app.js';
import { createPool } from '../src/kit/db.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, responseBodies, testConfig } from './helpers/accounts.js';
import { LogCapture } from './helpers/logs.js';
import { uniqueEmail } from './helpers/emails.js';
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
  const app = await buildApp(testConfig(), { pool });
  try {
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    responseBodies.push(res.body);
    assertError(res, 503, /database/);
    assert.match(String(res.headers['content-type']), /application\/json/);
    // Requests that need the database say so too, rather than 500.
    const login = await json(app, 'POST', '/auth/login', { email: 'a@example.com', password: 'password-1' });
    responseBodies.push(login.body);
    assertError(login, 503, /unavailable/);
  } finally {
    await app.close();
    await pool.end();
  }
});

test('a debug-level log of register, login, me and a failed login holds no password, hash, token or email', async () => {
  const logs = new LogCapture();
  const app = await suite.app({ LOG_LEVEL: 'debug' }, { logStream: logs });
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
  assert.equal(failure?.emailHash, createHash('sha256').update(email).digest('hex'));
  assert.equal(failure?.userId, userId);
  assert.equal(failure?.ip, '127.0.0.1');
});

test('the full flow works over real HTTP', async () => {
  const app = await suite.app();
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    responseBodies.push(text);
    return { status: res.status, body: JSON.parse(text), headers: res.headers };
  };
  const email = uniqueEmail('http');
  const created = await call('POST', '/auth/register', { name: 'Over HTTP', email, password: 'http password' });
  assert.equal(created.status, 201);
  const login = await call('POST', '/auth/login', { email, password: 'http password' });
  assert.equal(login.status, 200);
  const me = await call('GET', '/auth/me', undefined, bearer(login.body.data.token));
  assert.deepEqual(me.body.data, created.body.data);
  assert.ok(me.headers.get('x-request-id'));
  const missing = await call('GET', '/missing');
  assert.equal(missing.status, 404);
  assert.deepEqual(Object.keys(missing.body).sort(), ['message', 'response', 'status']);
  const badJson = await fetch(`${base}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"email":' });
  assert.equal(badJson.status, 400);
  assert.equal((await badJson.json()).status, 400);
});

test('the OpenAPI document lists the four routes with their response schemas', async () => {
  const app = await suite.app();
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
  assert.deepEqual(Object.keys(doc.paths as object).filter((p) => !['/healthz', '/readyz'].includes(p)).sort(), [
    '/admin/users',
    '/auth/login',
    '/auth/me',
    '/auth/register',
  ]);
  assert.ok(doc.paths['/auth/login'].post.responses['429']);
  assert.ok(doc.paths['/admin/users'].get.responses['403']);
  assert.ok(!JSON.stringify(doc).includes('password_hash'));
});

noSecretInAnyResponse();
