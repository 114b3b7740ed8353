import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { browserSkip, useBrowser } from '../helpers/browser.js';
import { type RunningIdp, startIdp } from '../helpers/idp.js';
import { freePort } from '../helpers/ports.js';

// The real supabase-js (its browser build) in a real Chromium, on a page served from another
// origin than the idp: what a browser app does against Supabase. The idp allows the page's origin
// only (IDP_CORS_ORIGINS), so a second page on a third origin must be refused by the browser.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SUPABASE_UMD = readFileSync(path.join(root, 'node_modules', '@supabase', 'supabase-js', 'dist', 'umd', 'supabase.js'), 'utf8');
/** A page that loads supabase-js, on its own origin. */
async function pageServer(port: number): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    if (request.url === '/supabase.js') {
      response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(SUPABASE_UMD);
    } else {
      response
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end('<!doctype html><title>app</title><script src="/supabase.js"></script>');
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

interface Outcome {
  signUp: string | null;
  insert: string | null;
  count: number | null;
  rows: unknown;
  ilike: unknown;
  fetchError: string | null;
}

/** In the page: sign up, write a note, read it back with a count and a search, all through supabase-js. */
async function useIdp(browser: Browser, pageOrigin: string, idp: RunningIdp, email: string): Promise<Outcome> {
  const page = await browser.newPage();
  try {
    await page.goto(pageOrigin);
    return await page.evaluate(
      async ({ url, key, email }) => {
        const lib = (window as unknown as { supabase: { createClient: (u: string, k: string, o: object) => any } }).supabase;
        const client = lib.createClient(url, key, { auth: { persistSession: false, autoRefreshToken: false } });
        const out: Outcome = { signUp: null, insert: null, count: null, rows: null, ilike: null, fetchError: null };
        const signUp = await client.auth.signUp({ email, password: 'a long browser passphrase' });
        out.signUp = signUp.error ? `${signUp.error.name}: ${signUp.error.message}` : null;
        if (signUp.error) return out;
        const insert = await client.from('notes').insert({ title: 'from the browser', body: 'Milk' });
        out.insert = insert.error ? insert.error.message : null;
        const read = await client.from('notes').select('title', { count: 'exact' }).range(0, 0);
        out.count = read.count;
        out.rows = read.data;
        out.ilike = (await client.from('notes').select('title').or('title.ilike.*zzz*,body.ilike.*milk*')).data;
        try {
          // A header only a preflight can clear, read back through an exposed one.
          const res = await fetch(`${url}/rest/v1/notes?select=id`, {
            headers: {
              apikey: key,
              authorization: `Bearer ${signUp.data.session.access_token}`,
              prefer: 'count=exact',
              'accept-profile': 'public',
            },
          });
          out.fetchError = res.headers.get('content-range') === '0-0/1' ? null : `content-range ${res.headers.get('content-range')}`;
        } catch (err) {
          out.fetchError = String(err);
        }
        return out;
      },
      { url: idp.url, key: idp.publishableKey, email },
    );
  } finally {
    await page.close();
  }
}

describe('supabase-js in Chromium against the idp from another origin', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let idp: RunningIdp;
  let allowed: http.Server;
  let other: http.Server;
  let allowedOrigin: string;
  let otherOrigin: string;

  before(async () => {
    const [allowedPort, otherPort] = [await freePort(), await freePort()];
    allowedOrigin = `http://127.0.0.1:${allowedPort}`;
    otherOrigin = `http://127.0.0.1:${otherPort}`;
    allowed = await pageServer(allowedPort);
    other = await pageServer(otherPort);
    idp = await startIdp({ env: { IDP_CORS_ORIGINS: allowedOrigin } });
  });
  after(async () => {
    allowed?.close();
    other?.close();
    await idp?.close();
  });

  it('an allowed origin signs up, writes and reads with counts, filters and custom headers', async () => {
    const outcome = await useIdp(browser.chromium, allowedOrigin, idp, 'browser@example.com');
    assert.deepEqual(outcome, {
      signUp: null,
      insert: null,
      count: 1,
      rows: [{ title: 'from the browser' }],
      ilike: [{ title: 'from the browser' }],
      fetchError: null,
    });
  });

  it('another origin is refused by the browser itself: supabase-js sees a failed fetch', async () => {
    const outcome = await useIdp(browser.chromium, otherOrigin, idp, 'elsewhere@example.com');
    assert.match(outcome.signUp ?? '', /AuthRetryableFetchError|Failed to fetch/);
    assert.equal(outcome.insert, null);
  });
});
