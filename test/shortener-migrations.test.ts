import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import { createPool, migrate, type Pool } from '../src/kit/db.js';
import { freshDatabase, type TestDatabase } from './helpers/database.js';
import { buildShortener, shortenerMigrations } from './helpers/shortener.js';

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
      (await pool.query<{ code: string; original_url: string; clicks: number; created_at: Date }>(
        'SELECT code, original_url, clicks, created_at FROM links ORDER BY code',
      )).rows;
    const before = await snapshot();

    const applied = await migrate(pool, 'shortener', await shortenerMigrations());
    assert.ok(applied.length >= 2 && !applied.includes('001_links.sql'), applied.join());
    assert.deepEqual(await snapshot(), before);
    const { rows } = await pool.query(
      'SELECT count(*)::int AS n, sum(clicks)::int AS clicks, bool_or(disabled) AS disabled, count(expires_at)::int AS expiring, count(max_visits)::int AS capped FROM links',
    );
    assert.deepEqual(rows[0], { n: 500, clicks: 7 * (500 * 501) / 2, disabled: false, expiring: 0, capped: 0 });
    const visits = await pool.query('SELECT count(*)::int AS n FROM visit_counts');
    assert.equal(visits.rows[0].n, 0);

    // Old links work: stats unchanged plus state, and a redirect counts a click with its visit.
    const { app } = await buildShortener({ pool, clock: manualClock(Date.UTC(2026, 10, 20, 12)) });
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
