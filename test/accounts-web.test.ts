import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { AUDIT_EVENTS } from '../src/accounts/audit.js';
import { ACCOUNTS_PAGES } from '../src/accounts/routes/web-pages.js';
import { accountsSuite } from './helpers/accounts.js';

// The accounts web pages as HTTP resources (what a browser is sent), without a
// browser: test/browser/accounts-web.test.ts drives them in Chromium.

const PAGE_CSP =
  "default-src 'self';script-src 'self';style-src 'self';img-src 'self' data:;connect-src 'self';frame-ancestors 'none';base-uri 'none';form-action 'self'";
const suite = accountsSuite();

describe('accounts web pages', () => {
  it('serves every page as HTML under the pages policy, uncached without asking, with no inline script or style', async () => {
    const app = await suite.app();
    assert.deepEqual(Object.keys(ACCOUNTS_PAGES).sort(), ['/', '/account', '/admin', '/register', '/reset-password', '/verify-email']);
    for (const url of Object.keys(ACCOUNTS_PAGES)) {
      const res = await app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8', url);
      assert.equal(res.headers['content-security-policy'], PAGE_CSP, url);
      assert.equal(res.headers['cache-control'], 'no-cache', url);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.match(res.body, /^<!doctype html>\n<html lang="en">/, url);
      assert.doesNotMatch(res.body, /<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=/, url);
      // Each page refers only to this service (a path) or to itself (a fragment).
      for (const [, ref] of res.body.matchAll(/(?:src|href)="([^"]+)"/g)) assert.match(ref ?? '', /^[/#]/, `${url} refers to ${ref}`);
    }
  });

  it('serves the assets with their types and 304 when unchanged; nothing else under /assets', async () => {
    const app = await suite.app();
    const types: Record<string, RegExp> = {
      '/assets/style.css': /^text\/css/,
      '/assets/api.js': /^text\/javascript/,
      '/assets/icon.svg': /^image\/svg\+xml/,
    };
    for (const file of [
      'session.js',
      'fragment.js',
      'confirm-dialog.js',
      'signin.js',
      'register.js',
      'account.js',
      'admin.js',
      'reset-password.js',
      'verify-email.js',
    ]) {
      types[`/assets/accounts/${file}`] = /^text\/javascript/;
    }
    for (const [url, type] of Object.entries(types)) {
      const res = await app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 200, url);
      assert.match(String(res.headers['content-type']), type, url);
      assert.equal(res.headers['cache-control'], 'no-cache', url);
      const again = await app.inject({ method: 'GET', url, headers: { 'if-none-match': String(res.headers.etag) } });
      assert.equal(again.statusCode, 304, url);
      assert.equal(again.body, '', url);
    }
    for (const url of [
      '/assets/accounts/index.html',
      '/assets/accounts/../app.ts',
      '/assets/../package.json',
      '/assets/accounts/%2e%2e/app.ts',
      '/assets/serve.ts',
      '/account/x',
      '/admin/',
      '/reset-password/x',
    ]) {
      const res = await app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.match(String(res.headers['content-type']), /^application\/json/, url);
      assert.equal(res.json().status, 404, url);
    }
  });

  it('a page takes only GET (and HEAD): another method is the API 404', async () => {
    const app = await suite.app();
    for (const method of ['POST', 'PUT', 'DELETE'] as const) {
      const res = await app.inject({ method, url: '/account' });
      assert.equal(res.statusCode, 404, method);
      assert.equal(res.json().message, `Route ${method} /account not found`);
    }
    const head = await app.inject({ method: 'HEAD', url: '/admin' });
    assert.equal(head.statusCode, 200);
  });

  it('leaves the API as it was: its own policy, the pages out of the API document', async () => {
    const app = await suite.app();
    const api = await app.inject({ method: 'GET', url: '/admin/users' });
    assert.equal(api.statusCode, 401);
    assert.match(String(api.headers['content-security-policy']), /^default-src 'none'/);
    const openapi = (await app.inject({ method: 'GET', url: '/docs/json' })).json() as { paths: Record<string, unknown> };
    for (const path of [...Object.keys(ACCOUNTS_PAGES), '/assets/style.css', '/assets/accounts/session.js'])
      assert.equal(openapi.paths[path], undefined, path);
  });

  it("the admin page's event filter offers exactly the audit log's events", () => {
    const html = readFileSync(new URL('../src/accounts/web/admin.html', import.meta.url), 'utf8');
    const select = /<select id="audit-event">([\s\S]*?)<\/select>/.exec(html)?.[1] ?? '';
    const options = [...select.matchAll(/<option(?: value="")?>([^<]*)<\/option>/g)].map((m) => m[1]);
    assert.deepEqual(options, ['Every event', ...AUDIT_EVENTS]);
  });
});
