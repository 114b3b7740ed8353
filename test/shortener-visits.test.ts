import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { randomCode } from '../src/shortener/codes.js';
import { LinkService } from '../src/shortener/links.js';
import { LinkRepository } from '../src/shortener/repository.js';
import { AgentParser, classifyAgent, DIRECT, referrerHost } from '../src/shortener/visits.js';
import { fileDatabase, watchQueries } from './helpers/database.js';
import {
  assertEnvelope,
  startShortener,
  clicksOf,
  createCode,
  shortenerDatabase,
  TEST_ADMIN_AUTH,
  TEST_ADMIN_KEY,
  withShortener,
} from './helpers/shortener.js';

// Visit analytics: what a counted redirect records, that it commits with the
// click, that nothing identifying is kept, and the visits endpoint.

const HUMAN_AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0',
  'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (iPad; CPU OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36',
  // In-app browsers are people reading the link inside the app.
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/443.0.0.40.108;FBBV/540000000;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/17.1;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 309.0.0.28.111 (iPhone14,5; iOS 17_1; en_US; en; scale=3.00; 1170x2532; 536988435)',
];

const PREVIEW_AGENTS = [
  'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
  'Slack-ImgProxy (+https://api.slack.com/robots)',
  'Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)',
  'Twitterbot/1.0',
  'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)',
  'WhatsApp/2.23.20.0 A',
  'TelegramBot (like TwitterBot)',
  'LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)',
  // iMessage's link preview.
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0',
  'Mozilla/5.0 (compatible; redditbot/1.0; +http://www.reddit.com/feedback)',
  'Mastodon/4.2.1 (http.rb/5.1.1; +https://mastodon.social/) Bot',
];

const BOT_AGENTS = [
  'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
  'Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)',
  'Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)',
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36',
  'curl/8.4.0',
  'python-requests/2.31.0',
  'Go-http-client/1.1',
  'Wget/1.21.4',
  '',
];

const db = fileDatabase(shortenerDatabase);

/** A shortener on this file's database with a clock of its own, set to `start`. */
function withApp<T>(
  fn: (app: App, clock: ReturnType<typeof manualClock>) => Promise<T>,
  start = Date.UTC(2026, 10, 20, 10, 30),
): Promise<T> {
  const clock = manualClock(start);
  return withShortener({ pool: db.pool, clock, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } }, (app) => fn(app, clock));
}

const visit = (app: App, code: string, headers: Record<string, string> = {}, ip = '203.0.113.9') =>
  app.inject({ method: 'GET', url: `/${code}`, headers, remoteAddress: ip });

async function visitTotal(code: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT coalesce(sum(visits), 0)::int AS n FROM visit_counts WHERE code = $1', [
    code,
  ]);
  return rows[0]!.n;
}

interface VisitsBody {
  data: {
    code: string;
    state: string;
    from: string;
    to: string;
    interval: string;
    totals: { visits: number; humans: number; bots: number; previews: number; unique_visitors: number };
    series: Array<{ start: string; visits: number; humans: number }>;
    referrers: Array<{ name: string; visits: number }>;
    browsers: Array<{ name: string; visits: number }>;
    operating_systems: Array<{ name: string; visits: number }>;
    devices: Array<{ name: string; visits: number }>;
  };
}

describe('traffic class', () => {
  it('labels link-unfurling agents preview, other automated agents bot, and the rest human', () => {
    for (const ua of HUMAN_AGENTS) assert.equal(classifyAgent(ua), 'human', ua);
    for (const ua of PREVIEW_AGENTS) assert.equal(classifyAgent(ua), 'preview', ua);
    for (const ua of BOT_AGENTS) assert.equal(classifyAgent(ua), 'bot', ua);
    assert.equal(classifyAgent(undefined), 'bot');
  });
});

describe('referrer', () => {
  it('keeps the host only, (direct) when there is none', () => {
    assert.equal(referrerHost(undefined), DIRECT);
    assert.equal(referrerHost(''), DIRECT);
    assert.equal(referrerHost('https://News.Example.com:8443/a/b?secret=token#frag'), 'news.example.com');
    assert.equal(referrerHost('http://user:pass@example.org/'), 'example.org');
    assert.equal(referrerHost('android-app://com.slack/'), 'android-app:com.slack');
    assert.equal(referrerHost('not a url'), '(unknown)');
    assert.equal(referrerHost('javascript:alert(1)'), '(unknown)');
  });
});

describe('browser, OS and device', () => {
  it('are families from ua-parser-js, cached in an LRU that never outgrows its bound', () => {
    const parser = new AgentParser(3);
    assert.deepEqual(parser.families(HUMAN_AGENTS[4]), { class: 'human', browser: 'Mobile Safari', os: 'iOS', device: 'mobile' });
    assert.deepEqual(parser.families(HUMAN_AGENTS[5]), { class: 'human', browser: 'Mobile Safari', os: 'iOS', device: 'tablet' });
    assert.deepEqual(parser.families(HUMAN_AGENTS[2]), { class: 'human', browser: 'Firefox', os: 'Linux', device: 'desktop' });
    assert.deepEqual(parser.families('curl/8.4.0'), { class: 'bot', browser: '(unknown)', os: '(unknown)', device: '(unknown)' });
    for (let i = 0; i < 50; i++) parser.families(`agent ${i}`);
    assert.equal(parser.size, 3);
    // Least recently used goes first: a hit keeps an entry.
    const recent = new AgentParser(2);
    const a = recent.families('agent a');
    recent.families('agent b');
    recent.families('agent a');
    recent.families('agent c');
    assert.equal(recent.families('agent a'), a, 'agent a was evicted although used recently');
  });
});

describe('a visit commits with its click', () => {
  it('a failing visit write rolls back the whole batch: no click, no visit, 503 for every request in it', async () => {
    await withApp(async (app) => {
      const code = await createCode(app, 'https://example.com/atomic');
      // A constraint only this referrer breaks makes the visit part of the statement fail.
      await db.pool.query("ALTER TABLE visit_counts ADD CONSTRAINT refuse_test_referrer CHECK (referrer <> 'fail.example')");
      try {
        const [failing, sameBatch] = await Promise.all([
          visit(app, code, { referer: 'https://fail.example/' }),
          visit(app, code, { referer: 'https://fine.example/' }),
        ]);
        assert.equal(failing.statusCode, 503);
        assertEnvelope(failing.json(), 503, 'Service Unavailable');
        assert.equal(sameBatch.statusCode, 503);
        assert.equal(await clicksOf(db.pool, code), 0);
        assert.equal(await visitTotal(code), 0);
      } finally {
        await db.pool.query('ALTER TABLE visit_counts DROP CONSTRAINT refuse_test_referrer');
      }
      const ok = await visit(app, code, { referer: 'https://fail.example/' });
      assert.equal(ok.statusCode, 302);
      assert.equal(await clicksOf(db.pool, code), 1);
      assert.equal(await visitTotal(code), 1);
    });
  });

  it('after concurrent redirects with mixed agents, visits equal clicks, per class and per visitor', async () => {
    await withApp(async (app) => {
      const code = await createCode(app, 'https://example.com/mixed');
      const agents = [...HUMAN_AGENTS, ...PREVIEW_AGENTS, ...BOT_AGENTS];
      const requests = Array.from({ length: 300 }, (_, i) => ({ ua: agents[i % agents.length]!, ip: `198.51.100.${i % 7}` }));
      const responses = await Promise.all(requests.map((r) => visit(app, code, { 'user-agent': r.ua }, r.ip)));
      assert.ok(responses.every((r) => r.statusCode === 302));
      assert.equal(await clicksOf(db.pool, code), 300);
      assert.equal(await visitTotal(code), 300);
      const { rows } = await db.pool.query<{ class: string; n: number }>(
        'SELECT class, sum(visits)::int AS n FROM visit_counts WHERE code = $1 GROUP BY class',
        [code],
      );
      const byClass = Object.fromEntries(rows.map((r) => [r.class, r.n]));
      const expected = { human: 0, preview: 0, bot: 0 };
      for (const r of requests) expected[classifyAgent(r.ua)] += 1;
      assert.deepEqual(byClass, expected);
      const uniques = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM daily_visitors WHERE code = $1', [code]);
      assert.equal(uniques.rows[0]!.n, new Set(requests.map((r) => `${r.ip} ${r.ua}`)).size);
    });
  });

  it('HEAD records no visit', async () => {
    await withApp(async (app) => {
      const code = await createCode(app, 'https://example.com/head-visit');
      const res = await app.inject({ method: 'HEAD', url: `/${code}` });
      assert.equal(res.statusCode, 302);
      assert.equal(await visitTotal(code), 0);
    });
  });
});

describe('privacy', () => {
  it('no client address and no full User-Agent is anywhere in the shortener tables after traffic', async () => {
    await withApp(async (app) => {
      const code = await createCode(app, 'https://example.com/private');
      const ips = ['192.0.2.77', '2001:db8::4242', '::ffff:192.0.2.78'];
      const agents = [
        'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0 PrivacyCanary/9.9',
        'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots) PrivacyCanary',
        'curl/8.4.0-PrivacyCanary',
      ];
      for (const ip of ips)
        for (const ua of agents)
          assert.equal(
            (await visit(app, code, { 'user-agent': ua, referer: 'https://ref.example/path?user=PrivacyCanary' }, ip)).statusCode,
            302,
          );
      const { rows: tables } = await db.pool.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'schema_migrations'",
      );
      assert.ok(tables.length >= 4, tables.map((t) => t.table_name).join());
      let dump = '';
      for (const { table_name: table } of tables) {
        const { rows } = await db.pool.query<{ row: string }>(`SELECT t::text AS row FROM "${table}" AS t`);
        dump += rows.map((r) => r.row).join('\n');
      }
      assert.match(dump, /ref\.example/, 'the dump is not empty');
      const hex = (text: string) => Buffer.from(text).toString('hex');
      for (const needle of [
        '192.0.2.77',
        '192.0.2.78',
        '2001:db8::4242',
        'PrivacyCanary',
        'Gecko/20100101',
        'rv:121.0',
        'api.slack.com',
        '/path?user',
      ]) {
        assert.ok(!dump.includes(needle), `found ${needle}`);
        assert.ok(!dump.includes(hex(needle)), `found ${needle} as hex`);
      }
    });
  });

  it('the visitor key changes with the UTC day, instances share the day salt, and past salts are deleted', async () => {
    await withApp(async (app, clock) => {
      const code = await createCode(app, 'https://example.com/salt');
      const { app: other } = await startShortener({ pool: db.pool, clock });
      try {
        const headers = { 'user-agent': HUMAN_AGENTS[0]! };
        await visit(app, code, headers, '192.0.2.10');
        await visit(other, code, headers, '192.0.2.10');
        const keys = async () =>
          (
            await db.pool.query<{ day: string; key: string }>(
              "SELECT day::text, encode(visitor_key, 'hex') AS key FROM daily_visitors WHERE code = $1 ORDER BY day",
              [code],
            )
          ).rows;
        assert.equal((await keys()).length, 1, 'two instances, one visitor on one day');
        const salts = async () =>
          (await db.pool.query<{ day: string }>('SELECT day::text FROM visitor_salts ORDER BY day')).rows.map((r) => r.day);
        assert.deepEqual(await salts(), ['2026-11-20']);

        clock.advance(24 * 3_600_000);
        await visit(app, code, headers, '192.0.2.10');
        const [first, second] = await keys();
        assert.equal(second!.day, '2026-11-21');
        assert.notEqual(first!.key, second!.key);
        assert.deepEqual(await salts(), ['2026-11-21']);
        // The other instance moves to the same new salt.
        await visit(other, code, headers, '192.0.2.10');
        assert.equal((await keys()).length, 2);

        // A day with no visit at all: the periodic sweep deletes the past day's salt.
        clock.advance(24 * 3_600_000);
        const service = new LinkService(new LinkRepository(db.pool), randomCode, () => false, clock);
        assert.equal(await service.sweepSalts(), 1);
        assert.deepEqual(await salts(), []);
      } finally {
        await other.close();
      }
    });
  });
});

describe('GET /api/links/:code/visits', () => {
  it('defaults to the last 30 days by day, every bucket present, totals equal the series', async () => {
    await withApp(async (app, clock) => {
      const code = await createCode(app, 'https://example.com/defaults');
      await visit(app, code, { 'user-agent': HUMAN_AGENTS[0]! });
      clock.advance(-3 * 24 * 3_600_000);
      await visit(app, code, { 'user-agent': BOT_AGENTS[0]! });
      clock.advance(3 * 24 * 3_600_000);
      const res = await app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: `/api/links/${code}/visits` });
      assert.equal(res.statusCode, 200);
      const body = res.json() as VisitsBody & { status: number; response: string; message: string };
      assert.equal(body.status, 200);
      assert.equal(body.response, 'OK');
      const d = body.data;
      assert.equal(d.code, code);
      assert.equal(d.state, 'active');
      assert.equal(d.interval, 'day');
      assert.equal(d.to, '2026-11-20T10:30:00.000Z');
      assert.equal(d.from, '2026-10-21T10:30:00.000Z');
      assert.equal(d.series.length, 31);
      assert.equal(d.series[0]!.start, '2026-10-21T00:00:00.000Z');
      assert.equal(d.series.at(-1)!.start, '2026-11-20T00:00:00.000Z');
      assert.equal(d.series.filter((b) => b.visits === 0).length, 29);
      assert.deepEqual(
        d.series.find((b) => b.start === '2026-11-17T00:00:00.000Z'),
        { start: '2026-11-17T00:00:00.000Z', visits: 1, humans: 0 },
      );
      assert.deepEqual(d.series.at(-1), { start: '2026-11-20T00:00:00.000Z', visits: 1, humans: 1 });
      assert.deepEqual(d.totals, { visits: 2, humans: 1, bots: 1, previews: 0, unique_visitors: 2 });
      assert.equal(
        d.totals.visits,
        d.series.reduce((s, b) => s + b.visits, 0),
      );
      assert.deepEqual(d.devices, [
        { name: '(unknown)', visits: 1 },
        { name: 'desktop', visits: 1 },
      ]);
    });
  });

  it('hour buckets are UTC-aligned, zeros included, totals the sum of the series, top 10 most visited first', async () => {
    await withApp(async (app, clock) => {
      const code = await createCode(app, 'https://example.com/hours');
      // Referrer i gets i+1 visits, all in the 10:00 hour; one more at 12:05.
      for (let i = 0; i < 12; i++) {
        await Promise.all(
          Array.from({ length: i + 1 }, () =>
            visit(app, code, { 'user-agent': HUMAN_AGENTS[i % HUMAN_AGENTS.length]!, referer: `https://r${i}.example/x` }),
          ),
        );
      }
      clock.set(Date.UTC(2026, 10, 20, 12, 5));
      await visit(app, code, { 'user-agent': PREVIEW_AGENTS[0]! });
      const res = await app.inject({
        method: 'GET',
        headers: TEST_ADMIN_AUTH,
        url: `/api/links/${code}/visits?from=2026-11-20T09:45:00Z&to=2026-11-20T13:00:00%2B00:00&interval=hour`,
      });
      assert.equal(res.statusCode, 200, res.body);
      const d = (res.json() as VisitsBody).data;
      assert.deepEqual(
        d.series.map((b) => [b.start, b.visits, b.humans]),
        [
          ['2026-11-20T09:00:00.000Z', 0, 0],
          ['2026-11-20T10:00:00.000Z', 78, 78],
          ['2026-11-20T11:00:00.000Z', 0, 0],
          ['2026-11-20T12:00:00.000Z', 1, 0],
        ],
      );
      assert.deepEqual(d.totals, { visits: 79, humans: 78, bots: 0, previews: 1, unique_visitors: d.totals.unique_visitors });
      assert.equal(
        d.totals.visits,
        d.series.reduce((s, b) => s + b.visits, 0),
      );
      assert.equal(d.referrers.length, 10);
      assert.deepEqual(d.referrers.slice(0, 3), [
        { name: 'r11.example', visits: 12 },
        { name: 'r10.example', visits: 11 },
        { name: 'r9.example', visits: 10 },
      ]);
      for (let i = 1; i < d.referrers.length; i++) assert.ok(d.referrers[i - 1]!.visits >= d.referrers[i]!.visits);
      assert.ok(d.browsers.length > 1 && d.operating_systems.length > 1);
      assert.equal(
        d.browsers.reduce((s, b) => s + b.visits, 0),
        79,
      );
      // to = 12:00 leaves out the 12:05 visit's hour.
      const early = await app.inject({
        method: 'GET',
        headers: TEST_ADMIN_AUTH,
        url: `/api/links/${code}/visits?from=2026-11-20T10:00:00Z&to=2026-11-20T12:00:00Z&interval=hour`,
      });
      assert.deepEqual(
        (early.json() as VisitsBody).data.series.map((b) => b.visits),
        [78, 0],
      );
    });
  });

  it('every invalid parameter is a 400 that names it', async () => {
    await withApp(async (app) => {
      const code = await createCode(app, 'https://example.com/bad-params');
      const cases: Array<[string, RegExp]> = [
        ['interval=week', /interval/],
        ['interval=', /interval/],
        ['from=yesterday', /from/],
        ['from=2026-11-01T00:00:00', /from/],
        ['from=2026-02-30', /from/],
        ['to=2026-13-01', /to/],
        ['to=1', /to/],
        ['from=2026-11-10&to=2026-11-10', /from.*to/],
        ['from=2026-11-11&to=2026-11-10', /from.*to/],
        ['from=2026-01-01&to=2026-02-02&interval=hour', /interval=hour/],
        ['from=2024-01-01&to=2025-01-02', /interval=day/],
        ['from=2026-11-01&from=2026-11-02', /from/],
      ];
      for (const [query, pattern] of cases) {
        const res = await app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: `/api/links/${code}/visits?${query}` });
        assert.equal(res.statusCode, 400, `${query}: ${res.body}`);
        assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), pattern, query);
      }
      // The longest ranges allowed.
      for (const query of ['from=2026-01-01&to=2026-02-01&interval=hour', 'from=2025-01-01&to=2026-01-02']) {
        const res = await app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: `/api/links/${code}/visits?${query}` });
        assert.equal(res.statusCode, 200, `${query}: ${res.body}`);
      }
    });
  });

  it('a malformed code is a 404 without any query; an unknown code a 404', async () => {
    await withApp(async (app) => {
      const watch = watchQueries(db.pool);
      try {
        for (const url of ['/api/links/ab/visits', '/api/links/a.b.c/visits', '/api/links/abc%20def/visits?interval=hour']) {
          const res = await app.inject({ method: 'GET', url, headers: TEST_ADMIN_AUTH });
          assert.equal(res.statusCode, 404, url);
          assertEnvelope(res.json(), 404, 'Not Found');
        }
      } finally {
        watch.stop();
      }
      assert.deepEqual(watch.queries, []);
      const unknown = await app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: '/api/links/zzzzzzz/visits' });
      assert.equal(unknown.statusCode, 404);
      assertEnvelope(unknown.json(), 404, 'Not Found');
    });
  });
});

describe('privacy of the logs', () => {
  it('no log line carries the client address or the User-Agent, at debug level, from a socket or a trusted proxy', async () => {
    await withShortener({ pool: db.pool, env: { LOG_LEVEL: 'debug', TRUST_PROXY: '127.0.0.1' } }, async (app, { logs }) => {
      const code = await createCode(app, 'https://example.com/quiet-logs');
      const agent = 'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0 LogCanary/7.7';
      const direct = await app.inject({ method: 'GET', url: `/${code}`, headers: { 'user-agent': agent }, remoteAddress: '192.0.2.201' });
      const forwarded = await app.inject({
        method: 'GET',
        url: `/${code}`,
        headers: { 'user-agent': agent, 'x-forwarded-for': '2001:db8::5151' },
        remoteAddress: '127.0.0.1',
      });
      assert.deepEqual([direct.statusCode, forwarded.statusCode], [302, 302]);
      const lines = logs.lines();
      assert.ok(lines.filter((l) => l.msg === 'request completed').length >= 3, 'requests are logged');
      assert.ok(
        lines.some((l) => (l.req as { url?: string } | undefined)?.url === `/${code}`),
        'with their URL',
      );
      const text = logs.text();
      for (const needle of ['192.0.2.201', '2001:db8::5151', 'LogCanary', 'Gecko/20100101', 'remoteAddress', 'remotePort']) {
        assert.ok(!text.includes(needle), `found ${needle} in the logs`);
      }
    });
  });
});

describe('GET /api/links/:code/visits at the edges of time', () => {
  it('the latest and earliest instants accepted answer 200 with every bucket, never a 5xx', async () => {
    await withApp(async (app) => {
      const code = await createCode(app, 'https://example.com/edges');
      const cases: Array<[string, number]> = [
        // The range's last day is 9999-12-31, so its unique-visitor days end in the year 10000.
        ['to=9999-12-31T23:59:59Z', 31],
        ['to=9999-12-31T23:59:59Z&interval=hour&from=9999-12-31T00:00:00Z', 24],
        ['from=9999-12-30&to=9999-12-31T23:59:59.999-00:00', 2],
        ['from=1970-01-01&to=1970-01-02', 1],
        // The default from lies before 1970 here.
        ['to=1970-01-02', 30],
      ];
      for (const [query, buckets] of cases) {
        const res = await app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: `/api/links/${code}/visits?${query}` });
        assert.equal(res.statusCode, 200, `${query}: ${res.body}`);
        const d = (res.json() as VisitsBody).data;
        assert.equal(d.series.length, buckets, query);
        assert.deepEqual(d.totals, { visits: 0, humans: 0, bots: 0, previews: 0, unique_visitors: 0 }, query);
      }
    });
  });
});

describe('unique visitors', () => {
  it("are the sum of each UTC day's distinct (address, agent) pairs over the days the range touches", async () => {
    await withApp(async (app, clock) => {
      const code = await createCode(app, 'https://example.com/uniques');
      const [firefox, chrome] = [HUMAN_AGENTS[2]!, HUMAN_AGENTS[0]!];
      // Day 1: A three times (once through its IPv4-mapped spelling), B (same address, other agent), C (other address).
      for (const ip of ['192.0.2.50', '192.0.2.50', '::ffff:192.0.2.50']) await visit(app, code, { 'user-agent': firefox }, ip);
      await visit(app, code, { 'user-agent': chrome }, '192.0.2.50');
      await visit(app, code, { 'user-agent': firefox }, '192.0.2.51');
      // Day 2: A twice.
      clock.advance(24 * 3_600_000);
      await visit(app, code, { 'user-agent': firefox }, '192.0.2.50');
      await visit(app, code, { 'user-agent': firefox }, '192.0.2.50');
      const totals = async (query: string) => {
        const res = await app.inject({ method: 'GET', headers: TEST_ADMIN_AUTH, url: `/api/links/${code}/visits?${query}` });
        assert.equal(res.statusCode, 200, res.body);
        const { visits, unique_visitors } = (res.json() as VisitsBody).data.totals;
        return { visits, unique_visitors };
      };
      assert.deepEqual(await totals('from=2026-11-20&to=2026-11-22'), { visits: 7, unique_visitors: 4 });
      assert.deepEqual(await totals('from=2026-11-20&to=2026-11-21'), { visits: 5, unique_visitors: 3 });
      assert.deepEqual(await totals('from=2026-11-21T00:00:00Z&to=2026-11-21T23:00:00Z&interval=hour'), { visits: 2, unique_visitors: 1 });
    });
  });
});

describe('top lists', () => {
  it('each of referrers, browsers, operating systems and devices holds the 10 names with most visits, most first, ties by name', async () => {
    await withApp(async (app) => {
      const code = await createCode(app, 'https://example.com/tops');
      // Stored rows as the click batch leaves them: 15 names per dimension, n01…n13 with 1…13 visits and two with 14.
      const rows = Array.from({ length: 15 }, (_, i) => {
        const n = i === 14 ? 14 : i + 1;
        const name = i === 14 ? 'tie-a' : i === 13 ? 'tie-b' : `n${String(n).padStart(2, '0')}`;
        return { name, n };
      });
      for (const { name, n } of rows) {
        // Spread over two hours and two classes, so a name's visits are summed across rows.
        for (const [hour, cls, share] of [
          ['2026-11-20T08:00:00Z', 'human', Math.ceil(n / 2)],
          ['2026-11-20T09:00:00Z', 'bot', Math.floor(n / 2)],
        ] as const) {
          if (share === 0) continue;
          await db.pool.query(
            `INSERT INTO visit_counts (code, hour, class, referrer, browser, os, device, visits) VALUES ($1, $2, $3, $4, $4, $4, $4, $5)`,
            [code, hour, cls, name, share],
          );
        }
      }
      const res = await app.inject({
        method: 'GET',
        headers: TEST_ADMIN_AUTH,
        url: `/api/links/${code}/visits?from=2026-11-20&to=2026-11-21`,
      });
      assert.equal(res.statusCode, 200, res.body);
      const d = (res.json() as VisitsBody).data;
      const expected = [
        { name: 'tie-a', visits: 14 },
        { name: 'tie-b', visits: 14 },
        { name: 'n13', visits: 13 },
        { name: 'n12', visits: 12 },
        { name: 'n11', visits: 11 },
        { name: 'n10', visits: 10 },
        { name: 'n09', visits: 9 },
        { name: 'n08', visits: 8 },
        { name: 'n07', visits: 7 },
        { name: 'n06', visits: 6 },
      ];
      for (const list of ['referrers', 'browsers', 'operating_systems', 'devices'] as const) assert.deepEqual(d[list], expected, list);
      assert.equal(
        d.totals.visits,
        rows.reduce((s, r) => s + r.n, 0),
      );
    });
  });
});
