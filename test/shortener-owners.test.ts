import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { uniqueIp } from './helpers/client-ips.js';
import { bearer } from './helpers/http.js';
import { assertEnvelope, startShortener, TEST_ADMIN_AUTH, TEST_ADMIN_KEY, issueApiKey, sharedShortener } from './helpers/shortener.js';

// Owners: API keys issued by the admin (author: its own links; manager: every
// link), links that belong to the key that created them, and editing by a
// link's manager. Every route of a link's manager is tried across the role
// boundaries.

const ctx = sharedShortener({ env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } });
async function create(url: string, headers: Record<string, string> = {}, extra: object = {}) {
  const res = await ctx.app.inject({ method: 'POST', url: '/api/links', payload: { url, ...extra }, headers, remoteAddress: uniqueIp() });
  return { status: res.statusCode, body: res.json() as { data: { code: string; manage_token: string; title?: string } } };
}

async function createOk(url: string, headers: Record<string, string> = {}) {
  const res = await create(url, headers);
  assert.equal(res.status, 201);
  return { code: res.body.data.code, token: res.body.data.manage_token };
}

/** Every route of a link's manager, as (method, url, payload) for a code. */
const managerRoutes = (code: string) =>
  [
    { method: 'GET', url: `/api/links/${code}/visits` },
    { method: 'GET', url: `/api/links/${code}/destinations` },
    { method: 'PATCH', url: `/api/links/${code}`, payload: { title: 'taken over' } },
    { method: 'DELETE', url: `/api/links/${code}` },
  ] as const;

async function listCodes(headers: Record<string, string>, q = ''): Promise<string[]> {
  const res = await ctx.app.inject({ method: 'GET', url: `/api/links?per_page=1000${q}`, headers });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { data: Array<{ code: string }> }).data.map((l) => l.code);
}

describe('API keys', () => {
  it('the admin issues a named key shown once and stored as its SHA-256; listing never shows it', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/api/admin/keys',
      payload: { name: 'Marketing', role: 'author' },
      headers: TEST_ADMIN_AUTH,
    });
    assert.equal(res.statusCode, 201);
    const data = (res.json() as { data: Record<string, unknown> }).data;
    assert.match(String(data.key), /^sk_[A-Za-z0-9_-]{43}$/);
    assert.equal(data.name, 'Marketing');
    assert.equal(data.role, 'author');
    assert.equal(data.last_used_at, null);
    const { rows } = await ctx.pool.query<{ key_hash: Buffer }>('SELECT key_hash FROM api_keys WHERE id = $1', [data.id]);
    assert.deepEqual(rows[0]!.key_hash, crypto.createHash('sha256').update(String(data.key)).digest());
    const list = await ctx.app.inject({ method: 'GET', url: '/api/admin/keys', headers: TEST_ADMIN_AUTH });
    assert.equal(list.statusCode, 200);
    assert.ok(!list.body.includes(String(data.key)));
    assert.ok(!list.body.includes('key_hash'));
  });

  it('only the admin key issues, lists and revokes keys; bad bodies are 400 naming the field', async () => {
    const manager = await issueApiKey(ctx.app, 'ops', 'manager');
    const link = await createOk('https://example.com/key-admin');
    for (const headers of [{}, bearer(manager.key), bearer(link.token)]) {
      for (const req of [
        { method: 'POST', url: '/api/admin/keys', payload: { name: 'x', role: 'manager' } },
        { method: 'GET', url: '/api/admin/keys' },
        { method: 'DELETE', url: `/api/admin/keys/${manager.id}` },
      ] as const) {
        const res = await ctx.app.inject({ ...req, headers });
        assert.equal(res.statusCode, 401, `${req.method} ${req.url} ${JSON.stringify(headers)}`);
      }
    }
    for (const [payload, field] of [
      [{ name: 'x', role: 'owner' }, 'body/role'],
      [{ name: '', role: 'author' }, 'body/name'],
      [{ name: '   ', role: 'author' }, 'body/name'],
      [{ name: 'x'.repeat(101), role: 'author' }, 'body/name'],
      [{ role: 'author' }, 'name'],
    ] as const) {
      const res = await ctx.app.inject({ method: 'POST', url: '/api/admin/keys', payload, headers: TEST_ADMIN_AUTH });
      assert.equal(res.statusCode, 400, JSON.stringify(payload));
      assert.ok(assertEnvelope(res.json(), 400, 'Bad Request').includes(field), res.body);
    }
    const unknown = await ctx.app.inject({ method: 'DELETE', url: '/api/admin/keys/999999999', headers: TEST_ADMIN_AUTH });
    assert.equal(unknown.statusCode, 404);
  });

  it('a revoked key is refused everywhere, creates included; its links stay and the admin still manages them', async () => {
    const author = await issueApiKey(ctx.app, 'leaver', 'author');
    const link = await createOk('https://example.com/leaver', bearer(author.key));
    const revoked = await ctx.app.inject({ method: 'DELETE', url: `/api/admin/keys/${author.id}`, headers: TEST_ADMIN_AUTH });
    assert.equal(revoked.statusCode, 200);
    assert.notEqual((revoked.json() as { data: { revoked_at: string | null } }).data.revoked_at, null);
    for (const req of managerRoutes(link.code)) {
      assert.equal((await ctx.app.inject({ ...req, headers: bearer(author.key) })).statusCode, 401, `${req.method} ${req.url}`);
    }
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/links', headers: bearer(author.key) })).statusCode, 401);
    const before = (await ctx.pool.query('SELECT count(*)::int AS n FROM links')).rows[0].n;
    assert.equal((await create('https://example.com/after-revoke', bearer(author.key))).status, 401);
    assert.equal((await ctx.pool.query('SELECT count(*)::int AS n FROM links')).rows[0].n, before);
    assert.equal(
      (await ctx.app.inject({ method: 'GET', url: `/api/links/${link.code}/visits`, headers: TEST_ADMIN_AUTH })).statusCode,
      200,
    );
  });

  it('records when a key was last used', async () => {
    const author = await issueApiKey(ctx.app, 'busy', 'author');
    await createOk('https://example.com/busy', bearer(author.key));
    const { rows } = await ctx.pool.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_keys WHERE id = $1', [author.id]);
    assert.ok(rows[0]!.last_used_at instanceof Date);
    assert.ok(Math.abs(rows[0]!.last_used_at.getTime() - Date.now()) < 60_000);
  });
});

describe('links of an owner', () => {
  it('a create with a key belongs to it; an anonymous create to no one and answers the contract', async () => {
    const author = await issueApiKey(ctx.app, 'owner', 'author');
    const owned = await createOk('https://example.com/owned', bearer(author.key));
    const anonymous = await create('https://example.com/anonymous');
    assert.equal(anonymous.status, 201);
    assert.deepEqual(Object.keys(anonymous.body.data).sort(), ['code', 'manage_token', 'original_url', 'short_url']);
    const { rows } = await ctx.pool.query<{ code: string; owner_key_id: number | null }>(
      'SELECT code, owner_key_id::int FROM links WHERE code = ANY($1) ORDER BY code',
      [[owned.code, anonymous.body.data.code]],
    );
    assert.deepEqual(Object.fromEntries(rows.map((r) => [r.code, r.owner_key_id])), {
      [owned.code]: author.id,
      [anonymous.body.data.code]: null,
    });
  });

  it('a create with credentials that are not a live key (or the admin key) is 401 and creates nothing', async () => {
    const link = await createOk('https://example.com/token-holder');
    for (const headers of [bearer(link.token), bearer(`sk_${'a'.repeat(43)}`), bearer('nonsense'), { authorization: 'Basic x' }]) {
      const res = await create('https://example.com/not-created', headers);
      assert.equal(res.status, 401, JSON.stringify(headers));
    }
    assert.equal(
      (await ctx.pool.query("SELECT count(*)::int AS n FROM links WHERE original_url = 'https://example.com/not-created'")).rows[0].n,
      0,
    );
  });

  it("role boundaries: an author key cannot see, list, edit or delete another key's link or a manage token's; a manager can", async () => {
    const alice = await issueApiKey(ctx.app, 'alice', 'author');
    const bob = await issueApiKey(ctx.app, 'bob', 'author');
    const boss = await issueApiKey(ctx.app, 'boss', 'manager');
    const alices = await createOk('https://example.com/alice', bearer(alice.key));
    const anonymous = await createOk('https://example.com/someone');
    for (const code of [alices.code, anonymous.code]) {
      for (const req of managerRoutes(code)) {
        const res = await ctx.app.inject({ ...req, headers: bearer(bob.key) });
        assert.equal(res.statusCode, 403, `bob ${req.method} ${req.url}`);
        assertEnvelope(res.json(), 403, 'Forbidden');
      }
    }
    // A link's token manages that link only.
    for (const req of managerRoutes(alices.code)) {
      assert.equal((await ctx.app.inject({ ...req, headers: bearer(anonymous.token) })).statusCode, 403, `${req.method} ${req.url}`);
    }
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/links', headers: bearer(alices.token) })).statusCode, 401);
    // My links: each author lists its own only; the manager lists everyone's.
    assert.deepEqual(await listCodes(bearer(alice.key)), [alices.code]);
    assert.deepEqual(await listCodes(bearer(bob.key)), []);
    const all = await listCodes(bearer(boss.key));
    assert.ok(all.includes(alices.code) && all.includes(anonymous.code));
    // Nothing changed by the refused calls.
    const { rows } = await ctx.pool.query<{ title: string | null }>('SELECT title FROM links WHERE code = ANY($1)', [
      [alices.code, anonymous.code],
    ]);
    assert.deepEqual(
      rows.map((r) => r.title),
      [null, null],
    );
    // Each holder reaches what it manages.
    for (const [who, code] of [
      [alice.key, alices.code],
      [boss.key, alices.code],
      [anonymous.token, anonymous.code],
      [boss.key, anonymous.code],
    ] as const) {
      for (const req of managerRoutes(code).slice(0, 3)) {
        const res = await ctx.app.inject({ ...req, headers: bearer(who) });
        assert.equal(res.statusCode, 200, `${req.method} ${req.url}: ${res.body}`);
      }
    }
    assert.equal(
      (await ctx.app.inject({ method: 'DELETE', url: `/api/links/${alices.code}`, headers: bearer(alice.key) })).statusCode,
      200,
    );
    assert.equal(
      (await ctx.app.inject({ method: 'DELETE', url: `/api/links/${anonymous.code}`, headers: bearer(anonymous.token) })).statusCode,
      200,
    );
  });
});

describe('editing a link', () => {
  it('a new destination takes effect on the next redirect, and the one it replaced is kept', async () => {
    const { code, token } = await createOk('https://example.com/first');
    const other = await startShortener({ pool: ctx.pool, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } });
    try {
      assert.equal((await other.app.inject({ method: 'GET', url: `/${code}` })).headers.location, 'https://example.com/first');
      const res = await ctx.app.inject({
        method: 'PATCH',
        url: `/api/links/${code}`,
        payload: { url: 'https://example.com/second', title: 'Launch' },
        headers: bearer(token),
      });
      assert.equal(res.statusCode, 200, res.body);
      const data = (res.json() as { data: { original_url: string; title: string } }).data;
      assert.equal(data.original_url, 'https://example.com/second');
      assert.equal(data.title, 'Launch');
      // Another instance redirects to the new destination at once.
      assert.equal((await other.app.inject({ method: 'GET', url: `/${code}` })).headers.location, 'https://example.com/second');
    } finally {
      await other.close();
    }
    const history = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}/destinations`, headers: bearer(token) });
    assert.deepEqual(
      (history.json() as { data: Array<{ original_url: string }> }).data.map((d) => d.original_url),
      ['https://example.com/first'],
    );
    // The same destination again is no change to record; the title is cleared with null.
    await ctx.app.inject({
      method: 'PATCH',
      url: `/api/links/${code}`,
      payload: { url: 'https://example.com/second', title: null },
      headers: bearer(token),
    });
    const again = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}/destinations`, headers: bearer(token) });
    assert.equal((again.json() as { data: unknown[] }).data.length, 1);
    const stats = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal((stats.json() as { data: { original_url: string } }).data.original_url, 'https://example.com/second');
    assert.ok(!stats.body.includes('title'));
  });

  it('10 concurrent destination changes: each replaced destination is recorded once', async () => {
    const { code, token } = await createOk('https://example.com/v0');
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        ctx.app.inject({
          method: 'PATCH',
          url: `/api/links/${code}`,
          payload: { url: `https://example.com/v${i + 1}` },
          headers: bearer(token),
        }),
      ),
    );
    assert.deepEqual(
      results.map((r) => r.statusCode),
      Array(10).fill(200),
    );
    const { rows } = await ctx.pool.query<{ original_url: string }>('SELECT original_url FROM link_destinations WHERE code = $1', [code]);
    const { rows: now } = await ctx.pool.query<{ original_url: string }>('SELECT original_url FROM links WHERE code = $1', [code]);
    const seen = [...rows.map((r) => r.original_url), now[0]!.original_url].sort();
    assert.deepEqual(seen, Array.from({ length: 11 }, (_, i) => `https://example.com/v${i}`).sort());
  });

  it('an invalid destination or title is a 400 naming it, and nothing changes', async () => {
    const { code, token } = await createOk('https://example.com/stays');
    for (const [payload, text] of [
      [{ url: 'ftp://example.com/x' }, 'protocol'],
      [{ url: 'https://good.com@evil.com/' }, 'credentials'],
      [{ url: 'https://sho.rt/abcdefg' }, 'link of this shortener'],
      [{ url: '' }, 'body/url'],
      [{ url: 42 }, 'body/url'],
      [{ title: 'x'.repeat(201) }, 'body/title'],
      [{ title: 5 }, 'body/title'],
      [{ url: 'https://example.com/ok', expires_at: '2031-06-01T12:00:00' }, 'body/expires_at'],
    ] as const) {
      const res = await ctx.app.inject({ method: 'PATCH', url: `/api/links/${code}`, payload, headers: bearer(token) });
      assert.equal(res.statusCode, 400, JSON.stringify(payload));
      assert.ok(assertEnvelope(res.json(), 400, 'Bad Request').includes(text), res.body);
    }
    const { rows } = await ctx.pool.query('SELECT original_url, title FROM links WHERE code = $1', [code]);
    assert.deepEqual(rows[0], { original_url: 'https://example.com/stays', title: null });
    assert.equal((await ctx.pool.query('SELECT count(*)::int AS n FROM link_destinations WHERE code = $1', [code])).rows[0].n, 0);
  });

  it('expiry takes the same ISO 8601 forms as the create', async () => {
    const { code, token } = await createOk('https://example.com/expiry-forms');
    for (const [text, iso] of [
      ['2031-06-01T12:00:00Z', '2031-06-01T12:00:00.000Z'],
      ['2031-06-01T12:00+02:00', '2031-06-01T10:00:00.000Z'],
      ['2031-06-01T12:00:00.5-0130', '2031-06-01T13:30:00.500Z'],
    ] as const) {
      const res = await ctx.app.inject({
        method: 'PATCH',
        url: `/api/links/${code}`,
        payload: { expires_at: text },
        headers: bearer(token),
      });
      assert.equal(res.statusCode, 200, `${text}: ${res.body}`);
      assert.equal((res.json() as { data: { expires_at: string } }).data.expires_at, iso);
      const created = await create('https://example.com/expiry-create', {}, { expires_at: text });
      assert.equal(created.status, 201, text);
    }
  });

  it('tags: set at creation or changed, lower-cased and deduplicated; "my links" filtered by tag; bad tags are 400', async () => {
    const author = await issueApiKey(ctx.app, 'tagger', 'author');
    const other = await issueApiKey(ctx.app, 'other-tagger', 'author');
    const res = await create('https://example.com/tagged', bearer(author.key), { tags: ['Spring', 'sale', 'spring'] });
    assert.equal(res.status, 201);
    const code = res.body.data.code;
    assert.deepEqual((res.body.data as unknown as { tags: string[] }).tags, ['spring', 'sale']);
    await createOk('https://example.com/untagged', bearer(author.key));
    await create('https://example.com/others-spring', bearer(other.key), { tags: ['spring'] });
    assert.deepEqual(await listCodes(bearer(author.key), '&tag=SPRING'), [code]);
    const patched = await ctx.app.inject({
      method: 'PATCH',
      url: `/api/links/${code}`,
      payload: { tags: ['autumn'] },
      headers: bearer(author.key),
    });
    assert.deepEqual((patched.json() as { data: { tags: string[] } }).data.tags, ['autumn']);
    assert.deepEqual(await listCodes(bearer(author.key), '&tag=spring'), []);
    for (const tags of [['has space'], ['x'.repeat(33)], [''], [5], Array.from({ length: 11 }, (_, i) => `t${i}`), 'spring']) {
      const bad = await ctx.app.inject({ method: 'PATCH', url: `/api/links/${code}`, payload: { tags }, headers: bearer(author.key) });
      assert.equal(bad.statusCode, 400, JSON.stringify(tags));
      assert.match(assertEnvelope(bad.json(), 400, 'Bad Request'), /tags/);
      assert.equal((await create('https://example.com/bad-tags', {}, { tags })).status, 400, JSON.stringify(tags));
    }
    const { rows } = await ctx.pool.query<{ tags: string[] }>('SELECT tags FROM links WHERE code = $1', [code]);
    assert.deepEqual(rows[0]!.tags, ['autumn']);
    // Tags are for the people who manage links: the public stats do not show them.
    assert.ok(!(await ctx.app.inject({ method: 'GET', url: `/api/links/${code}` })).body.includes('autumn'));
  });
});
