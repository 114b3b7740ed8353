// CORS on the idp over real HTTP: preflights answered before the key check, the headers a browser
// needs on actual answers (errors included), and the origin list of IDP_CORS_ORIGINS.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/kit/config.js';
import { idpConfig } from '../src/idp/config.js';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';

const SUPABASE_JS_HEADERS =
  'apikey, authorization, x-client-info, content-type, prefer, accept-profile, content-profile, x-supabase-api-version, range';

async function preflight(idp: RunningIdp, path: string, origin: string, headers = SUPABASE_JS_HEADERS, method = 'POST') {
  return fetch(`${idp.url}${path}`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });
}

describe('default: any origin, as the Supabase CLI gateway', () => {
  let idp: RunningIdp;
  before(async () => {
    idp = await startIdp();
  });
  after(async () => {
    await idp?.close();
  });

  test('a preflight needs no apikey and allows the methods and every header supabase-js sends', async () => {
    for (const path of ['/rest/v1/notes', '/auth/v1/token?grant_type=password', '/auth/v1/user', '/auth/v1/.well-known/jwks.json']) {
      const res = await preflight(idp, path, 'http://localhost:3000');
      assert.equal(res.status, 200, path);
      assert.equal(await res.text(), '');
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      assert.equal(res.headers.get('access-control-allow-methods'), 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
      assert.equal(res.headers.get('access-control-allow-headers'), SUPABASE_JS_HEADERS);
      assert.equal(res.headers.get('access-control-max-age'), '86400');
      assert.equal(res.headers.get('access-control-allow-credentials'), null, 'keys travel in headers; cookies are never allowed');
    }
  });

  test('requested header names are echoed only when they are header names, lower-cased and without repeats', async () => {
    const res = await preflight(idp, '/rest/v1/notes', 'http://a.test', 'Prefer, prefer, bad header, x-y;z, Accept-Profile');
    assert.equal(res.headers.get('access-control-allow-headers'), 'prefer, accept-profile');
    const many = await preflight(idp, '/rest/v1/notes', 'http://a.test', Array.from({ length: 65 }, (_, i) => `x-h${i}`).join(','));
    assert.equal(many.headers.get('access-control-allow-headers'), null);
  });

  test('actual answers name the origin and expose Content-Range and the others, errors included', async () => {
    const user = await createUser(idp, 'cors@example.com');
    const ok = await fetch(`${idp.url}/rest/v1/notes?select=id`, {
      headers: {
        origin: 'http://localhost:5173',
        apikey: idp.publishableKey,
        authorization: `Bearer ${user.token}`,
        prefer: 'count=exact',
      },
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), '*');
    const exposed = ok.headers.get('access-control-expose-headers') ?? '';
    for (const name of ['Content-Range', 'Range-Unit', 'Location', 'X-Total-Count', 'Link', 'X-Supabase-Api-Version', 'Content-Type']) {
      assert.ok(exposed.split(', ').includes(name), `${name} in ${exposed}`);
    }
    assert.equal(ok.headers.get('content-range'), '*/0');

    const noKey = await fetch(`${idp.url}/rest/v1/notes`, { headers: { origin: 'http://localhost:5173' } });
    assert.equal(noKey.status, 401);
    assert.equal(noKey.headers.get('access-control-allow-origin'), '*', 'a browser can read why it was refused');
    const missing = await fetch(`${idp.url}/nowhere`, { headers: { origin: 'http://localhost:5173' } });
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get('access-control-allow-origin'), '*');
  });

  test('without an Origin (not a browser) nothing CORS is added; an OPTIONS that is not a preflight is not answered as one', async () => {
    const res = await fetch(`${idp.url}/rest/v1/notes`, { headers: { apikey: idp.publishableKey } });
    assert.equal(res.headers.get('access-control-allow-origin'), null);
    const options = await fetch(`${idp.url}/rest/v1/notes`, { method: 'OPTIONS', headers: { apikey: idp.publishableKey } });
    assert.notEqual(options.status, 200);
    assert.equal(options.headers.get('access-control-allow-methods'), null);
  });
});

describe('IDP_CORS_ORIGINS: a list', () => {
  let idp: RunningIdp;
  before(async () => {
    idp = await startIdp({ env: { IDP_CORS_ORIGINS: 'http://localhost:3000, https://app.example.com' } });
  });
  after(async () => {
    await idp?.close();
  });

  test('a listed origin is named back, with Vary: Origin', async () => {
    const res = await preflight(idp, '/rest/v1/notes', 'https://app.example.com');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), 'https://app.example.com');
    assert.match(res.headers.get('vary') ?? '', /Origin/);
    const actual = await fetch(`${idp.url}/auth/v1/.well-known/jwks.json`, { headers: { origin: 'http://localhost:3000' } });
    assert.equal(actual.headers.get('access-control-allow-origin'), 'http://localhost:3000');
    assert.match(actual.headers.get('vary') ?? '', /Origin/);
  });

  test('any other origin gets no Access-Control-Allow-* at all (the browser refuses), and the request still is not served to it', async () => {
    for (const origin of ['https://evil.example', 'http://localhost:3001', 'https://app.example.com.evil.example', 'null']) {
      const res = await preflight(idp, '/rest/v1/notes', origin);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('access-control-allow-origin'), null, origin);
      assert.equal(res.headers.get('access-control-allow-headers'), null, origin);
      const actual = await fetch(`${idp.url}/auth/v1/.well-known/jwks.json`, { headers: { origin } });
      assert.equal(actual.headers.get('access-control-allow-origin'), null, origin);
      assert.equal(actual.headers.get('access-control-expose-headers'), null, origin);
    }
  });
});

test('IDP_CORS_ORIGINS: * or exact origins; anything else stops the start with a clear message', () => {
  const base = { IDP_PUBLISHABLE_KEY: 'sb_publishable_x', IDP_SECRET_KEY: 'sb_secret_x', DATABASE_URL: 'postgres://127.0.0.1/x' };
  const load = (value: string | undefined) => loadConfig(idpConfig, { ...base, IDP_CORS_ORIGINS: value }).IDP_CORS_ORIGINS;
  assert.equal(load(undefined), '*');
  assert.equal(load(' * '), '*');
  assert.deepEqual(
    load('http://localhost:3000,https://a.example.com:8443'),
    new Set(['http://localhost:3000', 'https://a.example.com:8443']),
  );
  for (const bad of [
    'localhost:3000',
    'http://localhost:3000/',
    'https://a.example.com/path',
    'ftp://a.example.com',
    'https://*.example.com',
    ',',
    'http://a.test, *',
  ]) {
    assert.throws(() => load(bad), /IDP_CORS_ORIGINS/, bad);
  }
});
