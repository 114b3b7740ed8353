// Metrics of notes (its requests to the idp by endpoint kind and outcome) and
// of the idp (its two pools), both on real HTTP against a real idp.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { idpEndpointKind } from '../src/notes/idp-metrics.js';
import { labelValues, sampleValue } from './helpers/metrics.js';
import { PASSWORD, signUp, startNotes, startUpstream, sharedNotes } from './helpers/notes.js';
import { request } from './helpers/http.js';
import { closedPort } from './helpers/ports.js';

const ctx = sharedNotes();

async function metricsOf(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

const idpCalls = (text: string, kind: string, outcome: string) => sampleValue(text, 'notes_idp_requests_total', { kind, outcome }) ?? 0;

test('the endpoint kind comes from a fixed list, never from the path itself', () => {
  const base = 'http://127.0.0.1:54321';
  assert.equal(idpEndpointKind(`${base}/auth/v1/user`), 'auth_user');
  assert.equal(idpEndpointKind(`${base}/auth/v1/token?grant_type=password`), 'auth_token');
  assert.equal(idpEndpointKind(`${base}/auth/v1/signup`), 'auth_signup');
  assert.equal(idpEndpointKind(`${base}/auth/v1/logout`), 'auth_logout');
  assert.equal(idpEndpointKind(`${base}/auth/v1/.well-known/jwks.json`), 'jwks');
  assert.equal(idpEndpointKind(`${base}/auth/v1/admin/users/5f1c0d1e-0000-4000-8000-000000000000`), 'auth_other');
  assert.equal(idpEndpointKind(`${base}/rest/v1/notes?id=eq.42&user_id=eq.someone`), 'rest');
  assert.equal(idpEndpointKind(`${base}/somewhere/else`), 'other');
});

test('notes counts its idp requests by kind and outcome; no email, user id, token or note appears in the exposition', async () => {
  const user = await signUp(ctx.notes.url, 'metrics-distinctive');
  const created = await request(ctx.notes.url, 'POST', '/notes', { token: user.token, body: { title: 'a distinctive title' } });
  assert.equal(created.status, 201);
  assert.equal((await request(ctx.notes.url, 'GET', '/notes', { token: user.token })).status, 200);
  assert.equal(
    (await request(ctx.notes.url, 'POST', '/auth/login', { body: { email: user.email, password: `${PASSWORD}-wrong` } })).status,
    401,
  );

  const text = await metricsOf(ctx.notes.url);
  assert.equal(idpCalls(text, 'auth_signup', 'ok'), 1);
  assert.equal(idpCalls(text, 'auth_token', 'ok'), 1);
  assert.equal(idpCalls(text, 'auth_token', '4xx'), 1);
  assert.ok(idpCalls(text, 'auth_user', 'ok') >= 1);
  assert.ok(idpCalls(text, 'rest', 'ok') >= 2);
  assert.ok(sampleValue(text, 'notes_idp_request_duration_seconds_count', { kind: 'rest' })! >= 2);
  // Notes has no database of its own, so no pool figures.
  assert.ok(!text.includes('db_pool_connections'));

  for (const value of [
    user.email,
    user.id,
    user.token.split('.')[2]!,
    'a distinctive title',
    'metrics-distinctive',
    String(created.body.id),
  ].filter((v) => v.length > 2)) {
    assert.ok(!text.includes(value), `${value} appears in the exposition`);
  }
  for (const value of labelValues(text).filter((v) => v.startsWith('/'))) assert.doesNotMatch(value, /\d{3,}|@/, `route label ${value}`);
});

test('an idp answering 5xx, hanging past the timeout, or unreachable: counted as 5xx, timeout and error', async () => {
  let answer: 'fail' | 'hang' = 'fail';
  const upstream = await startUpstream(ctx.idp.url, (_method, path) => {
    if (!path.startsWith('/rest/v1/')) return 'forward';
    return answer === 'fail' ? { status: 500, body: { message: 'upstream broke' } } : 'hang';
  });
  const user = await signUp(ctx.notes.url, 'metrics-outage');
  const viaStub = await startNotes({ idp: { ...ctx.idp, url: upstream.url }, env: { IDP_VERIFY: 'local', IDP_TIMEOUT_MS: '300' } });
  const unreachable = await startNotes({ idp: { ...ctx.idp, url: `http://127.0.0.1:${await closedPort()}` } });
  try {
    // The store's own 500 passes through as a 500.
    assert.equal((await request(viaStub.url, 'GET', '/notes', { token: user.token })).status, 500);
    answer = 'hang';
    assert.equal((await request(viaStub.url, 'GET', '/notes', { token: user.token })).status, 503);
    const text = await metricsOf(viaStub.url);
    assert.equal(idpCalls(text, 'rest', '5xx'), 1);
    assert.equal(idpCalls(text, 'rest', 'timeout'), 1);
    assert.equal(idpCalls(text, 'jwks', 'ok'), 1);
    assert.equal(sampleValue(text, 'http_request_duration_seconds_count', { method: 'GET', route: '/notes', status_class: '5xx' }), 2);

    assert.equal((await request(unreachable.url, 'GET', '/notes', { token: user.token })).status, 503);
    assert.ok(idpCalls(await metricsOf(unreachable.url), 'auth_user', 'error') >= 1);
  } finally {
    await viaStub.close();
    await unreachable.close();
    await upstream.close();
  }
});

test('the idp reports both of its pools and labels its routes by template', async () => {
  const user = await signUp(ctx.notes.url, 'metrics-idp');
  assert.equal((await request(ctx.notes.url, 'GET', '/notes', { token: user.token })).status, 200);
  const text = await metricsOf(ctx.idp.url);
  for (const pool of ['auth', 'rest']) {
    assert.ok(sampleValue(text, 'db_pool_connections', { pool, state: 'idle' }) !== undefined, `${pool} pool idle`);
    assert.ok(sampleValue(text, 'db_pool_connections', { pool, state: 'in_use' }) !== undefined, `${pool} pool in use`);
    assert.equal(sampleValue(text, 'db_pool_waiting_requests', { pool }), 0);
  }
  assert.ok(
    sampleValue(text, 'http_request_duration_seconds_count', { method: 'GET', route: '/rest/v1/:table', status_class: '2xx' })! >= 1,
  );
  assert.ok(
    sampleValue(text, 'http_request_duration_seconds_count', { method: 'POST', route: '/auth/v1/signup', status_class: '2xx' })! >= 1,
  );
  for (const value of [user.email, user.id]) assert.ok(!text.includes(value), `${value} appears in the idp's exposition`);
  // The idp's /metrics is protected like every service's.
  assert.equal((await fetch(`${ctx.idp.url}/metrics`, { headers: { 'x-forwarded-for': '198.51.100.9' } })).status, 404);
});
