import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { chooseDestination } from '../src/shortener/link-rules.js';
import { uniqueIp } from './helpers/client-ips.js';
import { watchQueries } from './helpers/database.js';
import { assertEnvelope, clicksOf, countLinks, TEST_ADMIN_AUTH, TEST_ADMIN_KEY, sharedShortener } from './helpers/shortener.js';

// Device rules and an A/B split: set on create (with a key) and by PATCH, checked like the main
// destination, and followed by the counted redirect.

let authorKey: string;

const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1';
const IPAD =
  'Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1';
const ANDROID = 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36';
const DESKTOP = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const SLACK = 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)';

const MAIN = 'https://example.com/main';
const DEVICE_RULES = {
  ios: 'https://apps.apple.com/app/id123',
  android: 'https://play.google.com/store/apps/details?id=com.example',
  desktop: 'https://example.com/desktop',
};

const ctx = sharedShortener({ env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } }, async () => {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/api/admin/keys',
    payload: { name: 'Rules', role: 'author' },
    headers: TEST_ADMIN_AUTH,
  });
  assert.equal(res.statusCode, 201, res.body);
  authorKey = (res.json() as { data: { key: string } }).data.key;
});

const keyAuth = () => ({ authorization: `Bearer ${authorKey}` });

function create(payload: object, headers: Record<string, string> = keyAuth()) {
  return ctx.app.inject({ method: 'POST', url: '/api/links', payload, headers, remoteAddress: uniqueIp() });
}

async function createWithRules(rules: object): Promise<{ code: string; token: string }> {
  const res = await create({ url: MAIN, rules });
  assert.equal(res.statusCode, 201, res.body);
  const data = (res.json() as { data: { code: string; manage_token: string; rules: unknown } }).data;
  assert.deepEqual(data.rules, rules);
  return { code: data.code, token: data.manage_token };
}

function patch(code: string, payload: object, headers: Record<string, string> = TEST_ADMIN_AUTH) {
  return ctx.app.inject({ method: 'PATCH', url: `/api/links/${code}`, payload, headers });
}

async function follow(code: string, userAgent: string): Promise<string> {
  const res = await ctx.app.inject({ method: 'GET', url: `/${code}`, headers: { 'user-agent': userAgent } });
  assert.equal(res.statusCode, 302, res.body);
  return String(res.headers.location);
}

async function visitsOf(code: string): Promise<number> {
  const { rows } = await ctx.pool.query<{ n: number }>('SELECT coalesce(sum(visits), 0)::int AS n FROM visit_counts WHERE code = $1', [
    code,
  ]);
  return rows[0]!.n;
}

describe('rules are checked like the main destination', () => {
  const refused: Array<[string, object, RegExp]> = [
    ['a device url that is not a URL', { ios: 'not a url' }, /^body\/rules\/ios: url must be a valid absolute URL$/],
    [
      'a device url with another protocol',
      { android: 'javascript:alert(1)' },
      /^body\/rules\/android: url protocol "javascript:" is not allowed/,
    ],
    ['a device url with credentials', { desktop: 'https://good.com@evil.com/' }, /^body\/rules\/desktop: url must not contain credentials/],
    ['a device url of this shortener', { ios: 'https://sho.rt/abcdefg' }, /^body\/rules\/ios: url is a link of this shortener already/],
    [
      'a split url that is not a URL',
      { split: [{ url: 'ftp://example.com/x', percent: 10 }] },
      /^body\/rules\/split\/0\/url: url protocol "ftp:"/,
    ],
    [
      'split percents adding to 100',
      {
        split: [
          { url: 'https://example.com/a', percent: 60 },
          { url: 'https://example.com/b', percent: 40 },
        ],
      },
      /^body\/rules\/split percents add to 100: they must add to at most 99/,
    ],
    [
      'a percent of 0',
      { split: [{ url: 'https://example.com/a', percent: 0 }] },
      /^body\/rules\/split\/0\/percent must be an integer from 1 to 99$/,
    ],
    [
      'a fractional percent',
      { split: [{ url: 'https://example.com/a', percent: 2.5 }] },
      /^body\/rules\/split\/0\/percent must be an integer/,
    ],
    [
      'six variants',
      { split: Array.from({ length: 6 }, (_, i) => ({ url: `https://example.com/${i}`, percent: 1 })) },
      /^body\/rules\/split must be a list of 1 to 5 variants$/,
    ],
    ['an empty split', { split: [] }, /^body\/rules\/split must be a list of 1 to 5 variants$/],
    ['an unknown key', { tablet: 'https://example.com/t' }, /^body\/rules must be an object .*not "tablet"$/],
    ['a list instead of an object', [], /^body\/rules must be an object/],
    [
      'a variant with another field',
      { split: [{ url: 'https://example.com/a', percent: 5, weight: 1 }] },
      /^body\/rules\/split\/0 must be an object \{url, percent\}, nothing else$/,
    ],
  ];

  for (const [name, rules, message] of refused) {
    it(`a create with ${name}: 400, nothing stored`, async () => {
      const before = await countLinks(ctx.pool);
      const res = await create({ url: MAIN, rules });
      assert.equal(res.statusCode, 400, res.body);
      assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), message);
      assert.equal(await countLinks(ctx.pool), before);
    });

    it(`a PATCH with ${name}: 400, the rules unchanged`, async () => {
      const { code } = await createWithRules({ ios: DEVICE_RULES.ios });
      const res = await patch(code, { rules, title: 'not applied either' });
      assert.equal(res.statusCode, 400, res.body);
      assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), message);
      const { rows } = await ctx.pool.query('SELECT rules, title FROM links WHERE code = $1', [code]);
      assert.deepEqual(rows[0], { rules: { ios: DEVICE_RULES.ios }, title: null });
    });
  }

  it('an anonymous create with rules: 400, nothing stored; without rules the contract create is unchanged', async () => {
    const before = await countLinks(ctx.pool);
    const res = await create({ url: MAIN, rules: DEVICE_RULES }, {});
    assert.equal(res.statusCode, 400);
    assert.match(assertEnvelope(res.json(), 400, 'Bad Request'), /^body\/rules need Authorization/);
    assert.equal(await countLinks(ctx.pool), before);
    const plain = await create({ url: MAIN }, {});
    assert.equal(plain.statusCode, 201);
    assert.deepEqual(Object.keys((plain.json() as { data: object }).data).sort(), ['code', 'manage_token', 'original_url', 'short_url']);
  });

  it('bulk creates check rules per item and refuse them without a key', async () => {
    const items = [
      { url: MAIN, rules: DEVICE_RULES },
      { url: MAIN, rules: { split: [{ url: 'https://example.com/a', percent: 100 }] } },
    ];
    const keyed = await ctx.app.inject({
      method: 'POST',
      url: '/api/links/bulk',
      payload: items,
      headers: keyAuth(),
      remoteAddress: uniqueIp(),
    });
    const results = (keyed.json() as { data: { results: Array<{ status: number; message: string; data?: { rules?: unknown } }> } }).data
      .results;
    assert.equal(results[0]!.status, 201, keyed.body);
    assert.deepEqual(results[0]!.data!.rules, DEVICE_RULES);
    assert.equal(results[1]!.status, 400);
    const anonymous = await ctx.app.inject({
      method: 'POST',
      url: '/api/links/bulk',
      payload: items.slice(0, 1),
      remoteAddress: uniqueIp(),
    });
    const anonymousResults = (anonymous.json() as { data: { results: Array<{ status: number; message: string }> } }).data.results;
    assert.equal(anonymousResults[0]!.status, 400);
    assert.match(anonymousResults[0]!.message, /^body\/rules need Authorization/);
  });
});

describe('device rules in the redirect', () => {
  it('iPhone and iPad go to ios, Android to android, others to desktop; previews and bots to the main destination; every 302 counted', async () => {
    const { code } = await createWithRules(DEVICE_RULES);
    assert.equal(await follow(code, IPHONE), DEVICE_RULES.ios);
    assert.equal(await follow(code, IPAD), DEVICE_RULES.ios);
    assert.equal(await follow(code, ANDROID), DEVICE_RULES.android);
    assert.equal(await follow(code, DESKTOP), DEVICE_RULES.desktop);
    assert.equal(await follow(code, SLACK), MAIN);
    assert.equal(await follow(code, 'curl/8.4.0'), MAIN);
    assert.equal(await clicksOf(ctx.pool, code), 6);
    assert.equal(await visitsOf(code), 6);
    // HEAD counts nothing and answers as GET would.
    const head = await ctx.app.inject({ method: 'HEAD', url: `/${code}`, headers: { 'user-agent': ANDROID } });
    assert.equal(head.headers.location, DEVICE_RULES.android);
    assert.equal(await clicksOf(ctx.pool, code), 6);
  });

  it('following the rules costs no query beyond the statement that counts the click', async () => {
    const { code } = await createWithRules({ ...DEVICE_RULES, split: [{ url: 'https://example.com/a', percent: 50 }] });
    await follow(code, DESKTOP); // the day's visitor salt, read once
    const watch = watchQueries(ctx.pool, { transactions: true });
    try {
      assert.equal(await follow(code, IPHONE), DEVICE_RULES.ios);
      assert.equal(await follow(code, ANDROID), DEVICE_RULES.android);
      assert.equal(await follow(code, SLACK), MAIN);
    } finally {
      watch.stop();
    }
    assert.equal(watch.queries.length, 3, watch.queries.join('\n---\n'));
    for (const sql of watch.queries) assert.match(sql, /FOR UPDATE OF l/);
  });

  it('a device without a rule goes to the main destination', async () => {
    const { code } = await createWithRules({ ios: DEVICE_RULES.ios });
    assert.equal(await follow(code, ANDROID), MAIN);
    assert.equal(await follow(code, DESKTOP), MAIN);
    assert.equal(await follow(code, IPHONE), DEVICE_RULES.ios);
  });

  it('a PATCH of the rules (manage token) takes effect on the next redirect, and null restores the main destination', async () => {
    const { code, token } = await createWithRules({ ios: DEVICE_RULES.ios });
    assert.equal(await follow(code, ANDROID), MAIN);
    const changed = await patch(code, { rules: { android: DEVICE_RULES.android } }, { authorization: `Bearer ${token}` });
    assert.equal(changed.statusCode, 200, changed.body);
    assert.deepEqual((changed.json() as { data: { rules: unknown } }).data.rules, { android: DEVICE_RULES.android });
    assert.equal(await follow(code, ANDROID), DEVICE_RULES.android);
    // The rules are replaced as a whole: the ios rule is gone.
    assert.equal(await follow(code, IPHONE), MAIN);
    const removed = await patch(code, { rules: null });
    assert.equal(removed.statusCode, 200);
    assert.equal((removed.json() as { data: { rules: unknown } }).data.rules, null);
    assert.equal(await follow(code, ANDROID), MAIN);
    const { rows } = await ctx.pool.query('SELECT rules FROM links WHERE code = $1', [code]);
    assert.equal(rows[0]!.rules, null);
  });

  it('the owner listing shows the rules; the public stats do not', async () => {
    const { code } = await createWithRules(DEVICE_RULES);
    const list = await ctx.app.inject({ method: 'GET', url: `/api/links?q=${code}`, headers: keyAuth() });
    assert.equal(list.statusCode, 200);
    assert.deepEqual((list.json() as { data: Array<{ rules: unknown }> }).data[0]!.rules, DEVICE_RULES);
    const stats = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal(stats.statusCode, 200);
    assert.ok(!('rules' in (stats.json() as { data: object }).data));
    assert.ok(!stats.body.includes('apps.apple.com'));
  });
});

describe('A/B split', () => {
  const SPLIT = [
    { url: 'https://example.com/a', percent: 30 },
    { url: 'https://example.com/b', percent: 20 },
  ];
  const expected = new Map([
    [MAIN, 0.5],
    ['https://example.com/a', 0.3],
    ['https://example.com/b', 0.2],
  ]);

  it('the selection follows a draw: variants take their percent of [0, 100) in order, the main destination the rest', () => {
    const human = { class: 'human' as const, os: 'Windows' };
    const rules = { split: SPLIT };
    assert.equal(
      chooseDestination(MAIN, rules, human, () => 0),
      SPLIT[0]!.url,
    );
    assert.equal(
      chooseDestination(MAIN, rules, human, () => 0.2999),
      SPLIT[0]!.url,
    );
    assert.equal(
      chooseDestination(MAIN, rules, human, () => 0.3),
      SPLIT[1]!.url,
    );
    assert.equal(
      chooseDestination(MAIN, rules, human, () => 0.4999),
      SPLIT[1]!.url,
    );
    assert.equal(
      chooseDestination(MAIN, rules, human, () => 0.5),
      MAIN,
    );
    assert.equal(
      chooseDestination(MAIN, rules, human, () => 0.99999),
      MAIN,
    );
    // A device rule wins over the split; a preview always gets the main destination.
    assert.equal(
      chooseDestination(MAIN, { ...rules, desktop: DEVICE_RULES.desktop }, human, () => 0),
      DEVICE_RULES.desktop,
    );
    assert.equal(
      chooseDestination(MAIN, rules, { class: 'preview', os: 'Windows' }, () => 0),
      MAIN,
    );
  });

  it('10,000 real HTTP redirects split within ±2% of the percents; clicks = visits = 302s', async () => {
    const { code } = await createWithRules({ split: SPLIT });
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = ctx.app.server.address() as AddressInfo;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const get = () =>
      new Promise<{ status: number; location: string }>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port, path: `/${code}`, agent, headers: { 'user-agent': DESKTOP } }, (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, location: String(res.headers.location) }));
          })
          .on('error', reject);
      });
    const total = 10_000;
    const seen = new Map<string, number>();
    let redirects = 0;
    try {
      // In waves of 500, so the sockets and the batches stay busy without queueing everything at once.
      for (let sent = 0; sent < total; sent += 500) {
        const answers = await Promise.all(Array.from({ length: 500 }, get));
        for (const { status, location } of answers) {
          if (status === 302) redirects++;
          seen.set(location, (seen.get(location) ?? 0) + 1);
        }
      }
    } finally {
      agent.destroy();
    }
    assert.equal(redirects, total);
    assert.deepEqual([...seen.keys()].sort(), [...expected.keys()].sort());
    for (const [url, share] of expected) {
      const measured = seen.get(url)! / total;
      assert.ok(Math.abs(measured - share) <= 0.02, `${url}: ${measured} of the redirects, configured ${share}`);
    }
    assert.equal(await clicksOf(ctx.pool, code), total);
    assert.equal(await visitsOf(code), total);
  });
});
