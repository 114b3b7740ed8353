import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import { createPool, migrate, type Pool } from '../src/kit/db.js';
import { freshDatabase, type TestDatabase } from './helpers/database.js';
import { startShortener, shortenerMigrations } from './helpers/shortener.js';

// An existing database (links and clicks under 001 only) is brought forward
// by the later migrations without losing a link or a click.

let db: TestDatabase;
let pool: Pool;

before(async () => {
  const all = await shortenerMigrations();
  assert.equal(all[0]!.name, '001_links.sql');
  db = await freshDatabase('shortener', all.slice(0, 1));
  pool = createPool(db.url, { max: 4 });
});

after(async () => {
  await pool.end();
  await db.drop();
});

describe('shortener migrations on a database with data', () => {
  it('keep every link and click of the 001 schema; old links redirect and start counting visits', async () => {
    const { rows: columns } = await pool.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'links'");
    assert.deepEqual(columns.map((c) => c.column_name).sort(), ['clicks', 'code', 'created_at', 'original_url']);
    await pool.query(
      `INSERT INTO links (code, original_url, clicks, created_at)
       SELECT 'Old' || lpad(i::text, 4, '0'), 'https://example.com/old/' || i, i * 7, '2025-01-01T00:00:00Z'::timestamptz + i * interval '1 hour'
       FROM generate_series(1, 500) AS i`,
    );
    const snapshot = async () =>
      (
        await pool.query<{ code: string; original_url: string; clicks: number; created_at: Date }>(
          'SELECT code, original_url, clicks, created_at FROM links ORDER BY code',
        )
      ).rows;
    const before = await snapshot();

    const applied = await migrate(pool, 'shortener', await shortenerMigrations());
    assert.ok(applied.length >= 2 && !applied.includes('001_links.sql'), applied.join());
    assert.deepEqual(await snapshot(), before);
    const { rows } = await pool.query(
      'SELECT count(*)::int AS n, sum(clicks)::int AS clicks, bool_or(disabled) AS disabled, count(expires_at)::int AS expiring, count(max_visits)::int AS capped FROM links',
    );
    assert.deepEqual(rows[0], { n: 500, clicks: (7 * (500 * 501)) / 2, disabled: false, expiring: 0, capped: 0 });
    const visits = await pool.query('SELECT count(*)::int AS n FROM visit_counts');
    assert.equal(visits.rows[0].n, 0);

    // Old links work: stats unchanged plus state, and a redirect counts a click with its visit.
    const { app } = await startShortener({ pool, clock: manualClock(Date.UTC(2026, 10, 20, 12)) });
    try {
      const stats = await app.inject({ method: 'GET', url: '/api/links/Old0003' });
      assert.deepEqual((stats.json() as { data: unknown }).data, {
        code: 'Old0003',
        original_url: 'https://example.com/old/3',
        clicks: 21,
        createdAt: '2025-01-01T03:00:00.000Z',
        state: 'active',
      });
      const res = await app.inject({ method: 'GET', url: '/Old0003' });
      assert.equal(res.statusCode, 302);
      const after = await pool.query(
        "SELECT clicks, (SELECT sum(visits)::int FROM visit_counts WHERE code = 'Old0003') AS visits FROM links WHERE code = 'Old0003'",
      );
      // Clicks from before the upgrade have no visits: visits equal the clicks counted since.
      assert.deepEqual(after.rows[0], { clicks: 22, visits: 1 });
      // Running the migrations again changes nothing.
      assert.deepEqual(await migrate(pool, 'shortener', await shortenerMigrations()), []);
    } finally {
      await app.close();
    }
  });
});

describe('upgrade from the release before owners (migrations 001-005) with data', () => {
  it('keeps links, clicks, visits and tombstones; old links get no token or owner, the admin key manages them, and they can be edited', async () => {
    const all = await shortenerMigrations();
    const previous = all.filter((m) => m.name < '006');
    assert.deepEqual(
      previous.map((m) => m.name),
      ['001_links.sql', '002_link_lifecycle.sql', '003_visits.sql', '004_deleted_codes.sql', '005_visit_days.sql'],
    );
    const old = await freshDatabase('shortener', previous);
    const oldPool = createPool(old.url, { max: 4 });
    const adminKey = `upgrade-admin-${'k'.repeat(24)}`;
    try {
      await oldPool.query(
        `INSERT INTO links (code, original_url, clicks, max_visits, created_at)
         SELECT 'Prv' || lpad(i::text, 4, '0'), 'https://example.com/prev/' || i, i, CASE WHEN i % 2 = 0 THEN 1000 END, now() - interval '1 day'
         FROM generate_series(1, 200) AS i`,
      );
      await oldPool.query(
        `INSERT INTO visit_counts (code, hour, class, referrer, browser, os, device, visits)
         VALUES ('Prv0005', date_trunc('hour', now()) - interval '2 hours', 'human', '(direct)', 'Chrome', 'Linux', 'desktop', 5)`,
      );
      await oldPool.query("INSERT INTO deleted_codes (code) VALUES ('Gone123')");
      const snapshot = async () =>
        (await oldPool.query('SELECT code, original_url, clicks, max_visits, created_at FROM links ORDER BY code')).rows;
      const before = await snapshot();

      const applied = await migrate(oldPool, 'shortener', all);
      assert.deepEqual(
        applied,
        all.filter((m) => m.name >= '006').map((m) => m.name),
      );
      assert.deepEqual(await snapshot(), before);
      const { rows } = await oldPool.query(
        'SELECT count(manage_token_hash)::int AS tokens, count(owner_key_id)::int AS owners, count(title)::int AS titles FROM links',
      );
      assert.deepEqual(rows[0], { tokens: 0, owners: 0, titles: 0 });

      const { app } = await startShortener({ pool: oldPool, env: { SHORTENER_ADMIN_KEY: adminKey } });
      try {
        const admin = { authorization: `Bearer ${adminKey}` };
        const visits = await app.inject({ method: 'GET', url: '/api/links/Prv0005/visits?interval=hour', headers: admin });
        assert.equal(visits.statusCode, 200);
        assert.equal((visits.json() as { data: { totals: { visits: number } } }).data.totals.visits, 5);
        // No token was ever issued for an old link: none manages it but the admin (and manager keys).
        assert.equal(
          (await app.inject({ method: 'GET', url: '/api/links/Prv0005/visits', headers: { authorization: `Bearer ${'A'.repeat(43)}` } }))
            .statusCode,
          403,
        );
        const edited = await app.inject({
          method: 'PATCH',
          url: '/api/links/Prv0006',
          payload: { url: 'https://example.com/prev/6-moved' },
          headers: admin,
        });
        assert.equal(edited.statusCode, 200);
        assert.equal((await app.inject({ method: 'GET', url: '/Prv0006' })).headers.location, 'https://example.com/prev/6-moved');
        // The tombstone of the previous release still keeps its code from being chosen again.
        const reuse = await app.inject({ method: 'POST', url: '/api/links', payload: { url: 'https://example.com/x', alias: 'Gone123' } });
        assert.equal(reuse.statusCode, 409);
      } finally {
        await app.close();
      }
    } finally {
      await oldPool.end();
      await old.drop();
    }
  });
});

describe('upgrade from the release with device rules (migrations 001-012) with data', () => {
  it('keeps links, visits and rollups; old visits have no country, old links no password; both work with the new ones', async () => {
    const all = await shortenerMigrations();
    const previous = all.filter((m) => m.name < '013');
    assert.equal(previous.at(-1)!.name, '012_link_rules.sql');
    const old = await freshDatabase('shortener', previous);
    const oldPool = createPool(old.url, { max: 4 });
    const adminKey = `upgrade-admin-${'k'.repeat(24)}`;
    try {
      await oldPool.query(
        `INSERT INTO links (code, original_url, clicks, rules, tags, created_at)
         VALUES ('Rel0012', 'https://example.com/rel', 9, '{"desktop": "https://example.com/desk"}', '{spring}', '2026-01-01T00:00:00Z'),
                ('Plain12', 'https://example.com/plain', 0, NULL, '{}', '2026-01-02T00:00:00Z')`,
      );
      // Two hourly rows on a day already rolled up, one on a day not yet: the same combination would clash on the new key if it were wrong.
      await oldPool.query(
        `INSERT INTO visit_counts (code, hour, class, referrer, browser, os, device, visits) VALUES
           ('Rel0012', '2026-01-05T10:00:00Z', 'human', '(direct)', 'Chrome', 'Windows', 'desktop', 4),
           ('Rel0012', '2026-01-05T11:00:00Z', 'bot', '(direct)', '(unknown)', '(unknown)', '(unknown)', 2),
           ('Rel0012', '2026-01-07T09:00:00Z', 'human', 't.co', 'Chrome', 'Windows', 'desktop', 3)`,
      );
      await oldPool.query(
        `INSERT INTO visit_days (code, day, class, referrer, browser, os, device, visits) VALUES
           ('Rel0012', '2026-01-05', 'human', '(direct)', 'Chrome', 'Windows', 'desktop', 4),
           ('Rel0012', '2026-01-05', 'bot', '(direct)', '(unknown)', '(unknown)', '(unknown)', 2)`,
      );
      await oldPool.query("UPDATE visit_rollup SET before = '2026-01-06'");
      const links = async () =>
        (await oldPool.query('SELECT code, original_url, clicks, rules, tags, created_at FROM links ORDER BY code')).rows;
      const before = await links();

      const applied = await migrate(oldPool, 'shortener', all);
      assert.deepEqual(
        applied,
        all.filter((m) => m.name >= '013').map((m) => m.name),
      );
      assert.deepEqual(await links(), before);
      const { rows: hashes } = await oldPool.query('SELECT count(password_hash)::int AS n FROM links');
      assert.equal(hashes[0].n, 0);
      const { rows: countries } = await oldPool.query(
        "SELECT (SELECT count(*) FROM visit_counts WHERE country <> '')::int AS hourly, (SELECT count(*) FROM visit_days WHERE country <> '')::int AS daily",
      );
      assert.deepEqual(countries[0], { hourly: 0, daily: 0 });

      const { app } = await startShortener({ pool: oldPool, env: { SHORTENER_ADMIN_KEY: adminKey, TRUST_PROXY: '127.0.0.1' } });
      try {
        const admin = { authorization: `Bearer ${adminKey}` };
        // Old visits: the same report as before, their country not known.
        const report = await app.inject({ method: 'GET', url: '/api/links/Rel0012/visits?from=2026-01-04&to=2026-01-08', headers: admin });
        assert.equal(report.statusCode, 200, report.body);
        const data = (report.json() as { data: { totals: { visits: number; bots: number }; countries: unknown } }).data;
        assert.equal(data.totals.visits, 9);
        assert.equal(data.totals.bots, 2);
        assert.deepEqual(data.countries, [{ name: null, visits: 9 }]);
        // Old links redirect (rules included) and new visits carry their country.
        const follow = await app.inject({
          method: 'GET',
          url: '/Rel0012',
          remoteAddress: '127.0.0.1',
          headers: { 'x-forwarded-for': '8.8.8.8', 'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0 Safari/537.36' },
        });
        assert.equal(follow.statusCode, 302);
        assert.equal(follow.headers.location, 'https://example.com/desk');
        const { rows } = await oldPool.query("SELECT sum(visits)::int AS n FROM visit_counts WHERE code = 'Rel0012' AND country = 'US'");
        assert.equal(rows[0].n, 1);
        // An old link takes a password like a new one.
        const patched = await app.inject({ method: 'PATCH', url: '/api/links/Plain12', payload: { password: 'upgrade' }, headers: admin });
        assert.equal(patched.statusCode, 200, patched.body);
        assert.equal((await app.inject({ method: 'GET', url: '/Plain12' })).statusCode, 403);
        const unlocked = await app.inject({ method: 'POST', url: '/Plain12', payload: { password: 'upgrade' } });
        assert.equal(unlocked.statusCode, 302);
        assert.equal(unlocked.headers.location, 'https://example.com/plain');
        const exported = await app.inject({ method: 'GET', url: '/api/links/Rel0012/visits/export?format=csv', headers: admin });
        assert.equal(exported.body.split('\r\n').length - 2, 4);
      } finally {
        await app.close();
      }
    } finally {
      await oldPool.end();
      await old.drop();
    }
  });
});
