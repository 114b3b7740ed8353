// REST writes are bounded: rows and bytes per request, and writes per caller per minute (counted
// before the write runs, so concurrency cannot pass the limit). Before these bounds, 10 concurrent
// inserts of 20,000 notes each were all accepted: 200,000 rows in 4.5 s from one user.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { manualClock } from '../src/kit/clock.js';
import { loadConfig } from '../src/kit/config.js';
import { idpConfig } from '../src/idp/config.js';
import { createUser, sharedIdp, startIdp, TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { withoutRedis } from './helpers/redis.js';
import { serviceClient, userClient } from './helpers/supabase.js';

const noteCount = async (db: pg.Client) => (await db.query('select count(*)::int as n from public.notes')).rows[0].n as number;

describe('with the default settings', () => {
  const ctx = sharedIdp();

  test('10 concurrent inserts of 20,000 notes: none is accepted (413 PGRST102), nothing is written', async (t) => {
    const user = await createUser(ctx.idp, 'bulk@example.com');
    // Raw requests, as the attack sent them (supabase-js itself spends about 0.7 s of CPU listing the
    // columns of 20,000 rows before sending).
    const rows = Array.from({ length: 20_000 }, (_, i) => ({ title: `bulk ${i}` }));
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => idpRequest(ctx.idp, 'POST', '/rest/v1/notes', { token: user.token, body: rows })),
    );
    const elapsed = Date.now() - started;
    for (const r of results) {
      assert.equal(r.status, 413);
      assert.deepEqual(r.body, {
        code: 'PGRST102',
        details: 'At most 10000 rows may be written by one request; this one has 20000.',
        hint: 'Send the rows in several requests.',
        message: 'Too many rows in the request body',
      });
    }
    assert.equal(await noteCount(ctx.db), 0);
    t.diagnostic(`10 concurrent inserts of 20,000 rows: 10 × 413 in ${elapsed} ms, 0 rows written`);
  });

  test('a body over 1 MiB is 413 before it is read whole; 10,000 rows in one insert are accepted', async () => {
    const user = await createUser(ctx.idp, 'bytes@example.com');
    const big = await idpRequest(ctx.idp, 'POST', '/rest/v1/notes', {
      token: user.token,
      body: { title: 'x', body: 'y'.repeat(1024 * 1024) },
    });
    assert.equal(big.status, 413);
    assert.equal((big.body as { code: string }).code, 'PGRST102');
    const rows = Array.from({ length: 10_000 }, (_, i) => ({ title: `n${i}` }));
    const accepted = await idpRequest(ctx.idp, 'POST', '/rest/v1/notes', { token: user.token, body: rows });
    assert.equal(accepted.status, 201, accepted.text);
    assert.equal(await noteCount(ctx.db), 10_000);
  });

  test('defaults: 1 MiB, 10,000 rows a request, 50,000 rows written per caller a minute; nonsense is refused at start', () => {
    const keys = { IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY, IDP_SECRET_KEY: TEST_SECRET_KEY };
    const config = loadConfig(idpConfig, keys);
    assert.equal(config.IDP_REST_MAX_BODY_BYTES, 1024 * 1024);
    assert.equal(config.IDP_REST_MAX_ROWS, 10_000);
    assert.equal(config.IDP_REST_WRITES_PER_MINUTE, 50_000);
    assert.deepEqual(config.IDP_REST_SCHEMAS, ['public']);
    assert.equal(config.IDP_REST_TX_END, 'commit');
    assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_REST_MAX_ROWS: '0' }), /IDP_REST_MAX_ROWS must be at least 1/);
    assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_REST_SCHEMAS: 'public,auth' }), /cannot expose the schema auth/);
    assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_REST_SCHEMAS: 'public,pg_catalog' }), /cannot expose the schema pg_catalog/);
    assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_REST_SCHEMAS: 'a;b' }), /must list schema names/);
    assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_REST_TX_END: 'maybe' }), /must be one of commit/);
  });
});

describe('with low limits (100 rows a minute, 50 rows and 4 KiB a request)', () => {
  // The test's requests come through a trusted proxy, so each anonymous one has the address it names.
  const env = { IDP_REST_WRITES_PER_MINUTE: '100', IDP_REST_MAX_ROWS: '50', IDP_REST_MAX_BODY_BYTES: '4096', TRUST_PROXY: '127.0.0.1' };
  const clock = manualClock(Date.now());
  const ctx = sharedIdp({ env, clock }, async () => {
    await ctx.db.query(`create table public.guestbook (id serial primary key, line text not null);
      grant select, insert on public.guestbook to anon, service_role;
      grant usage on sequence public.guestbook_id_seq to anon, service_role;`);
  });

  const rowsOf = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => ({ title: `${prefix} ${i}` }));

  test('concurrent inserts pass the limit together: exactly as many rows as it allows, the rest 429 with Retry-After', async () => {
    const user = await createUser(ctx.idp, 'concurrent@example.com');
    const results = await Promise.all(
      Array.from({ length: 10 }, () => userClient(ctx.idp, user.token).from('notes').insert(rowsOf(20, 'c'))),
    );
    const accepted = results.filter((r) => r.status === 201).length;
    assert.equal(accepted, 5);
    assert.equal((await ctx.db.query('select count(*)::int as n from public.notes where user_id = $1', [user.id])).rows[0].n, 100);
    const refused = results.find((r) => r.status === 429)!;
    assert.equal(refused.error?.code, 'over_request_rate_limit');
    assert.equal(refused.error?.message, 'Too many writes');
    assert.match(refused.error?.details ?? '', /^At most 100 rows may be written per minute .*; try again in \d+ seconds\.$/);
    const raw = await idpRequest(ctx.idp, 'POST', '/rest/v1/notes', { token: user.token, body: { title: 'one more' } });
    assert.equal(raw.status, 429);
    assert.match(raw.headers.get('retry-after') ?? '', /^\d+$/);
  });

  test('updates and deletes count one each; a new minute starts a new count', async () => {
    const user = await createUser(ctx.idp, 'edits@example.com');
    const notes = () => userClient(ctx.idp, user.token).from('notes');
    assert.equal((await notes().insert(rowsOf(50, 'e'))).status, 201);
    assert.equal((await notes().insert(rowsOf(48, 'f'))).status, 201);
    assert.equal((await notes().update({ body: 'changed' }).like('title', 'e*')).status, 204, '99th unit');
    assert.equal((await notes().delete().like('title', 'f*')).status, 204, '100th unit');
    assert.equal((await notes().delete().like('title', 'e*')).status, 429);
    clock.advance(61_000);
    assert.equal((await notes().delete().like('title', 'e*')).status, 204);
  });

  test('each user has their own count, anon counts per address, the secret key is not limited', async () => {
    const [a, b] = await Promise.all([createUser(ctx.idp, 'own-a@example.com'), createUser(ctx.idp, 'own-b@example.com')]);
    assert.equal((await userClient(ctx.idp, a.token).from('notes').insert(rowsOf(50, 'a'))).status, 201);
    assert.equal((await userClient(ctx.idp, a.token).from('notes').insert(rowsOf(50, 'a'))).status, 201);
    assert.equal((await userClient(ctx.idp, a.token).from('notes').insert(rowsOf(1, 'a'))).status, 429);
    assert.equal((await userClient(ctx.idp, b.token).from('notes').insert(rowsOf(1, 'b'))).status, 201);
    const guest = (ip: string, n: number) =>
      idpRequest(ctx.idp, 'POST', '/rest/v1/guestbook', {
        headers: { 'x-forwarded-for': ip },
        body: Array.from({ length: n }, () => ({ line: 'hi' })),
      });
    assert.equal((await guest('198.51.100.1', 50)).status, 201);
    assert.equal((await guest('198.51.100.1', 50)).status, 201);
    assert.equal((await guest('198.51.100.1', 1)).status, 429);
    assert.equal((await guest('198.51.100.2', 1)).status, 201);
    for (let i = 0; i < 3; i++) {
      const { status } = await serviceClient(ctx.idp)
        .from('notes')
        .insert(Array.from({ length: 50 }, () => ({ title: 'admin', user_id: a.id })));
      assert.equal(status, 201);
    }
  });

  test('anonymous writes from IPv6 count per /64 and, at 16 times the limit, per /48', async () => {
    const guest = (ip: string) =>
      idpRequest(ctx.idp, 'POST', '/rest/v1/guestbook', {
        headers: { 'x-forwarded-for': ip },
        body: Array.from({ length: 50 }, () => ({ line: 'v6' })),
      });
    // 16 /64s of one /48 each write their 100 rows: the site's 1,600.
    for (let net = 0; net < 16; net++) {
      for (let i = 0; i < 2; i++) assert.equal((await guest(`2001:db8:77:${net.toString(16)}::1`)).status, 201, `/64 ${net}`);
    }
    // A 17th /64 of the same /48 has its own 100 left, but the site has none.
    assert.equal((await guest('2001:db8:77:ff::1')).status, 429);
    assert.equal((await guest('2001:db8:78::1')).status, 201);
  });

  test('rows and bytes per request: 413 before anything is counted or written', async () => {
    const user = await createUser(ctx.idp, 'caps@example.com');
    const tooMany = await userClient(ctx.idp, user.token).from('notes').insert(rowsOf(51, 'r'));
    assert.equal(tooMany.status, 413);
    assert.equal(tooMany.error?.details, 'At most 50 rows may be written by one request; this one has 51.');
    const tooBig = await userClient(ctx.idp, user.token)
      .from('notes')
      .insert({ title: 'x', body: 'y'.repeat(5000) });
    assert.equal(tooBig.status, 413);
    // Neither counted: the whole minute's rows are still there to write.
    assert.equal((await userClient(ctx.idp, user.token).from('notes').insert(rowsOf(50, 'r'))).status, 201);
    assert.equal((await userClient(ctx.idp, user.token).from('notes').insert(rowsOf(50, 'r'))).status, 201);
  });

  test("two instances sharing Redis share each caller's count", { skip: withoutRedis }, async () => {
    const shared = { ...env, REDIS_URL: process.env.REDIS_URL! };
    const first = await startIdp({ env: shared });
    const second = await startIdp({ env: shared, databaseUrl: first.databaseUrl });
    try {
      const user = await createUser(first, 'shared-writes@example.com');
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          userClient(i % 2 ? first : second, user.token)
            .from('notes')
            .insert(rowsOf(20, 's')),
        ),
      );
      assert.equal(results.filter((r) => r.status === 201).length, 5);
      const written = new pg.Client({ connectionString: first.databaseUrl });
      await written.connect();
      try {
        assert.equal((await written.query('select count(*)::int as n from public.notes where user_id = $1', [user.id])).rows[0].n, 100);
      } finally {
        await written.end();
      }
    } finally {
      await second.close();
      await first.close();
    }
  });
});
