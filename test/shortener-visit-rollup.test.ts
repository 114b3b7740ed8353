import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { randomCode } from '../src/shortener/codes.js';
import { LinkService, VISIT_DAY_SETTLE_MS } from '../src/shortener/links.js';
import { LinkRepository } from '../src/shortener/repository.js';
import { fileDatabase } from './helpers/database.js';
import { createCode, shortenerDatabase, TEST_ADMIN_AUTH, TEST_ADMIN_KEY, withShortener } from './helpers/shortener.js';

// The daily rollups of visits (migration 005) are a copy the report reads
// instead of hourly rows: every report is the same before and after them.
// Its own database: a rollup moves a boundary shared by every link, and other
// test files move their clocks back to write visits on earlier days, which
// a real clock never does.

const AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
  'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
  'curl/8.4.0',
];
const REFERRERS = [undefined, 'https://www.google.com/', 'https://t.co/abc', 'https://news.ycombinator.com/item?id=1'];

const db = fileDatabase(shortenerDatabase);

const visit = (app: App, code: string, i: number) => {
  const referer = REFERRERS[i % REFERRERS.length];
  return app.inject({
    method: 'GET',
    url: `/${code}`,
    headers: { 'user-agent': AGENTS[i % AGENTS.length]!, ...(referer && { referer }) },
    remoteAddress: `198.51.100.${i % 7}`,
  });
};

/** The reports a dashboard asks for, over rolled-up days, partial days and today. */
const QUERIES = [
  '',
  '?interval=day&from=2026-11-10&to=2026-11-20',
  '?interval=day&from=2026-11-13T05:00:00Z&to=2026-11-19T17:00:00Z',
  '?interval=hour&from=2026-11-16T00:00:00Z&to=2026-11-18T00:00:00Z',
  '?interval=hour&from=2026-11-19T11:00:00Z&to=2026-11-20T11:00:00Z',
];

async function reports(app: App, code: string): Promise<unknown[]> {
  return Promise.all(
    QUERIES.map(async (q) => {
      const res = await app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: `/api/links/${code}/visits${q}` });
      assert.equal(res.statusCode, 200, q);
      return (res.json() as { data: unknown }).data;
    }),
  );
}

async function rolledBefore(): Promise<string> {
  const { rows } = await db.pool.query<{ before: string }>('SELECT before::text AS before FROM visit_rollup');
  return rows[0]!.before;
}

describe('daily rollups of visits', () => {
  it('change no report, roll each day once (also when instances race), and leave the last hour of settling alone', async () => {
    const clock = manualClock(Date.UTC(2026, 10, 12, 9, 15));
    await withShortener({ pool: db.pool, clock, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } }, async (app) => {
      const code = await createCode(app, 'https://example.com/rolled');
      const quiet = await createCode(app, 'https://example.com/quiet');
      // Visits on 9 days, a few hours each, ending today (2026-11-20) at 10:00.
      let i = 0;
      for (let day = 0; day < 9; day++) {
        for (const hour of [0, 7, 13, 23]) {
          clock.set(Date.UTC(2026, 10, 12 + day, hour, 20));
          if (clock() > Date.UTC(2026, 10, 20, 10)) break;
          for (let n = 0; n < 1 + ((day + hour) % 4); n++) assert.equal((await visit(app, code, i++)).statusCode, 302);
        }
      }
      clock.set(Date.UTC(2026, 10, 20, 10, 30));
      const hourly = await reports(app, code);
      assert.equal(await rolledBefore(), '-infinity');

      // Two instances roll up at once: each day is rolled once.
      const service = () => new LinkService(new LinkRepository(db.pool), randomCode, () => false, clock);
      const [a, b] = await Promise.all([service().rollUpVisits(), service().rollUpVisits()]);
      assert.equal(await rolledBefore(), '2026-11-20');
      assert.ok(a + b >= 8, `${a} + ${b} days`);
      const { rows } = await db.pool.query<{ days: number; visits: number }>(
        'SELECT count(DISTINCT day)::int AS days, sum(visits)::int AS visits FROM visit_days WHERE code = $1',
        [code],
      );
      const { rows: hourlyRows } = await db.pool.query<{ visits: number }>(
        "SELECT sum(visits)::int AS visits FROM visit_counts WHERE code = $1 AND hour < '2026-11-20T00:00:00Z'",
        [code],
      );
      assert.deepEqual(rows[0], { days: 8, visits: hourlyRows[0]!.visits });
      assert.deepEqual(await reports(app, code), hourly, 'the reports read from daily rows are those read from hourly rows');
      assert.equal(await service().rollUpVisits(), 0, 'nothing left to roll up');

      // Today keeps counting on top of the rolled-up days.
      assert.equal((await visit(app, code, i++)).statusCode, 302);
      const after = (await reports(app, code))[0] as { totals: { visits: number } };
      assert.equal(after.totals.visits, (hourly[0] as { totals: { visits: number } }).totals.visits + 1);
      const quietReport = (await reports(app, quiet))[0] as { totals: { visits: number } };
      assert.equal(quietReport.totals.visits, 0);

      // Half an hour into the next day, the day just over is still settling: not rolled up.
      clock.set(Date.UTC(2026, 10, 21, 0, 30));
      assert.equal(await service().rollUpVisits(), 0);
      assert.equal(await rolledBefore(), '2026-11-20');
      clock.set(Date.UTC(2026, 10, 21) + VISIT_DAY_SETTLE_MS);
      const beforeRoll = await reports(app, code);
      assert.equal(await service().rollUpVisits(), 1);
      assert.equal(await rolledBefore(), '2026-11-21');
      assert.deepEqual(await reports(app, code), beforeRoll);
    });
  });

  it('go with their link when it is deleted', async () => {
    const { rows } = await db.pool.query<{ code: string }>('SELECT DISTINCT code FROM visit_days');
    assert.ok(rows.length > 0);
    await db.pool.query('DELETE FROM links WHERE code = ANY($1)', [rows.map((r) => r.code)]);
    const left = await db.pool.query<{ n: number }>(
      'SELECT (SELECT count(*) FROM visit_days)::int + (SELECT count(*) FROM visitor_days)::int AS n',
    );
    assert.equal(left.rows[0]!.n, 0);
  });
});
