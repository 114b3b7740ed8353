import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import { watchQueries } from './helpers/database.js';
import { sampleValue, scrape } from './helpers/metrics.js';
import {
  assertEnvelope,
  startShortener,
  clicksOf,
  createLink,
  TEST_ADMIN_AUTH,
  TEST_ADMIN_KEY,
  sharedShortener,
} from './helpers/shortener.js';
import { uniqueIp } from './helpers/client-ips.js';

// A link may expire, stop after max_visits, or be disabled: it then answers
// 410, counts nothing and records no visit, while stats and visits still answer.

const START = Date.UTC(2026, 10, 20, 10, 0);
const clock = manualClock(START);

const ctx = sharedShortener({ clock, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } });

async function create(body: Record<string, unknown>): Promise<string> {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/api/links',
    payload: { url: 'https://example.com/life', ...body },
    remoteAddress: uniqueIp(),
  });
  assert.equal(res.statusCode, 201, res.body);
  return (res.json() as { data: { code: string } }).data.code;
}

async function visitTotal(code: string): Promise<number> {
  const { rows } = await ctx.pool.query<{ n: number }>('SELECT coalesce(sum(visits), 0)::int AS n FROM visit_counts WHERE code = $1', [
    code,
  ]);
  return rows[0]!.n;
}

async function assertGone(code: string, reason: RegExp): Promise<void> {
  for (const method of ['GET', 'HEAD'] as const) {
    const res = await ctx.app.inject({ method, url: `/${code}` });
    assert.equal(res.statusCode, 410, `${method} ${res.body}`);
    assert.equal(res.headers.location, undefined);
    if (method === 'GET') assert.match(assertEnvelope(res.json(), 410, 'Gone'), reason);
  }
}

async function stats(code: string): Promise<Record<string, unknown>> {
  const res = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}` });
  assert.equal(res.statusCode, 200);
  return (res.json() as { data: Record<string, unknown> }).data;
}

describe('POST /api/links with expires_at and max_visits', () => {
  it('echoes them in data and in stats; a link without them keeps the old fields exactly', async () => {
    const res = await createLink(ctx.app, 'https://example.com/plain');
    assert.deepEqual(Object.keys(res.body.data as object).sort(), ['code', 'manage_token', 'original_url', 'short_url']);

    const withLimits = await ctx.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/limited', expires_at: '2026-11-21T12:00:00+02:00', max_visits: 3 },
      remoteAddress: '10.8.0.1',
    });
    assert.equal(withLimits.statusCode, 201);
    const data = (withLimits.json() as { data: Record<string, unknown> }).data;
    assert.equal(data.expires_at, '2026-11-21T10:00:00.000Z');
    assert.equal(data.max_visits, 3);
    const s = await stats(data.code as string);
    assert.deepEqual(
      { expires_at: s.expires_at, max_visits: s.max_visits, state: s.state, clicks: s.clicks },
      { expires_at: '2026-11-21T10:00:00.000Z', max_visits: 3, state: 'active', clicks: 0 },
    );
  });

  it('invalid values are a 400 naming the field', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ expires_at: 'tomorrow' }, /expires_at/],
      [{ expires_at: '2026-12-01' }, /expires_at/],
      [{ expires_at: '2026-12-01T10:00:00' }, /expires_at/],
      [{ expires_at: '2026-02-30T10:00:00Z' }, /expires_at/],
      // In UTC this is in the year 10000, which ISO 8601's four-digit years cannot show.
      [{ expires_at: '9999-12-31T23:59:59-01:00' }, /expires_at/],
      [{ expires_at: 1795392000000 }, /expires_at/],
      [{ expires_at: null }, /expires_at/],
      [{ expires_at: '2026-11-20T09:59:59Z' }, /expires_at must be in the future/],
      [{ expires_at: '2026-11-20T10:00:00Z' }, /expires_at must be in the future/],
      [{ max_visits: 0 }, /max_visits/],
      [{ max_visits: -5 }, /max_visits/],
      [{ max_visits: 1.5 }, /max_visits/],
      [{ max_visits: '10' }, /max_visits/],
      [{ max_visits: null }, /max_visits/],
      [{ max_visits: true }, /max_visits/],
      [{ max_visits: 1e15 }, /max_visits/],
    ];
    for (const [extra, pattern] of cases) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/api/links',
        payload: { url: 'https://example.com/x', ...extra },
        remoteAddress: `10.7.0.${cases.findIndex(([e]) => e === extra)}`,
      });
      assert.equal(res.statusCode, 400, `${JSON.stringify(extra)}: ${res.body}`);
      assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), pattern, JSON.stringify(extra));
    }
    const { rows } = await ctx.pool.query("SELECT count(*)::int AS n FROM links WHERE original_url = 'https://example.com/x'");
    assert.equal(rows[0].n, 0);
  });
});

describe('410 Gone', () => {
  it('an expired link answers 410 to GET and HEAD, counts nothing and records no visit; stats and visits answer 200', async () => {
    const code = await create({ expires_at: new Date(START + 3_600_000).toISOString() });
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode, 302);
    clock.set(START + 3_600_000);
    try {
      await assertGone(code, /expired at 2026-11-20T11:00:00.000Z/);
      assert.equal(await clicksOf(ctx.pool, code), 1);
      assert.equal(await visitTotal(code), 1);
      assert.equal((await stats(code)).state, 'expired');
      const visits = await ctx.app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: `/api/links/${code}/visits` });
      assert.equal(visits.statusCode, 200);
      const data = (visits.json() as { data: { state: string; totals: { visits: number } } }).data;
      assert.equal(data.state, 'expired');
      assert.equal(data.totals.visits, 1);
    } finally {
      clock.set(START);
    }
  });

  it('a disabled link answers 410 and counts nothing', async () => {
    const code = await create({});
    await ctx.pool.query('UPDATE links SET disabled = true WHERE code = $1', [code]);
    await assertGone(code, /disabled/);
    assert.equal(await clicksOf(ctx.pool, code), 0);
    assert.equal(await visitTotal(code), 0);
    assert.equal((await stats(code)).state, 'disabled');
  });

  it('a link that reached max_visits answers 410; HEAD never uses up a visit', async () => {
    const code = await create({ max_visits: 2 });
    for (let i = 0; i < 3; i++) assert.equal((await ctx.app.inject({ method: 'HEAD', url: `/${code}` })).statusCode, 302);
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode, 302);
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode, 302);
    await assertGone(code, /limit of 2 visits/);
    assert.equal(await clicksOf(ctx.pool, code), 2);
    assert.equal(await visitTotal(code), 2);
    const s = await stats(code);
    assert.equal(s.state, 'exhausted');
    assert.equal(s.clicks, 2);
  });
});

describe('max_visits under concurrency', () => {
  it('50 concurrent redirects of a link with max_visits 10: exactly 10 × 302 and 40 × 410, clicks 10, visits 10', async () => {
    const code = await create({ max_visits: 10 });
    const responses = await Promise.all(Array.from({ length: 50 }, () => ctx.app.inject({ method: 'GET', url: `/${code}` })));
    const statuses = responses.map((r) => r.statusCode);
    assert.equal(statuses.filter((s) => s === 302).length, 10);
    assert.equal(statuses.filter((s) => s === 410).length, 40);
    for (const r of responses.filter((x) => x.statusCode === 410)) assertEnvelope(r.json(), 410, 'Gone');
    assert.equal(await clicksOf(ctx.pool, code), 10);
    assert.equal(await visitTotal(code), 10);
    const metrics = await scrape(ctx.app);
    assert.ok(sampleValue(metrics, 'shortener_redirects_total', { outcome: 'gone' })! >= 40);
  });

  it('holds across two instances on one database, over real HTTP', async () => {
    const { app: other } = await startShortener({ pool: ctx.pool, clock });
    try {
      const codes = [await create({ max_visits: 10 }), await create({ max_visits: 1 }), await create({ max_visits: 37 })];
      const ports: number[] = [];
      for (const instance of [ctx.app, other]) {
        await instance.listen({ port: 0, host: '127.0.0.1' });
        ports.push((instance.server.address() as { port: number }).port);
      }
      const requests = codes.flatMap((code) => Array.from({ length: 50 }, (_, i) => ({ code, port: ports[i % 2]! })));
      const statuses = await Promise.all(
        requests.map(async ({ code, port }) => {
          const res = await fetch(`http://127.0.0.1:${port}/${code}`, { redirect: 'manual' });
          await res.arrayBuffer();
          return { code, status: res.status };
        }),
      );
      for (const [code, cap] of [
        [codes[0]!, 10],
        [codes[1]!, 1],
        [codes[2]!, 37],
      ] as const) {
        const mine = statuses.filter((s) => s.code === code);
        assert.equal(mine.filter((s) => s.status === 302).length, cap, code);
        assert.equal(mine.filter((s) => s.status === 410).length, 50 - cap, code);
        assert.equal(await clicksOf(ctx.pool, code), cap);
        assert.equal(await visitTotal(code), cap);
      }
    } finally {
      await other.close();
    }
  });
});

describe('no extra round trip for the lifecycle', () => {
  it('a redirect of a link with max_visits and expires_at is one statement, whether it answers 302 or 410', async () => {
    // The day's visitor salt is fetched once per instance and day: fetched here first.
    const warm = await create({});
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${warm}` })).statusCode, 302);
    const code = await create({ max_visits: 2, expires_at: new Date(START + 86_400_000).toISOString() });
    const watch = watchQueries(ctx.pool);
    const statuses: number[] = [];
    const queries: number[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const before = watch.queries.length;
        statuses.push((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode);
        queries.push(watch.queries.length - before);
      }
    } finally {
      watch.stop();
    }
    assert.deepEqual(statuses, [302, 302, 410]);
    assert.deepEqual(queries, [1, 1, 1], `statements per redirect: ${watch.queries.join('\n---\n')}`);
  });
});
