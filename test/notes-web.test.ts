// The notes web app as HTTP resources (what a browser is sent), without a
// browser: test/browser/notes-web.test.ts drives the pages in Chromium.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sharedNotes } from './helpers/notes.js';

const PAGE_CSP =
  "default-src 'self';script-src 'self';style-src 'self';img-src 'self' data:;connect-src 'self';frame-ancestors 'none';base-uri 'none';form-action 'self'";

const ctx = sharedNotes();

describe('notes web pages', () => {
  test('serves /, /forgot-password and /reset-password as HTML under the pages policy, with no inline script or style', async () => {
    for (const [url, h1] of [
      ['/', 'Your private notes'],
      ['/forgot-password', 'Forgot your password?'],
      ['/reset-password', 'Choose a new password'],
    ] as const) {
      const res = await ctx.notes.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8', url);
      assert.equal(res.headers['content-security-policy'], PAGE_CSP, url);
      assert.equal(res.headers['x-frame-options'], 'DENY', url);
      assert.equal(res.headers['cache-control'], 'no-cache', url);
      assert.match(res.body, /^<!doctype html>\n<html lang="en">/, url);
      assert.match(res.body, new RegExp(`<h1[^>]*>${h1.replace('?', '\\?')}</h1>`), url);
      assert.doesNotMatch(res.body, /<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=/, url);
      // Every script and stylesheet the page names is one the service serves.
      for (const [, asset] of res.body.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)) {
        assert.equal((await ctx.notes.app.inject({ method: 'GET', url: asset! })).statusCode, 200, `${url} → ${asset}`);
      }
    }
  });

  test('serves the assets with their types, and 304 when unchanged', async () => {
    const types: Record<string, RegExp> = {
      '/assets/style.css': /^text\/css/,
      '/assets/api.js': /^text\/javascript/,
      '/assets/icon.svg': /^image\/svg\+xml/,
      '/assets/notes/session.js': /^text\/javascript/,
      '/assets/notes/notes.js': /^text\/javascript/,
      '/assets/notes/forgot-password.js': /^text\/javascript/,
      '/assets/notes/reset-password.js': /^text\/javascript/,
    };
    for (const [url, type] of Object.entries(types)) {
      const res = await ctx.notes.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.match(String(res.headers['content-type']), type, url);
      assert.equal(res.headers['cache-control'], 'no-cache', url);
      const again = await ctx.notes.app.inject({ method: 'GET', url, headers: { 'if-none-match': String(res.headers.etag) } });
      assert.equal(again.statusCode, 304, url);
      assert.equal(again.body, '', url);
    }
  });

  test("anything else is the API's JSON 404: no other file is reachable", async () => {
    for (const url of [
      '/assets/notes/index.html',
      '/assets/notes/../../app.ts',
      '/assets/notes/%2e%2e%2fapp.ts',
      '/assets/serve.ts',
      '/assets/../package.json',
      '/index.html',
      '/reset-password/x',
      '/forgot-password.html',
    ]) {
      const res = await ctx.notes.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.match(String(res.headers['content-type']), /^application\/json/, url);
      assert.match(String(res.headers['content-security-policy']), /^default-src 'none'/, url);
      assert.deepEqual(Object.keys(res.json()), ['message'], url);
    }
    // Pages are read-only.
    for (const method of ['POST', 'PUT', 'DELETE'] as const) {
      assert.equal((await ctx.notes.app.inject({ method, url: '/' })).statusCode, 404, method);
    }
  });

  test('leaves the API as it was: its own policy, its refusals, and the pages out of its document', async () => {
    const list = await fetch(`${ctx.notes.url}/notes`);
    assert.equal(list.status, 401);
    assert.deepEqual(await list.json(), { message: 'Missing bearer token' });
    assert.match(String(list.headers.get('content-security-policy')), /^default-src 'none'/);
    // Same origin as the pages: no CORS headers are added for a cross-origin caller.
    const preflight = await fetch(`${ctx.notes.url}/notes`, {
      method: 'OPTIONS',
      headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'GET' },
    });
    assert.equal(preflight.headers.get('access-control-allow-origin'), null);
    const openapi = (await ctx.notes.app.inject({ method: 'GET', url: '/docs/json' })).json() as { paths: Record<string, unknown> };
    for (const path of ['/', '/forgot-password', '/reset-password', '/assets/style.css', '/assets/notes/notes.js'])
      assert.equal(openapi.paths[path], undefined, path);
    assert.ok(openapi.paths['/notes'], 'the API routes are still documented');
  });
});
