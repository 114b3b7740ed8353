import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { App } from '../src/kit/http/app.js';
import { connectRedis } from '../src/kit/redis.js';
import { uniqueIp } from './helpers/client-ips.js';
import { bearer } from './helpers/http.js';
import { watchQueries } from './helpers/database.js';
import { waitReady, withoutRedis } from './helpers/redis.js';
import {
  assertEnvelope,
  countLinks,
  startShortener,
  TEST_ADMIN_AUTH,
  scriptedCodes,
  TEST_ADMIN_KEY,
  issueApiKey,
  sharedShortener,
} from './helpers/shortener.js';

// POST /api/links/bulk: many creates in one request, each answered as the single
// create would have answered it; the per-address limit (anonymous) and the
// per-key quota (API keys) counted per item, also under concurrency.

const ctx = sharedShortener({ env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } });
interface ItemResult {
  status: number;
  response: string;
  message: string;
  data?: { code: string; short_url: string; original_url: string; manage_token: string; title?: string; tags?: string[] };
}
interface BulkBody {
  status: number;
  message: string;
  data: { created: number; refused: number; results: ItemResult[] };
}

function bulk(target: App, items: unknown, headers: Record<string, string> = {}, ip = uniqueIp()) {
  return target.inject({ method: 'POST', url: '/api/links/bulk', payload: items as object, headers, remoteAddress: ip });
}

const urls = (n: number, label: string) => Array.from({ length: n }, (_, i) => ({ url: `https://example.com/${label}/${i}` }));
const createdOf = (body: BulkBody) => body.data.results.filter((r) => r.status === 201).length;

describe('bulk create: items', () => {
  it('creates the good items and answers each bad one with the error the single create gives it, in order', async () => {
    const taken = await ctx.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/taken', alias: 'bulk-taken' },
      remoteAddress: uniqueIp(),
    });
    assert.equal(taken.statusCode, 201);
    const gone = await ctx.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/gone', alias: 'bulk-gone' },
      remoteAddress: uniqueIp(),
    });
    assert.equal((await ctx.app.inject({ method: 'DELETE', url: '/api/links/bulk-gone', headers: TEST_ADMIN_AUTH })).statusCode, 200);
    const items: unknown[] = [
      { url: 'https://example.com/one' },
      { url: 'ftp://example.com/file' },
      {
        url: 'https://example.com/two',
        alias: 'bulk-two',
        title: 'Two, "quoted"',
        tags: ['Spring', 'sale'],
        expires_at: '2099-01-01T00:00:00+01:00',
        max_visits: 3,
      },
      { url: 'https://example.com/dup', alias: 'bulk-two' },
      5,
      { title: 'no url' },
      { url: 'https://sho.rt/abcdefg' },
      { url: 'https://example.com/past', expires_at: '2001-01-01T00:00:00Z' },
      { url: 'https://example.com/taken-again', alias: 'bulk-taken' },
      { url: 'https://example.com/gone-again', alias: 'bulk-gone' },
      { url: 'https://example.com/reserved', alias: 'export' },
      { url: 'https://example.com/bad-alias', alias: 'a b' },
      { url: 'https://example.com/bad-tags', tags: ['no spaces'] },
      { url: 'https://example.com/three' },
    ];
    const before = await countLinks(ctx.pool);
    const res = await bulk(ctx.app, items, TEST_ADMIN_AUTH);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as BulkBody;
    assert.equal(body.status, 200);
    const statuses = body.data.results.map((r) => r.status);
    assert.deepEqual(statuses, [201, 400, 201, 409, 400, 400, 400, 400, 409, 409, 400, 400, 400, 201]);
    assert.equal(body.data.created, 3);
    assert.equal(body.data.refused, 11);
    assert.equal(await countLinks(ctx.pool), before + 3);

    const two = body.data.results[2]!;
    assert.deepEqual(two, {
      status: 201,
      response: 'Created',
      message: 'Short link created successfully',
      data: {
        code: 'bulk-two',
        short_url: 'https://sho.rt/bulk-two',
        original_url: 'https://example.com/two',
        expires_at: '2098-12-31T23:00:00.000Z',
        max_visits: 3,
        title: 'Two, "quoted"',
        tags: ['spring', 'sale'],
        manage_token: two.data!.manage_token,
      },
    });
    // Each manage token manages its own link.
    const visits = await ctx.app.inject({ method: 'GET', url: '/api/links/bulk-two/visits', headers: bearer(two.data!.manage_token) });
    assert.equal(visits.statusCode, 200);
    const stats = await ctx.app.inject({ method: 'GET', url: `/api/links/${body.data.results[0]!.data!.code}` });
    assert.equal((stats.json() as { data: { original_url: string } }).data.original_url, 'https://example.com/one');

    // The same bodies sent one by one to the single create get the same answers.
    for (const [i, result] of body.data.results.entries()) {
      if (result.status === 201) continue;
      const single = await ctx.app.inject({ method: 'POST', url: '/api/links', payload: items[i] as object, remoteAddress: uniqueIp() });
      assert.equal(single.statusCode, result.status, `item ${i}: ${single.body}`);
      assert.equal(assertEnvelope(single.json(), single.statusCode, single.json().response), result.message, `item ${i}`);
      assert.deepEqual(Object.keys(result).sort(), ['message', 'response', 'status']);
    }
    assert.equal(gone.statusCode, 201);
  });

  it('an anonymous bulk answers each link with its manage token, and the links belong to no key', async () => {
    const res = await bulk(ctx.app, urls(3, 'anonymous'));
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['x-ratelimit-limit'], '10');
    assert.equal(res.headers['x-ratelimit-remaining'], '7');
    const body = res.json() as BulkBody;
    assert.equal(createdOf(body), 3);
    for (const r of body.data.results) {
      assert.match(r.data!.manage_token, /^[A-Za-z0-9_-]{43}$/);
      assert.match(r.data!.code, /^[0-9a-zA-Z]{7}$/);
    }
    const { rows } = await ctx.pool.query('SELECT owner_key_id FROM links WHERE code = ANY($1)', [
      body.data.results.map((r) => r.data!.code),
    ]);
    assert.deepEqual(
      rows.map((r) => r.owner_key_id),
      [null, null, null],
    );
  });

  it('links of a key belong to it', async () => {
    const author = await issueApiKey(ctx.app, 'bulk-author', 'author');
    const res = await bulk(ctx.app, urls(2, 'owned'), bearer(author.key));
    assert.equal(res.statusCode, 200);
    const codes = (res.json() as BulkBody).data.results.map((r) => r.data!.code);
    const { rows } = await ctx.pool.query<{ owner_key_id: number }>('SELECT owner_key_id::int FROM links WHERE code = ANY($1)', [codes]);
    assert.deepEqual(
      rows.map((r) => r.owner_key_id),
      [author.id, author.id],
    );
  });

  it('1,000 items of 2,048-character URLs with titles and tags fit the body limit and go in one INSERT', async () => {
    const items = Array.from({ length: 1000 }, (_, i) => {
      const prefix = `https://example.com/${i}/`;
      return { url: prefix + 'a'.repeat(2048 - prefix.length), title: 't'.repeat(200), tags: ['a', 'b', 'c'] };
    });
    const before = await countLinks(ctx.pool);
    const queries = watchQueries(ctx.pool);
    let res: Awaited<ReturnType<typeof bulk>>;
    try {
      res = await bulk(ctx.app, items, TEST_ADMIN_AUTH);
    } finally {
      queries.stop();
    }
    assert.equal(res.statusCode, 200, res.body.slice(0, 300));
    assert.ok(res.payload.length > 0);
    assert.equal((res.json() as BulkBody).data.created, 1000);
    assert.equal(await countLinks(ctx.pool), before + 1000);
    assert.equal(queries.queries.filter((q) => q.includes('INSERT INTO links')).length, 1);
  });

  it('1,001 items, an empty array, an object or invalid JSON: 400 and nothing created', async () => {
    const before = await countLinks(ctx.pool);
    for (const payload of [urls(1001, 'too-many'), [], { url: 'https://example.com/x' }]) {
      const res = await bulk(ctx.app, payload, TEST_ADMIN_AUTH);
      assert.equal(res.statusCode, 400, res.body);
      assertEnvelope(res.json(), 400, 'Bad Request');
    }
    for (const raw of ['[{"url":', 'null', '"text"']) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/api/links/bulk',
        headers: { 'content-type': 'application/json', ...TEST_ADMIN_AUTH },
        payload: raw,
        remoteAddress: uniqueIp(),
      });
      assert.equal(res.statusCode, 400, raw);
    }
    assert.equal((await bulk(ctx.app, urls(1001, 'too-many'), TEST_ADMIN_AUTH)).json().message, 'body must NOT have more than 1000 items');
    assert.equal(await countLinks(ctx.pool), before);
  });

  it('a body over 4 MiB is a 413 and creates nothing; the single create keeps its 64 KiB', async () => {
    const before = await countLinks(ctx.pool);
    const items = Array.from({ length: 1000 }, (_, i) => ({
      url: `https://example.com/${i}/${'b'.repeat(2000)}`,
      title: 'x'.repeat(2300),
    }));
    const res = await bulk(ctx.app, items, TEST_ADMIN_AUTH);
    assert.equal(res.statusCode, 413);
    assertEnvelope(res.json(), 413, 'Payload Too Large');
    const single = await ctx.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/', title: 'x'.repeat(70 * 1024) },
      remoteAddress: uniqueIp(),
    });
    assert.equal(single.statusCode, 413);
    assert.equal(await countLinks(ctx.pool), before);
  });

  it('Authorization that is not a live key is a 401 and creates nothing', async () => {
    const before = await countLinks(ctx.pool);
    for (const auth of [`Bearer sk_${'x'.repeat(43)}`, 'Bearer nonsense', 'Basic abc']) {
      const res = await bulk(ctx.app, urls(2, 'unauthorised'), { authorization: auth });
      assert.equal(res.statusCode, 401);
      assert.equal(res.headers['www-authenticate'], 'Bearer');
    }
    assert.equal(await countLinks(ctx.pool), before);
  });
});

describe('bulk create: the per-address limit counts each link', () => {
  it('items beyond the 10 a minute get a 429 each; with none left the request is a 429, single creates included', async () => {
    const ip = uniqueIp();
    const first = await bulk(ctx.app, urls(4, 'limit-a'), {}, ip);
    assert.equal(createdOf(first.json() as BulkBody), 4);
    const second = await bulk(ctx.app, urls(8, 'limit-b'), {}, ip);
    assert.equal(second.statusCode, 200);
    assert.equal(second.headers['x-ratelimit-remaining'], '0');
    const results = (second.json() as BulkBody).data.results;
    assert.deepEqual(
      results.map((r) => r.status),
      [201, 201, 201, 201, 201, 201, 429, 429],
    );
    assert.match(results[7]!.message, /^Too many requests, please try again in \d+ seconds?\.$/);
    assert.equal(results[7]!.response, 'Too Many Requests');
    const third = await bulk(ctx.app, urls(1, 'limit-c'), {}, ip);
    assert.equal(third.statusCode, 429);
    assert.match(String(third.headers['retry-after']), /^\d+$/);
    assertEnvelope(third.json(), 429, 'Too Many Requests');
    const single = await ctx.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/x' },
      remoteAddress: ip,
    });
    assert.equal(single.statusCode, 429);
  });

  it('a malformed bulk counts as one create, and single creates count against a bulk', async () => {
    const ip = uniqueIp();
    for (let i = 0; i < 3; i++) assert.equal((await bulk(ctx.app, { not: 'a list' }, {}, ip)).statusCode, 400);
    for (let i = 0; i < 2; i++) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/api/links',
        payload: { url: `https://example.com/s${i}` },
        remoteAddress: ip,
      });
      assert.equal(res.statusCode, 201);
    }
    const res = await bulk(ctx.app, urls(10, 'after-malformed'), {}, ip);
    assert.equal(createdOf(res.json() as BulkBody), 5);
  });

  it('concurrent bulks from one address create at most 10 links together', async () => {
    const ip = uniqueIp();
    const before = await countLinks(ctx.pool);
    const answers = await Promise.all(Array.from({ length: 4 }, (_, i) => bulk(ctx.app, urls(6, `race-${i}`), {}, ip)));
    const created = answers.reduce((sum, res) => sum + (res.statusCode === 200 ? createdOf(res.json() as BulkBody) : 0), 0);
    assert.equal(created, 10);
    assert.equal(await countLinks(ctx.pool), before + 10);
  });

  it('with Redis, concurrent bulks on two instances create at most 10 links together', { skip: withoutRedis }, async () => {
    const redisA = connectRedis(process.env.REDIS_URL ?? '', () => {});
    const redisB = connectRedis(process.env.REDIS_URL ?? '', () => {});
    await waitReady(redisA);
    await waitReady(redisB);
    const a = await startShortener({ pool: ctx.pool, redis: redisA });
    const b = await startShortener({ pool: ctx.pool, redis: redisB });
    try {
      const ip = uniqueIp();
      const before = await countLinks(ctx.pool);
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) => bulk(i % 2 === 0 ? a.app : b.app, urls(4, `redis-race-${i}`), {}, ip)),
      );
      const created = answers.reduce((sum, res) => sum + (res.statusCode === 200 ? createdOf(res.json() as BulkBody) : 0), 0);
      assert.equal(created, 10);
      assert.equal(await countLinks(ctx.pool), before + 10);
    } finally {
      await a.close();
      await b.close();
      redisA.disconnect();
      redisB.disconnect();
    }
  });
});

describe('bulk create: the per-key quota', () => {
  it('KEY_CREATE_PER_HOUR counts each link of a key, bulk and single; other keys and anonymous creates are apart', async () => {
    const limited = await startShortener({ pool: ctx.pool, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY, KEY_CREATE_PER_HOUR: '5' } });
    try {
      const author = await issueApiKey(limited.app, 'quota-author', 'author');
      const other = await issueApiKey(limited.app, 'quota-other', 'author');
      const first = await bulk(limited.app, urls(3, 'quota-a'), bearer(author.key));
      assert.equal(createdOf(first.json() as BulkBody), 3);
      assert.equal(first.headers['x-ratelimit-limit'], '5');
      assert.equal(first.headers['x-ratelimit-remaining'], '2');
      const second = await bulk(limited.app, urls(4, 'quota-b'), bearer(author.key));
      const results = (second.json() as BulkBody).data.results;
      assert.deepEqual(
        results.map((r) => r.status),
        [201, 201, 429, 429],
      );
      assert.match(results[3]!.message, /^This API key may create 5 links per hour: try again in \d+ seconds?\.$/);
      const single = await limited.app.inject({
        method: 'POST',
        url: '/api/links',
        payload: { url: 'https://example.com/quota-single' },
        headers: bearer(author.key),
        remoteAddress: uniqueIp(),
      });
      assert.equal(single.statusCode, 429);
      assert.match(String(single.headers['retry-after']), /^\d+$/);
      assert.equal((await bulk(limited.app, urls(1, 'quota-c'), bearer(author.key))).statusCode, 429);
      assert.equal(createdOf((await bulk(limited.app, urls(5, 'quota-other'), bearer(other.key))).json() as BulkBody), 5);
      assert.equal(createdOf((await bulk(limited.app, urls(5, 'quota-anon'))).json() as BulkBody), 5);
    } finally {
      await limited.close();
    }
  });

  it('concurrent bulks of one key create at most its quota', async () => {
    const limited = await startShortener({ pool: ctx.pool, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY, KEY_CREATE_PER_HOUR: '7' } });
    try {
      const author = await issueApiKey(limited.app, 'quota-race', 'author');
      const answers = await Promise.all(
        Array.from({ length: 4 }, (_, i) => bulk(limited.app, urls(5, `quota-race-${i}`), bearer(author.key))),
      );
      const created = answers.reduce((sum, res) => sum + (res.statusCode === 200 ? createdOf(res.json() as BulkBody) : 0), 0);
      assert.equal(created, 7);
      const { rows } = await ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links WHERE owner_key_id = $1', [author.id]);
      assert.equal(rows[0]!.n, 7);
    } finally {
      await limited.close();
    }
  });
});

describe('bulk create: codes', () => {
  it('a generated code that is taken, or already drawn for the batch, is drawn again; 5 draws spent is a 503 for that item', async () => {
    const existing = await startShortener({ pool: ctx.pool, deps: { generateCode: scriptedCodes('Bulk0a1').generateCode } });
    try {
      const first = await bulk(existing.app, urls(1, 'code-existing'));
      assert.equal((first.json() as BulkBody).data.results[0]!.data!.code, 'Bulk0a1');
    } finally {
      await existing.close();
    }
    const codes = scriptedCodes('Bulk0a1', 'Bulk0b2', 'Bulk0b2', 'Bulk0c3', 'Bulk0d4');
    const retrying = await startShortener({ pool: ctx.pool, deps: { generateCode: codes.generateCode } });
    try {
      const res = await bulk(retrying.app, urls(2, 'code-retry'));
      const results = (res.json() as BulkBody).data.results;
      // Item 0 drew the taken Bulk0a1, item 1 Bulk0b2, then Bulk0b2 again for item 0 (already the batch's), then Bulk0c3.
      assert.deepEqual(
        results.map((r) => r.data?.code),
        ['Bulk0c3', 'Bulk0b2'],
      );
    } finally {
      await retrying.close();
    }
    const stuck = await startShortener({ pool: ctx.pool, deps: { generateCode: scriptedCodes('Bulk0a1').generateCode } });
    try {
      const res = await bulk(stuck.app, [
        { url: 'https://example.com/stuck' },
        { url: 'https://example.com/alias', alias: 'bulk-alias-ok' },
      ]);
      const results = (res.json() as BulkBody).data.results;
      assert.equal(results[0]!.status, 503);
      assert.equal(results[0]!.message, 'Could not allocate a unique short code, please try again');
      assert.equal(results[1]!.status, 201);
    } finally {
      await stuck.close();
    }
  });
});

describe('bulk create: a code deleted during the INSERT', () => {
  it('the tombstone committed while the statement waits fails it whole; it runs again: that alias is a 409, the others created', async () => {
    const made = await ctx.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/race', alias: 'bulk-race' },
      remoteAddress: uniqueIp(),
    });
    assert.equal(made.statusCode, 201);
    const deleting = await ctx.pool.connect();
    try {
      await deleting.query('BEGIN');
      // What the admin delete does, held open: the row gone and its tombstone written, not yet committed.
      await deleting.query(
        'WITH gone AS (DELETE FROM links WHERE code = $1 RETURNING code) INSERT INTO deleted_codes (code) SELECT code FROM gone',
        ['bulk-race'],
      );
      const answer = bulk(
        ctx.app,
        [{ url: 'https://example.com/race-again', alias: 'bulk-race' }, { url: 'https://example.com/race-other' }],
        TEST_ADMIN_AUTH,
      );
      // The INSERT waits for the deleting transaction on the primary key.
      for (let waited = 0; ; waited += 20) {
        const { rows } = await ctx.pool.query(
          "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO links%' AND datname = current_database()",
        );
        if (rows.length > 0) break;
        assert.ok(waited < 5000, 'the bulk INSERT never waited on the delete');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await deleting.query('COMMIT');
      const res = await answer;
      assert.equal(res.statusCode, 200, res.body);
      const results = (res.json() as BulkBody).data.results;
      assert.equal(results[0]!.status, 409);
      assert.equal(results[0]!.message, 'alias "bulk-race" is taken: choose another (codes of deleted links are never reused)');
      assert.equal(results[1]!.status, 201);
      const { rows } = await ctx.pool.query('SELECT 1 FROM links WHERE code = $1', ['bulk-race']);
      assert.equal(rows.length, 0);
    } finally {
      deleting.release();
    }
  });
});
