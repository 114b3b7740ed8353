import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, it } from 'node:test';
import fc from 'fast-check';
import { createPool } from '../src/kit/db.js';
import type { App } from '../src/kit/http/app.js';
import { LinkRepository } from '../src/shortener/repository.js';
import type { Visit } from '../src/shortener/visits.js';
import { fileDatabase, watchQueries } from './helpers/database.js';
import { assertEnvelope, startShortener, clicksOf, createCode, shortenerDatabase } from './helpers/shortener.js';

const db = fileDatabase(shortenerDatabase);
let app: App;

beforeEach(async () => {
  ({ app } = await startShortener({ pool: db.pool }));
});

afterEach(async () => {
  await app.close();
});

// Paths whose code fails ^[A-Za-z0-9_-]{3,64}$ once decoded, or never reaches a route at all.
const MALFORMED = [
  '/ab',
  `/${'a'.repeat(65)}`,
  '/..%2F..%2Fetc',
  '/%2e%2e%2f',
  '/%2e%2e%2fetc%2fpasswd',
  '/abc.def',
  '/abc~def',
  '/abcd%20fg',
  '/%C3%A9abcdef',
  '/abcd%E2%82%ACf',
  '/%00',
  '/abcdef%00',
  '/abc%00def',
  // '/..' (or '/%2e%2e') is not here: the URL parser resolves it to '/', the create page.
  '/abcdefg/',
  '/abcdefg/x',
  "/abc'def",
];

describe('GET /:code (redirect)', () => {
  it('answers 302 to the original URL with no-store, and counts one click in the database', async () => {
    const code = await createCode(app, 'https://example.com/target?x=1');
    const res = await app.inject({ method: 'GET', url: `/${code}` });
    assert.equal(res.statusCode, 302);
    assert.equal(res.headers.location, 'https://example.com/target?x=1');
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.equal(await clicksOf(db.pool, code), 1);
    await app.inject({ method: 'GET', url: `/${code}` });
    await app.inject({ method: 'GET', url: `/${code}?utm=1` });
    assert.equal(await clicksOf(db.pool, code), 3);
  });

  it('codes are case-sensitive', async () => {
    const code = await createCode(app, 'https://example.com/case');
    const flipped = [...code].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('');
    if (flipped !== code) {
      const res = await app.inject({ method: 'GET', url: `/${flipped}` });
      assert.equal(res.statusCode, 404);
    }
    const ok = await app.inject({ method: 'GET', url: `/${code}` });
    assert.equal(ok.statusCode, 302);
  });

  it('an unknown code gives a 404 envelope and counts nothing', async () => {
    const res = await app.inject({ method: 'GET', url: '/zzzzzzz' });
    assert.equal(res.statusCode, 404);
    assertEnvelope(res.json(), 404, 'Not Found');
    const { rows } = await db.pool.query('SELECT coalesce(sum(clicks), 0)::int AS total FROM links WHERE code = $1', ['zzzzzzz']);
    assert.equal(rows[0].total, 0);
  });

  it('malformed codes give a 404 envelope without any database query', async () => {
    const watch = watchQueries(db.pool);
    try {
      for (const url of MALFORMED) {
        const res = await app.inject({ method: 'GET', url });
        assert.equal(res.statusCode, 404, `${url}: ${res.statusCode} ${res.body}`);
        assertEnvelope(res.json(), 404, 'Not Found');
        const head = await app.inject({ method: 'HEAD', url });
        assert.equal(head.statusCode, 404, `HEAD ${url}`);
      }
    } finally {
      watch.stop();
    }
    assert.deepEqual(watch.queries, []);
    assert.equal(watch.connects, 0);
  });

  it('the query watcher does see the queries of a well-formed code', async () => {
    // Proves the zero above is not an artefact of the watcher.
    const watch = watchQueries(db.pool);
    try {
      await app.inject({ method: 'GET', url: '/zzzzzzz' });
      await app.inject({ method: 'GET', url: '/api/links/zzzzzzz' });
    } finally {
      watch.stop();
    }
    // The redirect's batch and the stats lookup (plus, once a day, the redirect's visitor salt).
    assert.ok(watch.queries.length >= 2, String(watch.queries.length));
  });

  it('HEAD answers 302 with Location and does not count', async () => {
    const code = await createCode(app, 'https://example.com/head');
    const res = await app.inject({ method: 'HEAD', url: `/${code}` });
    assert.equal(res.statusCode, 302);
    assert.equal(res.headers.location, 'https://example.com/head');
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.equal(res.body, '');
    assert.equal(await clicksOf(db.pool, code), 0);
    const unknown = await app.inject({ method: 'HEAD', url: '/zzzzzzz' });
    assert.equal(unknown.statusCode, 404);
  });

  it('a non-ASCII target is sent as its ASCII href', async () => {
    const code = await createCode(app, 'https://bücher.example/straße?q=ü#café');
    const res = await app.inject({ method: 'GET', url: `/${code}` });
    assert.equal(res.statusCode, 302);
    assert.equal(res.headers.location, 'https://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%BC#caf%C3%A9');
    assert.match(String(res.headers.location), /^[\x21-\x7e]+$/);
  });

  it('a non-ASCII target survives a real HTTP round trip', async () => {
    const code = await createCode(app, 'https://example.com/日本語');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/${code}`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), 'https://example.com/%E6%97%A5%E6%9C%AC%E8%AA%9E');
    await res.arrayBuffer();
  });
});

describe('any path', () => {
  it('redirect and stats answer 302/200 or a 404 envelope, never 5xx, and query only for well-formed codes', async () => {
    const code = await createCode(app, 'https://example.com/any');
    const segment = fc.oneof(
      fc.string({ unit: 'binary', minLength: 0, maxLength: 12 }),
      fc.string({ unit: fc.constantFrom(...'abcXYZ019-._~%/?#'), minLength: 5, maxLength: 9 }),
      fc.constant(code),
    );
    await fc.assert(
      fc.asyncProperty(segment, fc.boolean(), async (raw, stats) => {
        const url = `${stats ? '/api/links/' : '/'}${encodeURIComponent(raw)}`;
        const watch = watchQueries(db.pool);
        let res: Awaited<ReturnType<App['inject']>>;
        try {
          res = await app.inject({ method: 'GET', url });
        } finally {
          watch.stop();
        }
        const wellFormed = /^[A-Za-z0-9_-]{3,64}$/.test(raw);
        assert.equal(watch.queries.length > 0, wellFormed, `${url}: ${watch.queries.length} queries`);
        if (raw === code) {
          assert.equal(res.statusCode, stats ? 200 : 302, url);
        } else if (new URL(url, 'http://x').pathname === '/') {
          // '', '.' and '..' resolve to '/': the create page.
          assert.equal(res.statusCode, 200, url);
          assert.match(String(res.headers['content-type']), /^text\/html/);
        } else {
          assert.equal(res.statusCode, 404, `${url}: ${res.statusCode} ${res.body}`);
          assertEnvelope(res.json(), 404, 'Not Found');
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('clicks under concurrency (rule 5)', () => {
  it('1,000 concurrent redirects add exactly 1,000 clicks, in far fewer UPDATE statements', async () => {
    const code = await createCode(app, 'https://example.com/hot');
    const watch = watchQueries(db.pool);
    let responses: Awaited<ReturnType<App['inject']>>[];
    try {
      responses = await Promise.all(Array.from({ length: 1000 }, () => app.inject({ method: 'GET', url: `/${code}` })));
    } finally {
      watch.stop();
    }
    assert.ok(responses.every((r) => r.statusCode === 302));
    assert.equal(await clicksOf(db.pool, code), 1000);
    const updates = watch.queries.filter((q) => /\bUPDATE\s+links\b/i.test(q)).length;
    assert.ok(updates >= 1 && updates < 100, `${updates} UPDATE statements for 1,000 clicks`);
  });

  it('1,000 concurrent redirects over real HTTP with keep-alive, spread over two codes and an unknown one', async () => {
    const a = await createCode(app, 'https://example.com/a');
    const b = await createCode(app, 'https://example.com/b');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const get = (path: string) =>
      new Promise<number>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port, path, agent }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          })
          .on('error', reject);
      });
    try {
      const paths = Array.from({ length: 1000 }, (_, i) => (i % 10 === 9 ? '/zzzzzzz' : i % 2 === 0 ? `/${a}` : `/${b}`));
      const statuses = await Promise.all(paths.map(get));
      const expectedA = paths.filter((p) => p === `/${a}`).length;
      const expectedB = paths.filter((p) => p === `/${b}`).length;
      assert.equal(statuses.filter((s) => s === 302).length, expectedA + expectedB);
      assert.equal(statuses.filter((s) => s === 404).length, 100);
      assert.equal(await clicksOf(db.pool, a), expectedA);
      assert.equal(await clicksOf(db.pool, b), expectedB);
    } finally {
      agent.destroy();
    }
  });
});

const CONTENTION_VISIT: Visit = {
  hour: Math.floor(Date.now() / 3_600_000) * 3_600_000,
  class: 'human',
  referrer: '(direct)',
  browser: 'Firefox',
  os: 'Linux',
  country: null,
  device: 'desktop',
  visitorKey: Buffer.alloc(16, 7),
};

describe('click batches under contention', () => {
  it('concurrent batches over the same codes never deadlock, and every click counts', async () => {
    // Two instances' worth of overlapping multi-code batches: rows must be locked in one order.
    const repo = new LinkRepository(db.pool);
    const codes = Array.from({ length: 20 }, (_, i) => `Lock${String(i).padStart(3, '0')}`);
    for (const code of codes) await repo.insert(code, `https://example.com/${code}`);
    let committed = 0;
    const failures: string[] = [];
    for (let round = 0; round < 6; round++) {
      const results = await Promise.allSettled(
        Array.from({ length: 40 }, (_, i) => {
          // Different subsets and orders per batch, as different instances would send.
          const subset = codes.filter((_, j) => (i + j) % 3 !== 0);
          const ordered = i % 2 ? subset : [...subset].reverse();
          const visits = ordered.map((code) => ({ code, ordinal: 1, visit: { ...CONTENTION_VISIT, referrer: `r${i % 4}.example` } }));
          return repo
            .addClicks(
              ordered,
              subset.map(() => 1),
              visits,
              new Date(),
            )
            .then((urls) => {
              assert.equal(urls.size, subset.length);
              committed += subset.length;
            });
        }),
      );
      for (const r of results) if (r.status === 'rejected') failures.push(String((r.reason as Error).message));
    }
    assert.deepEqual(failures, []);
    const { rows } = await db.pool.query('SELECT sum(clicks)::int AS total FROM links WHERE code = ANY($1)', [codes]);
    assert.equal(rows[0].total, committed);
    const visits = await db.pool.query('SELECT sum(visits)::int AS total FROM visit_counts WHERE code = ANY($1)', [codes]);
    assert.equal(visits.rows[0].total, committed);
  });
});

describe('GET /api/links/:code (stats, rule 6)', () => {
  it('answers 200 with code, original_url, clicks and an ISO 8601 createdAt', async () => {
    const startedAt = Date.now();
    const code = await createCode(app, 'https://example.com/stats');
    await app.inject({ method: 'GET', url: `/${code}` });
    await app.inject({ method: 'GET', url: `/${code}` });
    const res = await app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal(res.statusCode, 200);
    const body = res.json() as { status: number; response: string; message: string; data: Record<string, unknown> };
    assert.equal(body.status, 200);
    assert.equal(body.response, 'OK');
    assert.equal(typeof body.message, 'string');
    assert.deepEqual(Object.keys(body.data).sort(), ['clicks', 'code', 'createdAt', 'original_url', 'state']);
    assert.equal(body.data.state, 'active');
    assert.equal(body.data.code, code);
    assert.equal(body.data.original_url, 'https://example.com/stats');
    assert.equal(body.data.clicks, 2);
    const createdAt = String(body.data.createdAt);
    assert.match(createdAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.equal(new Date(createdAt).toISOString(), createdAt);
    // Database time and test time may differ by clock skew of a second or so, not more.
    assert.ok(Math.abs(Date.parse(createdAt) - startedAt) < 60_000);
    const { rows } = await db.pool.query('SELECT created_at FROM links WHERE code = $1', [code]);
    assert.equal((rows[0].created_at as Date).toISOString(), createdAt);
  });

  it('never counts a click, however often it is read', async () => {
    const code = await createCode(app, 'https://example.com/read-only');
    await app.inject({ method: 'GET', url: `/${code}` });
    for (let i = 0; i < 3; i++) {
      const res = await app.inject({ method: 'GET', url: `/api/links/${code}` });
      assert.equal(res.statusCode, 200);
      assert.equal((res.json() as { data: { clicks: number } }).data.clicks, 1);
    }
    assert.equal(await clicksOf(db.pool, code), 1);
  });

  it('an unknown code gives a 404 envelope', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/links/zzzzzzz' });
    assert.equal(res.statusCode, 404);
    assertEnvelope(res.json(), 404, 'Not Found');
  });

  it('malformed codes give a 404 envelope without any database query', async () => {
    const watch = watchQueries(db.pool);
    try {
      for (const path of MALFORMED) {
        const url = `/api/links${path}`;
        const res = await app.inject({ method: 'GET', url });
        assert.equal(res.statusCode, 404, `${url}: ${res.body}`);
        assertEnvelope(res.json(), 404, 'Not Found');
      }
    } finally {
      watch.stop();
    }
    assert.deepEqual(watch.queries, []);
    assert.equal(watch.connects, 0);
  });
});

describe('route order (rule 7) and unknown routes', () => {
  it('/api/links/<7 chars> is stats, not a redirect, and counts nothing', async () => {
    const code = await createCode(app, 'https://example.com/order');
    const res = await app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers.location, undefined);
    assert.equal(await clicksOf(db.pool, code), 0);
  });

  it('GET /api/links is not swallowed by the catch-all', async () => {
    for (const url of ['/api/links/', '/api']) {
      const res = await app.inject({ method: 'GET', url });
      assert.ok(res.statusCode === 404 || res.statusCode === 405, `${url}: ${res.statusCode}`);
      assertEnvelope(res.json(), res.statusCode, res.statusCode === 404 ? 'Not Found' : 'Method Not Allowed');
      assert.equal(res.headers.location, undefined);
    }
    // GET /api/links is the admin listing, off here (no SHORTENER_ADMIN_KEY).
    const listing = await app.inject({ method: 'GET', url: '/api/links' });
    assert.equal(listing.statusCode, 503);
    assertEnvelope(listing.json(), 503, 'Service Unavailable');
    assert.equal(listing.headers.location, undefined);
  });

  it('POST, PUT and DELETE on a code are 404 envelopes', async () => {
    const code = await createCode(app, 'https://example.com/methods');
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH'] as const) {
      for (const url of ['/abcdefg', `/${code}`, `/api/links/${code}`]) {
        const res = await app.inject({ method, url, payload: {} });
        // PATCH and DELETE /api/links/:code are the admin API, off here (no SHORTENER_ADMIN_KEY).
        const admin = url.startsWith('/api/') && (method === 'DELETE' || method === 'PATCH');
        assert.equal(res.statusCode, admin ? 503 : 404, `${method} ${url}`);
        assertEnvelope(res.json(), admin ? 503 : 404, admin ? 'Service Unavailable' : 'Not Found');
      }
    }
    assert.equal(await clicksOf(db.pool, code), 0);
  });

  it('unknown paths give a 404 envelope', async () => {
    for (const url of ['/a/b/c', '/api/links/abcdefg/extra', '/favicon.ico', '/api/nothing', '/..%2f..%2fetc%2fpasswd']) {
      const res = await app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assertEnvelope(res.json(), 404, 'Not Found');
    }
  });
});

describe('health, readiness and docs', () => {
  it('/healthz answers 200', async () => {
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: 'ok' });
  });

  it('/readyz answers 200 with the database up and a 503 JSON envelope when it is unreachable', async () => {
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(ready.json(), { status: 'ready' });

    const deadPool = createPool('postgres://postgres@127.0.0.1:1/none', { connectionTimeoutMillis: 500 });
    const { app: deadApp } = await startShortener({ pool: deadPool });
    try {
      const res = await deadApp.inject({ method: 'GET', url: '/readyz' });
      assert.equal(res.statusCode, 503);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const message = assertEnvelope(res.json(), 503, 'Service Unavailable');
      assert.doesNotMatch(message, /ECONNREFUSED|127\.0\.0\.1/);
      // Liveness does not depend on the database.
      const live = await deadApp.inject({ method: 'GET', url: '/healthz' });
      assert.equal(live.statusCode, 200);
      // A redirect with the database down is a 503, not a 500 or a hang.
      const redirect = await deadApp.inject({ method: 'GET', url: '/abcdefg' });
      assert.equal(redirect.statusCode, 503);
      assertEnvelope(redirect.json(), 503, 'Service Unavailable');
    } finally {
      await deadApp.close();
      await deadPool.end();
    }
  });

  it('/docs/json is an OpenAPI document listing the three routes', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs/json' });
    assert.equal(res.statusCode, 200);
    const doc = res.json() as { openapi: string; paths: Record<string, Record<string, unknown>> };
    assert.match(doc.openapi, /^3\./);
    assert.ok(doc.paths['/api/links']?.post, 'POST /api/links');
    assert.ok(doc.paths['/api/links/{code}']?.get, 'GET /api/links/{code}');
    assert.ok(doc.paths['/{code}']?.get, 'GET /{code}');
    const create = doc.paths['/api/links']!.post as { requestBody?: unknown; responses: Record<string, unknown> };
    assert.ok(create.requestBody, 'create documents its body');
    for (const status of ['201', '400', '429']) assert.ok(create.responses[status], `create documents ${status}`);
  });
});
