import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { App } from '../src/kit/http/app.js';
import { uniqueIp } from './helpers/client-ips.js';
import { fileDatabase, watchQueries } from './helpers/database.js';
import { assertEnvelope, createCode, shortenerDatabase, TEST_ADMIN_AUTH, TEST_ADMIN_KEY, withShortener } from './helpers/shortener.js';

// Custom back-halves: a code chosen at creation, in one namespace with the
// generated codes and the deleted ones.

const db = fileDatabase(shortenerDatabase, 25);
const withApp = <T>(fn: (app: App) => Promise<T>) => withShortener({ pool: db.pool, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } }, fn);

const createAlias = (app: App, alias: unknown, url = 'https://example.com/aliased') =>
  app.inject({ method: 'POST', url: '/api/links', payload: { url, alias }, remoteAddress: uniqueIp() });

const countCode = async (code: string) =>
  (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links WHERE code = $1', [code])).rows[0]!.n;

describe('custom back-halves', () => {
  it("a chosen code is the link's code: short_url, redirect and stats use it", async () => {
    await withApp(async (app) => {
      const res = await createAlias(app, 'spring-sale_2027', 'https://example.com/sale');
      assert.equal(res.statusCode, 201, res.body);
      const data = (res.json() as { data: { code: string; short_url: string } }).data;
      assert.equal(data.code, 'spring-sale_2027');
      assert.equal(data.short_url, 'https://sho.rt/spring-sale_2027');
      const hop = await app.inject({ method: 'GET', url: '/spring-sale_2027' });
      assert.equal(hop.statusCode, 302);
      assert.equal(hop.headers.location, 'https://example.com/sale');
      const stats = await app.inject({ method: 'GET', url: '/api/links/spring-sale_2027' });
      assert.equal((stats.json() as { data: { clicks: number } }).data.clicks, 1);
      for (const alias of ['abc', 'x'.repeat(64), 'A-b_C']) assert.equal((await createAlias(app, alias)).statusCode, 201, alias);
    });
  });

  it('codes are case-sensitive: Launch and launch are two links', async () => {
    await withApp(async (app) => {
      assert.equal((await createAlias(app, 'Launch', 'https://example.com/upper')).statusCode, 201);
      assert.equal((await createAlias(app, 'launch', 'https://example.com/lower')).statusCode, 201);
      assert.equal((await app.inject({ method: 'GET', url: '/Launch' })).headers.location, 'https://example.com/upper');
      assert.equal((await app.inject({ method: 'GET', url: '/launch' })).headers.location, 'https://example.com/lower');
      assert.equal((await app.inject({ method: 'GET', url: '/LAUNCH' })).statusCode, 404);
    });
  });

  it('a malformed or reserved alias is a 400 and creates nothing', async () => {
    await withApp(async (app) => {
      for (const alias of ['ab', 'x'.repeat(65), 'a b c', 'a.b.c', 'abc/def', 'caf\u00e9', '../etc', '']) {
        const res = await createAlias(app, alias);
        assert.equal(res.statusCode, 400, alias);
        assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), /alias/);
      }
      for (const alias of ['admin', 'Admin-page', 'api', 'stats', 'STATS-x', 'assets', 'docs', 'healthz', 'metrics', 'readyz']) {
        const res = await createAlias(app, alias);
        assert.equal(res.statusCode, 400, alias);
        assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), /reserved/);
        assert.equal(await countCode(alias), 0);
      }
      assert.equal((await createAlias(app, 42)).statusCode, 400);
    });
  });

  it('never a live, generated or deleted code: 409, and the existing link is untouched', async () => {
    await withApp(async (app) => {
      const generated = await createCode(app, 'https://example.com/generated');
      const taken = await createAlias(app, generated, 'https://example.com/thief');
      assert.equal(taken.statusCode, 409);
      assert.match(assertEnvelope(taken.json(), 409, 'Conflict'), /is taken/);
      assert.equal((await app.inject({ method: 'GET', url: `/${generated}` })).headers.location, 'https://example.com/generated');
      assert.equal((await createAlias(app, 'gone-soon')).statusCode, 201);
      assert.equal((await app.inject({ method: 'DELETE', url: '/api/links/gone-soon', headers: TEST_ADMIN_AUTH })).statusCode, 200);
      const reused = await createAlias(app, 'gone-soon', 'https://example.com/new-owner');
      assert.equal(reused.statusCode, 409);
      assert.equal(await countCode('gone-soon'), 0);
    });
  });

  it('20 concurrent creates of one alias: exactly one 201, nineteen 409', async () => {
    await withApp(async (app) => {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => createAlias(app, 'race-for-it', `https://example.com/racer/${i}`)),
      );
      const statuses = results.map((r) => r.statusCode).sort();
      assert.deepEqual(statuses, [201, ...Array(19).fill(409)]);
      assert.equal(await countCode('race-for-it'), 1);
      const winner = results.find((r) => r.statusCode === 201)!;
      const url = (winner.json() as { data: { original_url: string } }).data.original_url;
      assert.equal((await app.inject({ method: 'GET', url: '/race-for-it' })).headers.location, url);
    });
  });

  it('outside 3-64 of A-Z a-z 0-9 _ -, a code is still a 404 without any query', async () => {
    await withApp(async (app) => {
      const watch = watchQueries(db.pool);
      try {
        for (const path of ['/ab', `/${'x'.repeat(65)}`, '/..%2Fetc', '/abc.def', '/abc%20def', '/api/links/ab', '/api/links/a.b.c']) {
          assert.equal((await app.inject({ method: 'GET', url: path })).statusCode, 404, path);
        }
      } finally {
        watch.stop();
      }
      assert.deepEqual(watch.queries, []);
    });
  });
});
