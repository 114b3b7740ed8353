import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createPool } from '../src/kit/db.js';
import type { App } from '../src/kit/http/app.js';
import { CREATE_LIMIT } from '../src/shortener/app.js';
import { labelValues, sampleValue, scrape } from './helpers/metrics.js';
import { clicksOf, createCode, createLink, shortenerDatabase, type ShortenerOptions, withShortener } from './helpers/shortener.js';
import { fileDatabase } from './helpers/database.js';

const db = fileDatabase(shortenerDatabase, 5);

const withApp = <T>(fn: (app: App) => Promise<T>, options: ShortenerOptions = {}) => withShortener({ pool: db.pool, ...options }, fn);

const redirects = (text: string, outcome: string) => sampleValue(text, 'shortener_redirects_total', { outcome });

describe('shortener metrics', () => {
  it('count redirects by outcome, click batches, create refusals; label only route templates, never codes, URLs or addresses', async () => {
    await withApp(async (app) => {
      const limitedIp = '198.51.100.77';
      const codes = [
        await createCode(app, 'https://example.com/distinctive-target-a1'),
        await createCode(app, 'https://example.com/distinctive-target-b2'),
      ];
      // Concurrent visits share click batches; the batches add up to every visit.
      const visits = 24;
      const answers = await Promise.all(
        Array.from({ length: visits }, (_, i) => app.inject({ method: 'GET', url: `/${codes[i % 2]}`, remoteAddress: `192.0.2.${i + 1}` })),
      );
      assert.ok(answers.every((r) => r.statusCode === 302));
      assert.equal((await app.inject({ method: 'GET', url: '/Qq0Ww9E' })).statusCode, 404);
      assert.equal((await app.inject({ method: 'GET', url: '/zz.bad' })).statusCode, 404);
      // A HEAD is a look, not a visit.
      assert.equal((await app.inject({ method: 'HEAD', url: `/${codes[0]}` })).statusCode, 302);
      for (let i = 0; i <= CREATE_LIMIT.max; i++) await createLink(app, 'https://example.com/limited', limitedIp);
      assert.equal((await createLink(app, 'https://example.com/limited', limitedIp)).status, 429);

      const text = await scrape(app);
      assert.equal(redirects(text, 'redirected'), visits);
      assert.equal(redirects(text, 'not_found'), 1);
      assert.equal(redirects(text, 'malformed'), 1);
      assert.equal(sampleValue(text, 'rate_limited_requests_total', { limiter: 'shortener_create' }), 2);
      // The unknown well-formed code went through the counter too (its UPDATE matched no row).
      assert.equal(sampleValue(text, 'shortener_click_batch_size_sum'), visits + 1);
      const batches = sampleValue(text, 'shortener_click_batch_size_count')!;
      assert.ok(batches >= 1 && batches <= visits + 1, String(batches));
      assert.equal(
        sampleValue(text, 'http_request_duration_seconds_count', { method: 'GET', route: '/:code', status_class: '3xx' }),
        visits,
      );
      assert.equal(
        sampleValue(text, 'http_request_duration_seconds_count', { method: 'POST', route: '/api/links', status_class: '4xx' }),
        2,
      );
      assert.ok(sampleValue(text, 'db_pool_connections', { pool: 'main', state: 'idle' })! >= 1);
      assert.equal(sampleValue(text, 'db_pool_waiting_requests', { pool: 'main' }), 0);

      const forbidden = [...codes, 'Qq0Ww9E', 'zz-bad', limitedIp, '192.0.2.', 'distinctive-target', 'example.com'];
      for (const value of forbidden) assert.ok(!text.includes(value), `${value} appears in the exposition`);
      const allowed = new Set(['/:code', '/api/links', '/api/links/:code', '/metrics', '/healthz', '/readyz', 'unmatched']);
      for (const value of labelValues(text).filter((v) => v.startsWith('/'))) assert.ok(allowed.has(value), `route label ${value}`);
    });
  });

  it('counts a redirect refused while the database is down as unavailable', async () => {
    const deadPool = createPool('postgres://postgres@127.0.0.1:1/none', { connectionTimeoutMillis: 500 });
    try {
      await withApp(
        async (app) => {
          assert.equal((await app.inject({ method: 'GET', url: '/abcdefg' })).statusCode, 503);
          const text = await scrape(app);
          assert.equal(redirects(text, 'unavailable'), 1);
          assert.equal(sampleValue(text, 'db_pool_connections', { pool: 'main', state: 'in_use' }), 0);
        },
        { pool: deadPool },
      );
    } finally {
      await deadPool.end();
    }
  });

  it('GET /metrics is the metrics route, never a redirect, even when a link with that code exists', async () => {
    // Written past the service, as an older release without the route might have.
    await db.pool.query("INSERT INTO links (code, original_url) VALUES ('metrics', 'https://example.com/should-not-redirect')");
    try {
      await withApp(async (app) => {
        const res = await app.inject({ method: 'GET', url: '/metrics' });
        assert.equal(res.statusCode, 200);
        assert.match(String(res.headers['content-type']), /^text\/plain/);
        assert.equal(res.headers.location, undefined);
        assert.equal(redirects(res.body, 'redirected'), 0);
        assert.equal(await clicksOf(db.pool, 'metrics'), 0);
      });
      await withApp(
        async (app) => {
          // Protected: refused, and still not a redirect nor "Link not found".
          const res = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.5' });
          assert.equal(res.statusCode, 401);
          assert.equal(res.headers.location, undefined);
          const ok = await app.inject({
            method: 'GET',
            url: '/metrics',
            remoteAddress: '203.0.113.5',
            headers: { authorization: 'Bearer shortener-metrics-token-42' },
          });
          assert.equal(ok.statusCode, 200);
        },
        { env: { METRICS_TOKEN: 'shortener-metrics-token-42' } },
      );
    } finally {
      await db.pool.query("DELETE FROM links WHERE code = 'metrics'");
    }
  });
});
