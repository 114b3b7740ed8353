import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it, mock } from 'node:test';
import type { Pool } from '../src/kit/db.js';
import type { App } from '../src/kit/http/app.js';
import { ADMIN_NOT_CONFIGURED } from '../src/shortener/admin-auth.js';
import { MAX_CODE_ATTEMPTS } from '../src/shortener/links.js';
import { LinkRepository } from '../src/shortener/repository.js';
import { RESERVED_CODE_PREFIXES, isReservedCode } from '../src/shortener/reserved-codes.js';
import { watchQueries } from './helpers/database.js';
import {
  assertEnvelope,
  createCode,
  createLink,
  scriptedCodes,
  type ShortenerOptions,
  shortenerTestConfig,
  withShortener,
  sharedShortener,
} from './helpers/shortener.js';

const ADMIN_KEY = `${'k'.repeat(20)}-admin-key-for-tests`;
const AUTH = { authorization: `Bearer ${ADMIN_KEY}` };

const ctx = sharedShortener({ env: { SHORTENER_ADMIN_KEY: ADMIN_KEY } });

/** Another shortener on this file's database, with the admin key unless `options.env` replaces it. */
const withApp = <T>(fn: (app: App) => Promise<T>, options: ShortenerOptions = {}) =>
  withShortener({ pool: ctx.pool, env: { SHORTENER_ADMIN_KEY: ADMIN_KEY }, ...options }, fn);

/** Inserts a link directly, so created_at and URLs the create path would refuse can be set. */
async function insertLink(code: string, url: string, secondsAgo: number): Promise<void> {
  await ctx.pool.query(`INSERT INTO links (code, original_url, created_at) VALUES ($1, $2, now() - make_interval(secs => $3))`, [
    code,
    url,
    secondsAgo,
  ]);
}

async function list(query: string, headers: Record<string, string> = AUTH) {
  const res = await ctx.app.inject({ method: 'GET', url: `/api/links${query}`, headers });
  return { res, body: res.json() as { status: number; data: Array<Record<string, unknown>>; message: string } };
}

const patch = (code: string, payload: unknown, headers: Record<string, string> = AUTH) =>
  ctx.app.inject({ method: 'PATCH', url: `/api/links/${code}`, payload: payload as object, headers });

describe('admin auth', () => {
  const requests = [
    { method: 'GET', url: '/api/links' },
    { method: 'PATCH', url: '/api/links/abcdefg', payload: { disabled: true } },
    { method: 'DELETE', url: '/api/links/abcdefg' },
  ] as const;

  it('without SHORTENER_ADMIN_KEY every admin route answers 503 saying how to enable it, key or not', async () => {
    await withApp(
      async (unconfigured) => {
        for (const req of requests) {
          for (const headers of [{}, AUTH]) {
            const res = await unconfigured.inject({ ...req, headers });
            assert.equal(res.statusCode, 503, `${req.method} ${req.url}`);
            assert.equal(assertEnvelope(res.json(), 503, 'Service Unavailable'), ADMIN_NOT_CONFIGURED);
          }
        }
        // Create and stats stay public.
        assert.equal((await createLink(unconfigured, 'https://example.com/still-public')).status, 201);
      },
      { env: {} },
    );
  });

  it('SHORTENER_ADMIN_KEY shorter than 32 bytes stops the start', () => {
    assert.throws(() => shortenerTestConfig({ SHORTENER_ADMIN_KEY: 'x'.repeat(31) }), /SHORTENER_ADMIN_KEY must be at least 32 bytes long/);
    assert.equal(shortenerTestConfig({ SHORTENER_ADMIN_KEY: 'x'.repeat(32) }).SHORTENER_ADMIN_KEY, 'x'.repeat(32));
  });

  it('a missing or wrong key is a 401 envelope with WWW-Authenticate; the right key passes', async () => {
    const wrong: Array<Record<string, string>> = [
      {},
      { authorization: '' },
      { authorization: 'Bearer ' },
      { authorization: `Bearer ${ADMIN_KEY}x` },
      { authorization: `Bearer ${ADMIN_KEY.slice(0, -1)}` },
      { authorization: `Bearer ${ADMIN_KEY.slice(0, -1)}X` },
      { authorization: 'Bearer k' },
      { authorization: `Basic ${ADMIN_KEY}` },
      { authorization: ADMIN_KEY },
      { authorization: `Bearer  ${ADMIN_KEY}` },
    ];
    for (const req of requests) {
      for (const headers of wrong) {
        const res = await ctx.app.inject({ ...req, headers });
        assert.equal(res.statusCode, 401, `${req.method} ${JSON.stringify(headers)}`);
        assertEnvelope(res.json(), 401, 'Unauthorized');
        assert.equal(res.headers['www-authenticate'], 'Bearer');
      }
    }
    const res = await ctx.app.inject({ method: 'GET', url: '/api/links', headers: AUTH });
    assert.equal(res.statusCode, 200);
    // HEAD, which Fastify derives from GET, carries the same check.
    assert.equal((await ctx.app.inject({ method: 'HEAD', url: '/api/links' })).statusCode, 401);
    assert.equal((await ctx.app.inject({ method: 'HEAD', url: '/api/links', headers: AUTH })).statusCode, 200);
    // The scheme is case-insensitive (RFC 7235).
    assert.equal(
      (await ctx.app.inject({ method: 'GET', url: '/api/links', headers: { authorization: `bearer ${ADMIN_KEY}` } })).statusCode,
      200,
    );
  });

  it('compares digests of equal length with crypto.timingSafeEqual, whatever length was sent', async () => {
    const spy = mock.method(crypto, 'timingSafeEqual');
    try {
      for (const authorization of ['Bearer short', `Bearer ${ADMIN_KEY}${'x'.repeat(500)}`, `Bearer ${ADMIN_KEY}`]) {
        await ctx.app.inject({ method: 'GET', url: '/api/links', headers: { authorization } });
      }
      assert.equal(spy.mock.callCount(), 3);
      for (const call of spy.mock.calls) {
        const [a, b] = call.arguments as [Buffer, Buffer];
        assert.equal(a.length, 32);
        assert.equal(b.length, 32);
      }
      assert.deepEqual(
        spy.mock.calls.map((c) => c.result),
        [false, false, true],
      );
    } finally {
      spy.mock.restore();
    }
  });

  it('answers 401 before any body or query validation, and before any query reaches the database', async () => {
    const queries = watchQueries(ctx.pool);
    try {
      const invalid = [
        { method: 'GET', url: `/api/links?page=0&per_page=5000&q=${'x'.repeat(5000)}` },
        { method: 'PATCH', url: '/api/links/abcdefg', payload: { max_visits: 'many', nonsense: 1 } },
        { method: 'PATCH', url: '/api/links/abcdefg', payload: '{not json', headers: { 'content-type': 'application/json' } },
        { method: 'PATCH', url: '/api/links/abcdefg', payload: 'text', headers: { 'content-type': 'text/plain' } },
        { method: 'DELETE', url: '/api/links/..%2F..%2Fetc' },
      ] as const;
      for (const req of invalid) {
        const res = await ctx.app.inject({ ...req, headers: { ...('headers' in req ? req.headers : {}), authorization: 'Bearer wrong' } });
        assert.equal(res.statusCode, 401, `${req.method} ${req.url}: ${res.body}`);
        assertEnvelope(res.json(), 401, 'Unauthorized');
      }
      assert.deepEqual(queries.queries, []);
    } finally {
      queries.stop();
    }
  });
});

describe('GET /api/links', () => {
  it('lists links newest first with every field, short_url from BASE_URL', async () => {
    await insertLink('OrdA001', 'https://order.test/oldest', 300);
    await insertLink('OrdA002', 'https://order.test/middle', 200);
    await insertLink('OrdA003', 'https://order.test/newest', 100);
    await ctx.pool.query(
      "UPDATE links SET clicks = 7, max_visits = 10, disabled = true, expires_at = '2030-01-02T03:04:05Z' WHERE code = 'OrdA002'",
    );
    const { res, body } = await list('?q=order.test');
    assert.equal(res.statusCode, 200);
    assert.equal(body.status, 200);
    assert.deepEqual(
      body.data.map((l) => l.code),
      ['OrdA003', 'OrdA002', 'OrdA001'],
    );
    const middle = body.data[1]!;
    assert.deepEqual(Object.keys(middle).sort(), [
      'clicks',
      'code',
      'createdAt',
      'disabled',
      'expires_at',
      'max_visits',
      'original_url',
      'password_protected',
      'rules',
      'short_url',
      'tags',
      'title',
    ]);
    assert.deepEqual(
      { ...middle, createdAt: undefined },
      {
        code: 'OrdA002',
        short_url: 'https://sho.rt/OrdA002',
        original_url: 'https://order.test/middle',
        clicks: 7,
        createdAt: undefined,
        expires_at: '2030-01-02T03:04:05.000Z',
        max_visits: 10,
        disabled: true,
        title: null,
        tags: [],
        rules: null,
        password_protected: false,
      },
    );
    assert.match(String(middle.createdAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(body.data[0]!.expires_at, null);
    assert.deepEqual(body.data[0]!.max_visits, null);
    assert.equal(body.data[0]!.disabled, false);
  });

  it('without q lists every link, and X-Total-Count is the number of links', async () => {
    const { rows } = await ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
    const { res, body } = await list('?per_page=1000');
    assert.equal(res.headers['x-total-count'], String(rows[0]!.n));
    assert.equal(body.data.length, rows[0]!.n);
  });

  it('q matches the code exactly, or the URL as a case-insensitive substring', async () => {
    await insertLink('SrchAb1', 'https://Search-Host.test/Some/PATH', 50);
    await insertLink('SrchAb2', 'https://other.test/mentions/SrchAb1', 40);
    await insertLink('SrchAb3', 'https://unrelated.test/', 30);
    const codes = async (q: string) => (await list(`?q=${encodeURIComponent(q)}`)).body.data.map((l) => l.code);
    assert.deepEqual(await codes('search-host.TEST/some/path'), ['SrchAb1']);
    // The exact code, and the URL that contains it.
    assert.deepEqual(await codes('SrchAb1'), ['SrchAb2', 'SrchAb1']);
    // A code is matched exactly, not as a prefix (SrchAb2 matches by its URL).
    assert.deepEqual(await codes('SrchAb'), ['SrchAb2']);
    assert.deepEqual(await codes('SrchAb3'), ['SrchAb3']);
    assert.deepEqual(await codes('nothing-like-this'), []);
  });

  it('LIKE wildcards and the escape character in q are matched literally', async () => {
    await insertLink('Wild001', 'https://wild.test/a_b', 50);
    await insertLink('Wild002', 'https://wild.test/aXb', 40);
    await insertLink('Wild003', 'https://wild.test/100%', 30);
    await insertLink('Wild004', 'https://wild.test/1000', 20);
    await insertLink('Wild005', 'https://wild.test/back\\slash', 10);
    const codes = async (q: string) => (await list(`?q=${encodeURIComponent(q)}`)).body.data.map((l) => l.code);
    assert.deepEqual(await codes('wild.test/a_b'), ['Wild001']);
    assert.deepEqual(await codes('wild.test/100%'), ['Wild003']);
    assert.deepEqual(await codes('wild.test/%'), []);
    assert.deepEqual(await codes('\\'), ['Wild005']);
    assert.deepEqual(await codes('k\\s'), ['Wild005']);
    // An empty q is no filter.
    const all = await list('?q=');
    assert.equal(all.res.statusCode, 200);
    assert.ok(all.body.data.length >= 5);
  });

  it('pages: X-Total-Count, RFC 8288 Link with first/prev/next/last keeping q, [] past the end', async () => {
    for (let i = 1; i <= 5; i++) await insertLink(`Page00${i}`, `https://paging.test/${i}`, 1000 - i);
    const { res, body } = await list('?q=paging.test&page=2&per_page=2');
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['x-total-count'], '5');
    assert.deepEqual(
      body.data.map((l) => l.code),
      ['Page003', 'Page002'],
    );
    assert.equal(
      res.headers.link,
      '</api/links?page=1&per_page=2&q=paging.test>; rel="first", </api/links?page=1&per_page=2&q=paging.test>; rel="prev", ' +
        '</api/links?page=3&per_page=2&q=paging.test>; rel="next", </api/links?page=3&per_page=2&q=paging.test>; rel="last"',
    );
    const first = await list('?q=paging.test&per_page=2');
    assert.equal(
      first.res.headers.link,
      '</api/links?page=1&per_page=2&q=paging.test>; rel="first", </api/links?page=2&per_page=2&q=paging.test>; rel="next", </api/links?page=3&per_page=2&q=paging.test>; rel="last"',
    );
    const last = await list('?q=paging.test&page=3&per_page=2');
    assert.deepEqual(
      last.body.data.map((l) => l.code),
      ['Page001'],
    );
    assert.doesNotMatch(String(last.res.headers.link), /rel="next"/);
    const past = await list('?q=paging.test&page=9&per_page=2');
    assert.deepEqual(past.body.data, []);
    assert.equal(past.res.headers['x-total-count'], '5');
    assert.match(String(past.res.headers.link), /page=3&per_page=2&q=paging.test>; rel="prev"/);
    // Default per_page is 50; q with characters that need escaping in a URL is kept encoded.
    const odd = await list(`?q=${encodeURIComponent('a b&c=d')}`);
    assert.equal(
      odd.res.headers.link,
      '</api/links?page=1&per_page=50&q=a%20b%26c%3Dd>; rel="first", </api/links?page=1&per_page=50&q=a%20b%26c%3Dd>; rel="last"',
    );
    assert.equal(odd.res.headers['x-total-count'], '0');
  });

  it('bad paging or search values are 400 envelopes naming the parameter', async () => {
    for (const [query, name] of [
      ['?page=0', 'page'],
      ['?page=-1', 'page'],
      ['?page=1.5', 'page'],
      ['?page=abc', 'page'],
      ['?page=1000001', 'page'],
      ['?page=1e400', 'page'],
      ['?per_page=0', 'per_page'],
      ['?per_page=1001', 'per_page'],
      ['?per_page=x', 'per_page'],
      [`?q=${'x'.repeat(2049)}`, 'q'],
      ['?q=%00', 'q'],
      ['?q=a&q=b', 'q'],
    ] as const) {
      const { res } = await list(query);
      assert.equal(res.statusCode, 400, `${query}: ${res.body}`);
      assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), new RegExp(`querystring/${name}`), query);
    }
  });
});

describe('PATCH /api/links/:code', () => {
  it('sets and clears each field, alone or together, and answers the link', async () => {
    const code = await createCode(ctx.app, 'https://example.com/patch-me');
    const step = async (payload: unknown, expected: Record<string, unknown>) => {
      const res = await patch(code, payload);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json() as { status: number; message: string; data: Record<string, unknown> };
      assert.equal(body.status, 200);
      assert.equal(body.data.code, code);
      assert.equal(body.data.short_url, `https://sho.rt/${code}`);
      assert.equal(body.data.original_url, 'https://example.com/patch-me');
      for (const [k, v] of Object.entries(expected)) assert.deepEqual(body.data[k], v, `${JSON.stringify(payload)} → ${k}`);
      const { rows } = await ctx.pool.query('SELECT expires_at, max_visits, disabled FROM links WHERE code = $1', [code]);
      return rows[0] as { expires_at: Date | null; max_visits: number | null; disabled: boolean };
    };
    let row = await step(
      { expires_at: '2031-06-01T12:00:00+02:00' },
      { expires_at: '2031-06-01T10:00:00.000Z', max_visits: null, disabled: false },
    );
    assert.equal(row.expires_at?.toISOString(), '2031-06-01T10:00:00.000Z');
    row = await step({ max_visits: 3 }, { expires_at: '2031-06-01T10:00:00.000Z', max_visits: 3, disabled: false });
    assert.equal(row.max_visits, 3);
    row = await step({ disabled: true }, { expires_at: '2031-06-01T10:00:00.000Z', max_visits: 3, disabled: true });
    assert.equal(row.disabled, true);
    row = await step({ expires_at: null }, { expires_at: null, max_visits: 3, disabled: true });
    assert.equal(row.expires_at, null);
    row = await step({ max_visits: null }, { expires_at: null, max_visits: null, disabled: true });
    assert.equal(row.max_visits, null);
    row = await step({ disabled: false }, { disabled: false });
    assert.equal(row.disabled, false);
    row = await step(
      { expires_at: '2027-01-31T23:59:59.5Z', max_visits: Number.MAX_SAFE_INTEGER, disabled: true },
      { expires_at: '2027-01-31T23:59:59.500Z', max_visits: Number.MAX_SAFE_INTEGER, disabled: true },
    );
    assert.equal(row.max_visits, Number.MAX_SAFE_INTEGER);
    // An expiry in the past is allowed: it ends the link now.
    await step({ expires_at: '2000-01-01T00:00:00Z' }, { expires_at: '2000-01-01T00:00:00.000Z' });
  });

  it('invalid values are 400 envelopes naming the field, and change nothing', async () => {
    const code = await createCode(ctx.app, 'https://example.com/patch-invalid');
    for (const [payload, field] of [
      [{ expires_at: '2031-06-01T12:00:00' }, 'body/expires_at'],
      [{ expires_at: '2031-06-01' }, 'body/expires_at'],
      [{ expires_at: '2027-02-30T00:00:00Z' }, 'body/expires_at'],
      [{ expires_at: '2027-13-01T00:00:00Z' }, 'body/expires_at'],
      [{ expires_at: '2027-01-01T24:00:00Z' }, 'body/expires_at'],
      [{ expires_at: '2027-01-01T00:00:00+25:00' }, 'body/expires_at'],
      [{ expires_at: '0000-01-01T00:00:00+01:00' }, 'body/expires_at'],
      [{ expires_at: 'tomorrow' }, 'body/expires_at'],
      [{ expires_at: 1_900_000_000 }, 'body/expires_at'],
      [{ expires_at: '' }, 'body/expires_at'],
      [{ max_visits: 0 }, 'body/max_visits'],
      [{ max_visits: -1 }, 'body/max_visits'],
      [{ max_visits: 1.5 }, 'body/max_visits'],
      [{ max_visits: '3' }, 'body/max_visits'],
      [{ max_visits: 2 ** 53 }, 'body/max_visits'],
      [{ max_visits: true }, 'body/max_visits'],
      [{ disabled: 'true' }, 'body/disabled'],
      [{ disabled: null }, 'body/disabled'],
      [{ disabled: 1 }, 'body/disabled'],
      [{}, 'at least one of url, title, tags, expires_at, max_visits, disabled'],
      [{ unknown_field: 1 }, 'at least one of url, title, tags, expires_at, max_visits, disabled'],
      [[], 'body'],
      [{ disabled: true, max_visits: 0 }, 'body/max_visits'],
    ] as const) {
      const res = await patch(code, payload);
      assert.equal(res.statusCode, 400, `${JSON.stringify(payload)}: ${res.body}`);
      assert.ok(assertEnvelope(res.json(), 400, 'Bad Request').includes(field), `${JSON.stringify(payload)}: ${res.body}`);
    }
    const { rows } = await ctx.pool.query('SELECT expires_at, max_visits, disabled FROM links WHERE code = $1', [code]);
    assert.deepEqual(rows[0], { expires_at: null, max_visits: null, disabled: false });
  });

  it('a malformed code is a 404 without any query; an unknown code is a 404', async () => {
    const queries = watchQueries(ctx.pool);
    try {
      for (const code of ['ab', 'a'.repeat(65), '..%2Fetc', 'abc.efg', '%C3%A9bcdefg']) {
        for (const method of ['PATCH', 'DELETE'] as const) {
          const res = await ctx.app.inject({ method, url: `/api/links/${code}`, payload: { disabled: true }, headers: AUTH });
          assert.equal(res.statusCode, 404, `${method} ${code}`);
          assert.equal(assertEnvelope(res.json(), 404, 'Not Found'), 'Link not found');
        }
      }
      assert.deepEqual(queries.queries, []);
    } finally {
      queries.stop();
    }
    const res = await patch('Unknwn1', { disabled: true });
    assert.equal(res.statusCode, 404);
    assert.equal(assertEnvelope(res.json(), 404, 'Not Found'), 'Link not found');
  });
});

describe('DELETE /api/links/:code', () => {
  it('answers 200 with the link; then redirect, stats, QR and admin calls are 404 and the code is tombstoned', async () => {
    const code = await createCode(ctx.app, 'https://example.com/to-delete');
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode, 302);
    const res = await ctx.app.inject({ method: 'DELETE', url: `/api/links/${code}`, headers: AUTH });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as { status: number; message: string; data: Record<string, unknown> };
    assert.equal(body.status, 200);
    assert.equal(body.data.code, code);
    assert.equal(body.data.clicks, 1);
    assert.equal(body.data.original_url, 'https://example.com/to-delete');
    for (const [method, url, headers] of [
      ['GET', `/${code}`, {}],
      ['HEAD', `/${code}`, {}],
      ['GET', `/api/links/${code}`, {}],
      ['GET', `/api/links/${code}/qr`, {}],
      ['GET', `/api/links/${code}/qr?format=png`, {}],
      ['DELETE', `/api/links/${code}`, AUTH],
      ['PATCH', `/api/links/${code}`, AUTH],
    ] as const) {
      const after = await ctx.app.inject({ method, url, headers, ...(method === 'PATCH' ? { payload: { disabled: true } } : {}) });
      assert.equal(after.statusCode, 404, `${method} ${url}`);
      if (method !== 'HEAD') assert.equal(assertEnvelope(after.json(), 404, 'Not Found'), 'Link not found');
    }
    const { rows } = await ctx.pool.query('SELECT code FROM deleted_codes WHERE code = $1', [code]);
    assert.equal(rows.length, 1);
    const listed = await list(`?q=${code}`);
    assert.deepEqual(
      listed.body.data.filter((l) => l.code === code),
      [],
    );
  });

  it('never issues a deleted code again: a generator that yields it gets another code', async () => {
    const deleted = await createCode(ctx.app, 'https://example.com/deleted-then-drawn');
    assert.equal((await ctx.app.inject({ method: 'DELETE', url: `/api/links/${deleted}`, headers: AUTH })).statusCode, 200);
    const script = scriptedCodes(deleted, 'Other01');
    await withApp(
      async (drawing) => {
        const res = await createLink(drawing, 'https://example.com/new-link');
        assert.equal(res.status, 201, JSON.stringify(res.body));
        assert.equal((res.body.data as { code: string }).code, 'Other01');
      },
      { deps: { generateCode: script.generateCode } },
    );
    assert.deepEqual(script.drawn, [deleted, 'Other01']);
    assert.equal((await ctx.pool.query('SELECT 1 FROM links WHERE code = $1', [deleted])).rowCount, 0);
    // A generator that only yields the deleted code gives up like on any duplicate: 503, nothing inserted.
    const stuckScript = scriptedCodes(deleted);
    await withApp(
      async (stuck) => {
        const res = await createLink(stuck, 'https://example.com/never');
        assert.equal(res.status, 503);
        assertEnvelope(res.body, 503, 'Service Unavailable');
      },
      { deps: { generateCode: stuckScript.generateCode } },
    );
    assert.equal(stuckScript.drawn.length, MAX_CODE_ATTEMPTS);
    assert.equal((await ctx.pool.query('SELECT 1 FROM links WHERE code = $1', [deleted])).rowCount, 0);
  });

  it('a create that draws the code of a link being deleted waits for the delete, then takes another code', async () => {
    const code = await createCode(ctx.app, 'https://example.com/deleted-during-create');
    const deleter = await ctx.pool.connect();
    try {
      await deleter.query('BEGIN');
      // The delete's own statement, left uncommitted while the create runs.
      const gone = await new LinkRepository(deleter as unknown as Pool).deleteAndTombstone(code);
      assert.equal(gone?.code, code);
      const script = scriptedCodes(code, 'Other02');
      await withApp(
        async (drawing) => {
          const creating = createLink(drawing, 'https://example.com/racing');
          // The insert waits on the deleting transaction (the primary key holds the old row until it commits).
          for (let i = 0; ; i++) {
            const { rows } = await ctx.pool.query(
              "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO links%'",
            );
            if (rows.length > 0) break;
            assert.ok(i < 500, 'the create never waited for the delete');
            await new Promise((r) => setTimeout(r, 20));
          }
          await deleter.query('COMMIT');
          const res = await creating;
          assert.equal(res.status, 201, JSON.stringify(res.body));
          assert.equal((res.body.data as { code: string }).code, 'Other02');
        },
        { deps: { generateCode: script.generateCode } },
      );
      assert.deepEqual(script.drawn, [code, 'Other02']);
      assert.equal((await ctx.pool.query('SELECT 1 FROM links WHERE code = $1', [code])).rowCount, 0);
    } finally {
      await deleter.query('ROLLBACK').catch(() => {});
      deleter.release();
    }
  });
});

describe('reserved codes', () => {
  it('never issues a code that starts like a path the service serves or will serve', async () => {
    // Four reserved codes, then a free one, per create (a create makes at most 5 attempts).
    const reserved = ['admin12', 'Assets1', 'STATS99', 'docs123', 'api4567', 'healthz', 'metrics', 'readyz1'];
    const sequence = [...reserved.slice(0, 4), 'Normal0', ...reserved.slice(4), 'Normal1'];
    const script = scriptedCodes(...sequence);
    const issued: string[] = [];
    await withApp(
      async (drawing) => {
        for (let i = 0; i < 2; i++) {
          const res = await createLink(drawing, 'https://example.com/reserved');
          assert.equal(res.status, 201, JSON.stringify(res.body));
          issued.push((res.body.data as { code: string }).code);
        }
      },
      { deps: { generateCode: script.generateCode } },
    );
    assert.deepEqual(script.drawn, sequence);
    assert.deepEqual(issued, ['Normal0', 'Normal1']);
    assert.equal((await ctx.pool.query('SELECT 1 FROM links WHERE code = ANY($1)', [reserved])).rowCount, 0);
  });

  it('covers every one-segment GET path of the app and the web UI paths', async () => {
    for (const path of ['/healthz', '/metrics', '/readyz', '/docs', '/admin', '/stats/abcdefg', '/assets/app.js', '/api/links']) {
      const segment = path.split('/')[1]!;
      assert.ok(isReservedCode(`${segment}${'0'.repeat(7 - segment.length)}`.slice(0, 7)), path);
    }
    assert.deepEqual([...RESERVED_CODE_PREFIXES].sort(), ['admin', 'api', 'assets', 'docs', 'healthz', 'metrics', 'readyz', 'stats']);
    assert.equal(isReservedCode('adminXY'.toUpperCase()), true);
    assert.equal(isReservedCode('Xadmin1'), false);
  });
});

describe("DELETE /api/links/:code and the link's visits", () => {
  it('takes the visits with it: the visits endpoint and the stats page answer 404, no visit row is left, other links keep theirs', async () => {
    const code = await createCode(ctx.app, 'https://example.com/visited-then-deleted');
    const kept = await createCode(ctx.app, 'https://example.com/kept');
    for (const [c, ip] of [
      [code, '192.0.2.1'],
      [code, '192.0.2.2'],
      [kept, '192.0.2.1'],
    ] as const) {
      assert.equal(
        (await ctx.app.inject({ method: 'GET', url: `/${c}`, headers: { 'user-agent': 'Mozilla/5.0 Firefox/121.0' }, remoteAddress: ip }))
          .statusCode,
        302,
      );
    }
    const rowsOf = async (c: string) => {
      const { rows } = await ctx.pool.query<{ counts: number; visitors: number }>(
        `SELECT (SELECT count(*) FROM visit_counts WHERE code = $1)::int AS counts, (SELECT count(*) FROM daily_visitors WHERE code = $1)::int AS visitors`,
        [c],
      );
      return rows[0]!;
    };
    assert.deepEqual(await rowsOf(code), { counts: 1, visitors: 2 });
    assert.equal((await ctx.app.inject({ method: 'DELETE', url: `/api/links/${code}`, headers: AUTH })).statusCode, 200);

    const visits = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}/visits`, headers: AUTH });
    assert.equal(visits.statusCode, 404);
    assert.equal(assertEnvelope(visits.json(), 404, 'Not Found'), 'Link not found');
    const page = await ctx.app.inject({ method: 'GET', url: `/stats/${code}` });
    assert.equal(page.statusCode, 404);
    assert.match(page.body, /<title>Link not found<\/title>/);
    assert.deepEqual(await rowsOf(code), { counts: 0, visitors: 0 });
    assert.deepEqual(await rowsOf(kept), { counts: 1, visitors: 1 });
    const keptVisits = await ctx.app.inject({ method: 'GET', url: `/api/links/${kept}/visits`, headers: AUTH });
    assert.equal((keptVisits.json() as { data: { totals: { visits: number } } }).data.totals.visits, 1);
  });
});
