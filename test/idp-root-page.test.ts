// GET / of the idp: a page that names the service and its documents for a
// browser, the same as JSON for any other client; never a 404.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startIdp, type RunningIdp } from './helpers/idp.js';

const PAGE_CSP =
  "default-src 'self';script-src 'self';style-src 'self';img-src 'self' data:;connect-src 'self';frame-ancestors 'none';base-uri 'none';form-action 'self'";
let idp: RunningIdp;
before(async () => {
  idp = await startIdp();
});
after(() => idp?.close());

test('a browser gets a page naming the service and linking its API documents, under the pages policy', async () => {
  const res = await idp.app.inject({ method: 'GET', url: '/', headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(res.headers['content-security-policy'], PAGE_CSP);
  assert.match(res.body, /<h1>Local identity provider<\/h1>/);
  assert.match(res.body, /<a class="button" href="\/docs">API documentation<\/a>/);
  assert.doesNotMatch(res.body, /<script|<style|\sstyle=/);
  for (const asset of ['/assets/style.css', '/assets/icon.svg'])
    assert.equal((await idp.app.inject({ method: 'GET', url: asset })).statusCode, 200);
});

test('any other client gets the same as JSON, with no key needed', async () => {
  for (const headers of [{}, { accept: 'application/json' }, { accept: '*/*' }]) {
    const res = await idp.app.inject({ method: 'GET', url: '/', headers });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    const body = res.json() as { name: string; docs: string; endpoints: Record<string, string> };
    assert.equal(body.name, 'idp');
    assert.equal(body.docs, '/docs');
    assert.deepEqual(Object.keys(body.endpoints).sort(), ['auth', 'health', 'jwks', 'readiness', 'rest']);
    for (const path of [body.docs, body.endpoints.jwks, body.endpoints.health])
      assert.equal((await idp.app.inject({ method: 'GET', url: path! })).statusCode < 400, true, path);
  }
});
