// Security headers on every response of every service (successes, errors,
// 404s, the shortener's 302), the Swagger UI still loading under its own
// policy, HSTS only when configured; and credentials in query strings kept
// out of the logs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../src/kit/db.js';
import { type App, buildHttpApp } from '../src/kit/http/app.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { startAccounts } from './helpers/accounts.js';
import { freshDatabase, type TestDatabase } from './helpers/database.js';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { LogCapture, testLogLevel } from './helpers/logs.js';
import { startNotes } from './helpers/notes.js';
import { createCode, shortenerMigrations, withShortener } from './helpers/shortener.js';

type Headers = Record<string, string | string[] | number | undefined>;

/** The headers every response of every service carries. */
function assertSecurityHeaders(headers: Headers, what: string): void {
  assert.equal(headers['x-content-type-options'], 'nosniff', what);
  assert.equal(headers['referrer-policy'], 'strict-origin-when-cross-origin', what);
  assert.equal(headers['x-frame-options'], 'DENY', what);
  assert.equal(headers['cross-origin-resource-policy'], 'same-origin', what);
  assert.equal(headers['cross-origin-opener-policy'], 'same-origin', what);
  assert.equal(headers['origin-agent-cluster'], '?1', what);
  assert.equal(headers['x-dns-prefetch-control'], 'off', what);
  assert.equal(headers['x-download-options'], 'noopen', what);
  assert.equal(headers['x-permitted-cross-domain-policies'], 'none', what);
  assert.equal(headers['x-xss-protection'], '0', what);
  assert.equal(headers['cross-origin-embedder-policy'], undefined, `${what}: no COEP`);
  assert.equal(headers['strict-transport-security'], undefined, `${what}: no HSTS unless configured`);
  const csp = String(headers['content-security-policy']);
  assert.match(csp, /default-src 'none'/, what);
  assert.match(csp, /frame-ancestors 'none'/, what);
  assert.equal(headers['x-powered-by'], undefined, what);
}

let shortenerDb: TestDatabase;
let shortenerPool: Pool;
let idp: RunningIdp;

before(async () => {
  shortenerDb = await freshDatabase('shortener', await shortenerMigrations());
  shortenerPool = createPool(shortenerDb.url, { max: 4 });
  idp = await startIdp();
});

after(async () => {
  await shortenerPool.end();
  await shortenerDb.drop();
  await idp.close();
});

describe('security headers on every service', () => {
  it('shortener: on its 201, its 302 redirect, a 404 and an error', async () => {
    await withShortener({ pool: shortenerPool }, async (app) => {
      const created = await app.inject({
        method: 'POST',
        url: '/api/links',
        payload: { url: 'https://example.com/headers' },
        remoteAddress: '10.9.9.1',
      });
      assert.equal(created.statusCode, 201);
      assertSecurityHeaders(created.headers, 'shortener 201');
      const code = await createCode(app, 'https://example.com/redirected');
      const redirect = await app.inject({ method: 'GET', url: `/${code}` });
      // The redirect itself is untouched: status and Location as before.
      assert.equal(redirect.statusCode, 302);
      assert.equal(redirect.headers.location, 'https://example.com/redirected');
      assertSecurityHeaders(redirect.headers, 'shortener 302');
      assertSecurityHeaders((await app.inject({ method: 'GET', url: '/api/nothing/here' })).headers, 'shortener 404');
      const bad = await app.inject({ method: 'POST', url: '/api/links', headers: { 'content-type': 'application/json' }, payload: '{' });
      assert.equal(bad.statusCode, 400);
      assertSecurityHeaders(bad.headers, 'shortener 400');
    });
  });

  it('accounts: on health, a 401 and a 404', async () => {
    // Health, 401 and 404 need no table: the shortener's database serves.
    const { app, close } = await startAccounts({ pool: shortenerPool });
    try {
      assertSecurityHeaders((await app.inject({ method: 'GET', url: '/healthz' })).headers, 'accounts 200');
      const me = await app.inject({ method: 'GET', url: '/auth/me' });
      assert.equal(me.statusCode, 401);
      assertSecurityHeaders(me.headers, 'accounts 401');
      assertSecurityHeaders((await app.inject({ method: 'GET', url: '/nothing' })).headers, 'accounts 404');
    } finally {
      await close();
    }
  });

  it('notes: on health and a 401', async () => {
    const { app, close } = await startNotes({ idp });
    try {
      assertSecurityHeaders((await app.inject({ method: 'GET', url: '/healthz' })).headers, 'notes 200');
      const notes = await app.inject({ method: 'GET', url: '/notes' });
      assert.equal(notes.statusCode, 401);
      assertSecurityHeaders(notes.headers, 'notes 401');
    } finally {
      await close();
    }
  });

  it('idp: on its JWKS, GoTrue and PostgREST answers and errors, over real HTTP', async () => {
    const headersOf = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(`${idp.url}${path}`, init);
      await res.arrayBuffer();
      return { status: res.status, headers: Object.fromEntries(res.headers.entries()) };
    };
    const jwks = await headersOf('/auth/v1/.well-known/jwks.json');
    assert.equal(jwks.status, 200);
    assertSecurityHeaders(jwks.headers, 'idp jwks');
    const noKey = await headersOf('/rest/v1/notes');
    assert.equal(noKey.status, 401);
    assertSecurityHeaders(noKey.headers, 'idp gateway 401');
    const rest = await headersOf('/rest/v1/notes?select=id', { headers: { apikey: idp.secretKey } });
    assert.equal(rest.status, 200);
    assertSecurityHeaders(rest.headers, 'idp REST 200');
    const unknownTable = await headersOf('/rest/v1/no_such_table', { headers: { apikey: idp.secretKey } });
    assert.equal(unknownTable.status, 404);
    assertSecurityHeaders(unknownTable.headers, 'idp REST 404');
    const login = await headersOf('/auth/v1/token?grant_type=password', {
      method: 'POST',
      headers: { apikey: idp.publishableKey, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'nobody@example.com', password: 'wrong-password-1' }),
    });
    assert.equal(login.status, 400);
    assertSecurityHeaders(login.headers, 'idp GoTrue 400');
  });
});

describe('/docs under its own policy, HSTS only when configured', () => {
  async function kitApp(http: { hstsMaxAge?: number } = {}): Promise<App> {
    return buildHttpApp({ title: 'headers', logLevel: testLogLevel('silent'), errorBody: statusEnvelope, readiness: async () => {}, http });
  }

  it('the Swagger UI page loads: its policy allows its own scripts and styles, and every asset it names is served', async () => {
    const app = await kitApp();
    try {
      let res = await app.inject({ method: 'GET', url: '/docs' });
      for (let hops = 0; res.statusCode === 302 && hops < 3; hops++) {
        res = await app.inject({ method: 'GET', url: new URL(String(res.headers.location), 'http://x/docs/').pathname });
      }
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/html/);
      const csp = String(res.headers['content-security-policy']);
      assert.match(csp, /script-src 'self'/);
      // Swagger UI renders a <style> element: its styles may be inline (they were a console error), its scripts may not.
      assert.match(csp, /style-src 'self' 'unsafe-inline'(;|$)/);
      assert.match(csp, /script-src 'self'(;| )/);
      assert.doesNotMatch(csp, /script-src[^;]*unsafe-inline/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.doesNotMatch(csp, /default-src 'none'/, 'the API policy would block the UI');
      assert.doesNotMatch(csp, /upgrade-insecure-requests/, 'would send the asset requests of an http page to https');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      // Every script and stylesheet the page names is same-origin and served.
      const assets = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((a) => !a.startsWith('http'));
      assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')), `assets: ${assets}`);
      for (const asset of assets) {
        const path = new URL(asset, 'http://x/docs/static/index.html').pathname;
        const loaded = await app.inject({ method: 'GET', url: path });
        assert.equal(loaded.statusCode, 200, path);
      }
      assert.equal((await app.inject({ method: 'GET', url: '/docs/json' })).statusCode, 200);
    } finally {
      await app.close();
    }
  });

  it('no Strict-Transport-Security by default; HSTS_MAX_AGE turns it on', async () => {
    const plain = await kitApp();
    try {
      assert.equal((await plain.inject({ method: 'GET', url: '/healthz' })).headers['strict-transport-security'], undefined);
    } finally {
      await plain.close();
    }
    const hsts = await kitApp({ hstsMaxAge: 31_536_000 });
    try {
      for (const url of ['/healthz', '/nowhere']) {
        assert.equal((await hsts.inject({ method: 'GET', url })).headers['strict-transport-security'], 'max-age=31536000', url);
      }
    } finally {
      await hsts.close();
    }
    // Through the variable every service reads.
    await withShortener({ pool: shortenerPool, env: { HSTS_MAX_AGE: '600' } }, async (shortener) => {
      assert.equal((await shortener.inject({ method: 'GET', url: '/healthz' })).headers['strict-transport-security'], 'max-age=600');
    });
  });
});

describe('credentials in query strings never reach the logs', () => {
  const secrets = {
    apikey: 'sb_secret_query_9f8e7d6c5b4a',
    access_token: 'eyJhbGciOiJFUzI1NiJ9.query-token.sig',
    refresh_token: 'refresh-query-value-1234',
    token: 'plain-token-value-5678',
    password: 'query-password-hunter2',
    Api_Key: 'mixed-case-key-value',
    client_secret: 'client-secret-value-42',
    code: 'oauth-code-value-77',
    token_hash: 'b9ff5fd0bc57a17ad08b0ac641b158bcb17d46294818555628b31598',
    // A name with an escape is compared decoded (refresh_token).
    'refresh%5Ftoken': 'escaped-name-refresh-value',
  };
  const query = `?page=2&${Object.entries(secrets)
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
    .join('&')}&q=visible`;

  it('every logged URL has their values replaced by [redacted]; other parameters stay', async () => {
    const logs = new LogCapture();
    const app = await buildHttpApp({
      title: 'redact',
      logLevel: testLogLevel('info'),
      logStream: logs,
      errorBody: statusEnvelope,
      readiness: async () => {},
    });
    try {
      await app.inject({ method: 'GET', url: `/healthz${query}` });
      await app.inject({ method: 'GET', url: `/nowhere${query}` });
      const text = logs.text();
      for (const [name, value] of Object.entries(secrets)) {
        assert.ok(!text.includes(value) && !text.includes(encodeURIComponent(value)), `${name} leaked: ${text}`);
      }
      const urls = logs
        .lines()
        .filter((l) => l.msg === 'request completed')
        .map((l) => (l.req as { url: string }).url);
      assert.equal(urls.length, 2);
      for (const url of urls) {
        assert.match(url, /apikey=\[redacted\]/);
        assert.match(url, /Api_Key=\[redacted\]/);
        assert.match(url, /refresh%5Ftoken=\[redacted\]/);
        assert.match(url, /page=2/);
        assert.match(url, /q=visible/);
      }
    } finally {
      await app.close();
    }
  });

  it('a service (the shortener) logs its requests the same way', async () => {
    await withShortener({ pool: shortenerPool, env: { LOG_LEVEL: testLogLevel('info') } }, async (app, { logs }) => {
      await app.inject({ method: 'GET', url: `/api/links/nope${query}` });
      const text = logs.text();
      assert.ok(text.includes('[redacted]'), text);
      for (const value of Object.values(secrets)) assert.ok(!text.includes(value) && !text.includes(encodeURIComponent(value)), value);
    });
  });
});
