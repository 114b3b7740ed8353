import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installAccountsMetrics } from '../src/accounts/metrics.js';
import { LOGIN_FAILURE_LIMITS } from '../src/accounts/login-throttle.js';
import { PasswordHasher } from '../src/kit/password-hasher.js';
import { buildHttpApp } from '../src/kit/http/app.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { MemoryCounterStore } from '../src/kit/rate-limit.js';
import { accountsLoginKeys, accountsSuite, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { labelValues, sampleValue, scrape } from './helpers/metrics.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const PASSWORD = 'the right password';

test('a password change refused by the login limiter counts as a login_throttle refusal', async () => {
  const store = new MemoryCounterStore();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { deps: { loginCounterStore: store } });
  const email = uniqueEmail('metrics-password');
  await registerUser(app, { name: 'Metrics Person', email, password: PASSWORD });
  const ip = '198.51.100.25';
  const login = await json(app, 'POST', '/auth/login', { email, password: PASSWORD }, { 'x-forwarded-for': ip });
  await store.hit(accountsLoginKeys(email, ip).pair, LOGIN_FAILURE_LIMITS.windowMs, LOGIN_FAILURE_LIMITS.perAccountAndAddress);
  const change = await json(
    app,
    'POST',
    '/auth/password',
    { current_password: PASSWORD, new_password: 'a new password 2' },
    {
      'x-forwarded-for': ip,
      authorization: `Bearer ${login.json().data.token}`,
    },
  );
  assert.equal(change.statusCode, 429, change.body);
  const text = await scrape(app);
  assert.equal(sampleValue(text, 'rate_limited_requests_total', { limiter: 'login_throttle' }), 1);
  assert.equal(sampleValue(text, 'accounts_login_failures_total'), 0);
});

test('login failures and throttles are counted; no email, address or user id appears in the exposition', async () => {
  const store = new MemoryCounterStore();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { deps: { loginCounterStore: store } });
  const email = uniqueEmail('metrics-distinctive');
  const user = await registerUser(app, { name: 'Metrics Person', email, password: PASSWORD });
  const ip = '198.51.100.23';
  const login = (address: string, password: string, from = ip) =>
    json(app, 'POST', '/auth/login', { email: address, password }, { 'x-forwarded-for': from });

  assert.equal((await login(email, 'wrong password')).statusCode, 401);
  assert.equal((await login(email, 'another wrong one')).statusCode, 401);
  assert.equal((await login(uniqueEmail('metrics-unknown'), PASSWORD)).statusCode, 401);
  assert.equal((await login(email, PASSWORD)).statusCode, 200);
  // An account at its failure limit: refused before any bcrypt work.
  const locked = uniqueEmail('metrics-locked');
  await store.hit(accountsLoginKeys(locked, ip).account, LOGIN_FAILURE_LIMITS.windowMs, LOGIN_FAILURE_LIMITS.perAccount);
  assert.equal((await login(locked, PASSWORD, '198.51.100.24')).statusCode, 429);

  const text = await scrape(app);
  assert.equal(sampleValue(text, 'accounts_login_failures_total'), 3);
  assert.equal(sampleValue(text, 'rate_limited_requests_total', { limiter: 'login_throttle' }), 1);
  assert.equal(sampleValue(text, 'http_request_duration_seconds_count', { method: 'POST', route: '/auth/login', status_class: '4xx' }), 4);
  assert.equal(sampleValue(text, 'http_request_duration_seconds_count', { method: 'POST', route: '/auth/login', status_class: '2xx' }), 1);
  // One hash at registration and four comparisons went through this app's hasher.
  assert.ok(sampleValue(text, 'accounts_bcrypt_wait_seconds_count')! >= 5);
  assert.equal(sampleValue(text, 'accounts_bcrypt_jobs', { state: 'queued' }), 0);
  assert.equal(sampleValue(text, 'accounts_bcrypt_jobs', { state: 'running' }), 0);
  assert.equal(sampleValue(text, 'db_pool_waiting_requests', { pool: 'main' }), 0);

  for (const value of [email, locked, 'metrics-', ip, '198.51.100.24', user.id, 'example.com']) {
    assert.ok(!text.includes(value), `${value} appears in the exposition`);
  }
  for (const value of labelValues(text).filter((v) => v.startsWith('/'))) {
    assert.ok(['/auth/register', '/auth/login', '/metrics'].includes(value), `route label ${value}`);
  }
});

test('the bcrypt gauges read the queue of the hasher when scraped, and each job reports its wait', async () => {
  const app = await buildHttpApp({ title: 'test', logLevel: 'silent', errorBody: statusEnvelope, readiness: async () => {} });
  // One worker, so jobs beyond the first queue.
  const hasher = new PasswordHasher({ cost: 12, workers: 1 });
  try {
    installAccountsMetrics(app, hasher);
    const jobs = [hasher.hash('one password'), hasher.hash('two password'), hasher.hash('three password')];
    let text = await scrape(app);
    assert.equal(sampleValue(text, 'accounts_bcrypt_jobs', { state: 'running' }), 1);
    assert.equal(sampleValue(text, 'accounts_bcrypt_jobs', { state: 'queued' }), 2);
    await Promise.all(jobs);
    text = await scrape(app);
    assert.equal(sampleValue(text, 'accounts_bcrypt_jobs', { state: 'running' }), 0);
    assert.equal(sampleValue(text, 'accounts_bcrypt_jobs', { state: 'queued' }), 0);
    assert.equal(sampleValue(text, 'accounts_bcrypt_wait_seconds_count'), 3);
    // The third job waited for the two before it, each a cost-12 hash.
    assert.ok(sampleValue(text, 'accounts_bcrypt_wait_seconds_sum')! > 0);
  } finally {
    await app.close();
    await hasher.close();
  }
});

noSecretInAnyResponse();
