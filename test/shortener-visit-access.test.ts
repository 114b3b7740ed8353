import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import type { App } from '../src/kit/http/app.js';
import { fileDatabase, watchQueries } from './helpers/database.js';
import { assertEnvelope, createLink, shortenerDatabase, TEST_ADMIN_AUTH, TEST_ADMIN_KEY, withShortener } from './helpers/shortener.js';

// Visit detail (hours, referrer hosts, devices) tells when and from where the
// one person a link was sent to clicked it: only the link's manager reads it.
// The public stats stay the contract's.

const db = fileDatabase(shortenerDatabase);

const withApp = <T>(fn: (app: App) => Promise<T>, env: Record<string, string> = { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY }) =>
  withShortener({ pool: db.pool, env }, fn);

async function created(app: App, url = 'https://example.com/private'): Promise<{ code: string; token: string }> {
  const res = await createLink(app, url);
  assert.equal(res.status, 201);
  const data = res.body.data as { code: string; manage_token: string };
  return { code: data.code, token: data.manage_token };
}

const visitsOf = (app: App, code: string, authorization?: string) =>
  app.inject({ method: 'GET', url: `/api/links/${code}/visits`, headers: authorization === undefined ? {} : { authorization } });

/** The token with its last character changed: the right shape, the wrong value. */
const nearMiss = (token: string) => `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;

describe('who reads visit detail', () => {
  it('a create returns a fresh manage token, shown once and stored only as its SHA-256', async () => {
    await withApp(async (app) => {
      const a = await created(app);
      const b = await created(app);
      assert.match(a.token, /^[A-Za-z0-9_-]{43}$/);
      assert.notEqual(a.token, b.token);
      const { rows } = await db.pool.query<{ manage_token_hash: Buffer }>('SELECT manage_token_hash FROM links WHERE code = $1', [a.code]);
      assert.deepEqual(rows[0]!.manage_token_hash, crypto.createHash('sha256').update(a.token).digest());
      const stats = await app.inject({ method: 'GET', url: `/api/links/${a.code}` });
      assert.ok(!stats.body.includes(a.token));
    });
  });

  it('without credentials, or with text shaped like none: 401 with WWW-Authenticate, before any database query', async () => {
    await withApp(async (app) => {
      const { code, token } = await created(app);
      const watch = watchQueries(db.pool);
      try {
        const res = await visitsOf(app, code);
        assert.equal(res.statusCode, 401);
        assert.equal(res.headers['www-authenticate'], 'Bearer');
        assert.match(assertEnvelope(res.json(), 401, 'Unauthorized'), /manage token of the link/);
        for (const authorization of [
          '',
          'Bearer ',
          'Basic abc',
          TEST_ADMIN_KEY,
          `Bearer ${token}x`,
          `Bearer ${token.slice(1)}`,
          `Bearer ${TEST_ADMIN_KEY}x`,
          `Bearer ${TEST_ADMIN_KEY.slice(1)}`,
        ]) {
          const refused = await visitsOf(app, code, authorization);
          assert.equal(refused.statusCode, 401, authorization);
          assert.equal(refused.headers['www-authenticate'], 'Bearer');
        }
      } finally {
        watch.stop();
      }
      assert.deepEqual(watch.queries, []);
    });
  });

  it("another link's token, a made-up one or a near miss: 403, nothing shown", async () => {
    await withApp(async (app) => {
      const mine = await created(app, 'https://example.com/mine');
      const theirs = await created(app, 'https://example.com/theirs');
      for (const bearer of [theirs.token, 'x'.repeat(43), nearMiss(mine.token)]) {
        const res = await visitsOf(app, mine.code, `Bearer ${bearer}`);
        assert.equal(res.statusCode, 403, bearer);
        assert.match(assertEnvelope(res.json(), 403, 'Forbidden'), /do not manage this link/);
      }
    });
  });

  it("the link's own manage token and the admin key read the visits", async () => {
    await withApp(async (app) => {
      const { code, token } = await created(app);
      assert.equal((await app.inject({ method: 'GET', url: `/${code}`, remoteAddress: '203.0.113.7' })).statusCode, 302);
      for (const authorization of [`Bearer ${token}`, `bearer ${token}`, TEST_ADMIN_AUTH.authorization]) {
        const res = await visitsOf(app, code, authorization);
        assert.equal(res.statusCode, 200, authorization);
        assert.equal((res.json() as { data: { totals: { visits: number } } }).data.totals.visits, 1);
      }
    });
  });

  it('public stats stay open and the contract’s, with no visit detail', async () => {
    await withApp(async (app) => {
      const { code } = await created(app, 'https://example.com/public');
      await app.inject({ method: 'GET', url: `/${code}`, headers: { referer: 'https://intranet.corp/x' } });
      const res = await app.inject({ method: 'GET', url: `/api/links/${code}` });
      assert.equal(res.statusCode, 200);
      const data = (res.json() as { data: Record<string, unknown> }).data;
      assert.deepEqual(Object.keys(data).sort(), ['clicks', 'code', 'createdAt', 'original_url', 'state']);
      assert.equal(data.clicks, 1);
      assert.ok(!res.body.includes('intranet'));
    });
  });

  it('a link from before manage tokens: the admin key only', async () => {
    await withApp(async (app) => {
      const { code } = await created(app);
      await db.pool.query('UPDATE links SET manage_token_hash = NULL WHERE code = $1', [code]);
      assert.equal((await visitsOf(app, code, `Bearer ${'A'.repeat(43)}`)).statusCode, 403);
      assert.equal((await visitsOf(app, code, TEST_ADMIN_AUTH.authorization)).statusCode, 200);
    });
  });

  it('without SHORTENER_ADMIN_KEY a manage token still works, and no bearer becomes the admin', async () => {
    await withApp(async (app) => {
      const { code, token } = await created(app);
      assert.equal((await visitsOf(app, code, `Bearer ${token}`)).statusCode, 200);
      assert.equal((await visitsOf(app, code, 'Bearer undefined')).statusCode, 401);
      assert.equal((await visitsOf(app, code)).statusCode, 401);
    }, {});
  });

  it('credentials first, then the code: a malformed code is 404 without a query, an unknown one 404', async () => {
    await withApp(async (app) => {
      const watch = watchQueries(db.pool);
      try {
        for (const code of ['ab', '../etc', 'a.b.c']) {
          assert.equal((await visitsOf(app, encodeURIComponent(code), TEST_ADMIN_AUTH.authorization)).statusCode, 404);
          assert.equal((await visitsOf(app, encodeURIComponent(code))).statusCode, 401);
        }
      } finally {
        watch.stop();
      }
      assert.deepEqual(watch.queries, []);
      assert.equal((await visitsOf(app, 'zzzzzzz', TEST_ADMIN_AUTH.authorization)).statusCode, 404);
    });
  });
});
