import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { uniqueIp } from './helpers/client-ips.js';
import { createCode, sharedShortener } from './helpers/shortener.js';

// The web pages as HTTP resources (what a browser is sent), without a browser:
// test/browser/ drives them in Chromium.

const PAGE_CSP =
  "default-src 'self';script-src 'self';style-src 'self';img-src 'self' data:;connect-src 'self';frame-ancestors 'none';base-uri 'none';form-action 'self'";

const ctx = sharedShortener();

describe('shortener web pages', () => {
  it('serves /, /admin, /links and the stats page of a link as HTML under the pages policy', async () => {
    const code = await createCode(ctx.app);
    for (const url of ['/', '/admin', '/links', '/links?tag=spring&q=sale', `/stats/${code}`]) {
      const res = await ctx.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(res.headers['content-security-policy'], PAGE_CSP, url);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.match(res.body, /^<!doctype html>\n<html lang="en">/);
      // No inline script or style: every script is a file, no style attribute anywhere.
      assert.doesNotMatch(res.body, /<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=/);
    }
  });

  it('an unknown, malformed or deleted code gets the not-found page with a 404', async () => {
    const code = await createCode(ctx.app);
    await ctx.pool.query('DELETE FROM links WHERE code = $1', [code]);
    for (const url of ['/stats/zzzzzzz', '/stats/..%2Fetc', '/stats/abc', `/stats/${code}`]) {
      const res = await ctx.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.match(res.body, /<h1>Link not found<\/h1>/, url);
    }
  });

  it('a dead short link: a browser gets a page saying why, an API client the envelope, and neither is stored', async () => {
    const browser = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8' };
    const [disabled, expired, exhausted] = [await createCode(ctx.app), await createCode(ctx.app), await createCode(ctx.app)];
    await ctx.pool.query('UPDATE links SET disabled = true WHERE code = $1', [disabled]);
    await ctx.pool.query("UPDATE links SET expires_at = '2026-01-31T23:59:00Z' WHERE code = $1", [expired]);
    await ctx.pool.query('UPDATE links SET max_visits = 3, clicks = 3 WHERE code = $1', [exhausted]);
    const cases: Array<[string, number, string, RegExp]> = [
      [disabled, 410, 'Link disabled', /has been disabled by the people who run this service, so it no longer leads anywhere\./],
      [expired, 410, 'Link expired', /expired on 31 January 2026 at 23:59 UTC, so it no longer leads anywhere\./],
      [exhausted, 410, 'Link used up', /allowed 3 visits, and all of them have been used/],
      ['zzzzzzz', 404, 'Link not found', /There is no short link with this code/],
      ['..%2Fetc', 404, 'Link not found', /There is no short link with this code/],
    ];
    for (const [code, status, title, words] of cases) {
      const page = await ctx.app.inject({ method: 'GET', url: `/${code}`, headers: browser });
      assert.equal(page.statusCode, status, code);
      assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(page.headers['cache-control'], 'no-store', code);
      assert.equal(page.headers['content-security-policy'], PAGE_CSP);
      assert.match(page.body, new RegExp(`<title>${title}</title>`));
      assert.match(page.body, new RegExp(`<h1>${title}</h1>`));
      assert.match(page.body, words);
      assert.doesNotMatch(page.body, /\{\{|<script/);
      // A HEAD from a browser: the same status and headers, no body.
      const head = await ctx.app.inject({ method: 'HEAD', url: `/${code}`, headers: browser });
      assert.equal(head.statusCode, status);
      assert.equal(head.headers['cache-control'], 'no-store');
      // An API client (no Accept, JSON, or anything): the contract's envelope, not stored either.
      for (const accept of [undefined, 'application/json', '*/*', 'application/json, text/html']) {
        const res = await ctx.app.inject({ method: 'GET', url: `/${code}`, headers: accept ? { accept } : {} });
        assert.equal(res.statusCode, status, `${code} ${accept}`);
        assert.match(String(res.headers['content-type']), /^application\/json/);
        assert.equal(res.headers['cache-control'], 'no-store', `${code} ${accept}`);
        assert.equal(res.json().status, status);
      }
    }
    // Enabled again, the same browser request is redirected: nothing above was cacheable.
    await ctx.pool.query('UPDATE links SET disabled = false WHERE code = $1', [disabled]);
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${disabled}`, headers: browser })).statusCode, 302);
  });

  it('serves the assets (uPlot from its package) with their types, and 304 when unchanged', async () => {
    const types: Record<string, RegExp> = {
      '/assets/style.css': /^text\/css/,
      '/assets/api.js': /^text\/javascript/,
      '/assets/icon.svg': /^image\/svg\+xml/,
      '/assets/shortener/create.js': /^text\/javascript/,
      '/assets/shortener/stats.js': /^text\/javascript/,
      '/assets/shortener/admin.js': /^text\/javascript/,
      '/assets/shortener/links.js': /^text\/javascript/,
      '/assets/shortener/link-words.js': /^text\/javascript/,
      '/assets/shortener/csv-file.js': /^text\/javascript/,
      '/assets/vendor/uPlot.esm.js': /^text\/javascript/,
      '/assets/vendor/uPlot.min.css': /^text\/css/,
    };
    for (const [url, type] of Object.entries(types)) {
      const res = await ctx.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.match(String(res.headers['content-type']), type, url);
      assert.equal(res.headers['cache-control'], 'no-cache');
      const again = await ctx.app.inject({ method: 'GET', url, headers: { 'if-none-match': String(res.headers.etag) } });
      assert.equal(again.statusCode, 304, url);
    }
    // Only the listed files: nothing else under /assets reaches the file system.
    for (const url of ['/assets/serve.ts', '/assets/../package.json', '/assets/shortener/index.html', '/assets/vendor/uPlot.cjs.js']) {
      assert.equal((await ctx.app.inject({ method: 'GET', url })).statusCode, 404, url);
    }
  });

  it('leaves the API as it was: its own policy, and the redirect still catches every code', async () => {
    const code = await createCode(ctx.app, 'https://example.com/web');
    const stats = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal(stats.statusCode, 200);
    assert.match(String(stats.headers['content-security-policy']), /^default-src 'none'/);
    const redirect = await ctx.app.inject({ method: 'GET', url: `/${code}` });
    assert.equal(redirect.statusCode, 302);
    assert.equal(redirect.headers.location, 'https://example.com/web');
    // The pages are out of the API document.
    const openapi = (await ctx.app.inject({ method: 'GET', url: '/docs/json' })).json() as { paths: Record<string, unknown> };
    for (const path of ['/', '/admin', '/links', '/stats/{code}', '/assets/style.css']) assert.equal(openapi.paths[path], undefined, path);
  });

  it('never issues the code of a page: a link with the back-half "links" would be hidden by the My links page', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/mine', alias: 'links' },
      remoteAddress: uniqueIp(),
    });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().message, 'alias "links" is reserved: it names a page of this service');
    assert.equal((await ctx.pool.query("SELECT count(*)::int AS n FROM links WHERE code = 'links'")).rows[0].n, 0);
    // Another case is another code, which the page does not hide.
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/Links' })).statusCode, 404);
  });
});
