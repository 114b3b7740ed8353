import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import type * as GeoipCountry from 'geoip-country';
import type { Pool } from '../src/kit/db.js';
import { countryOf } from '../src/shortener/countries.js';
import { LinkRepository } from '../src/shortener/repository.js';
import { watchQueries } from './helpers/database.js';
import { type RunningShortener, startShortener, TEST_ADMIN_AUTH, TEST_ADMIN_KEY } from './helpers/shortener.js';

// The visit's country: looked up in the process (geoip-country, GeoLite2 data) from the client
// address the redirect computes, stored with the visit, and shown by the visit detail and the
// exports. Private and loopback addresses have none.

const geoip: typeof GeoipCountry = createRequire(import.meta.url)('geoip-country');

const CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';

describe('countryOf', () => {
  it('places public addresses, IPv4, IPv6 and IPv4-mapped IPv6', () => {
    // Google's public resolvers have been in the US in every GeoLite2 release.
    assert.equal(countryOf('8.8.8.8'), 'US');
    assert.equal(countryOf('2001:4860:4860::8888'), 'US');
    assert.equal(countryOf('::ffff:8.8.8.8'), 'US');
    // Others as the package's own data places them: the answer is the data's, a bare code.
    for (const ip of ['81.2.69.142', '2a00:1450:4001:80b::200e', '2.16.0.1', '133.242.0.1']) {
      const expected = geoip.lookup(ip)?.country ?? null;
      assert.ok(expected === null || /^[A-Z]{2}$/.test(expected), ip);
      assert.equal(countryOf(ip), expected, ip);
    }
  });

  it('gives null for private, loopback, link-local, shared and unique-local addresses, and for text that is not an address', () => {
    for (const ip of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.5.4',
      '192.168.0.1',
      '100.64.0.1',
      '169.254.1.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd12:3456::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      'not an address',
      '',
      undefined,
    ]) {
      assert.equal(countryOf(ip), null, String(ip));
    }
  });
});

describe('the visit records its country', () => {
  let shortener: RunningShortener;
  let pool: Pool;

  before(async () => {
    // Behind a proxy on loopback: the client address is the forwarded one.
    shortener = await startShortener({ env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY, TRUST_PROXY: '127.0.0.1' } });
    ({ pool } = shortener);
  });
  after(() => shortener.close());

  async function create(): Promise<{ code: string; token: string }> {
    const res = await shortener.app.inject({ method: 'POST', url: '/api/links', payload: { url: 'https://example.com/geo' } });
    assert.equal(res.statusCode, 201, res.body);
    const { code, manage_token: token } = (res.json() as { data: { code: string; manage_token: string } }).data;
    return { code, token };
  }

  const visit = async (code: string, forwardedFor?: string) => {
    const res = await shortener.app.inject({
      method: 'GET',
      url: `/${code}`,
      remoteAddress: '127.0.0.1',
      headers: { 'user-agent': CHROME, ...(forwardedFor && { 'x-forwarded-for': forwardedFor }) },
    });
    assert.equal(res.statusCode, 302, res.body);
  };

  it('through X-Forwarded-For from a trusted proxy, end to end: stored, in the visit detail and both exports', async () => {
    const { code, token } = await create();
    const gb = geoip.lookup('81.2.69.142')!.country;
    await visit(code, '8.8.8.8');
    await visit(code, '203.0.113.9, 2001:4860:4860::8888'); // a client's own claim, then the address the proxy saw
    await visit(code, '81.2.69.142');
    await visit(code, '192.168.1.20');
    await visit(code); // the proxy itself, on loopback

    const { rows } = await pool.query<{ country: string; visits: string }>(
      'SELECT country, sum(visits)::text AS visits FROM visit_counts WHERE code = $1 GROUP BY country ORDER BY country',
      [code],
    );
    const stored = Object.fromEntries(rows.map((r) => [r.country, Number(r.visits)]));
    assert.equal(stored.US, 2);
    assert.equal(stored[gb], 1);
    assert.equal(stored[''], 2, 'not known: stored as the empty text');

    const auth = { authorization: `Bearer ${token}` };
    const report = await shortener.app.inject({ method: 'GET', url: `/api/links/${code}/visits`, headers: auth });
    assert.equal(report.statusCode, 200, report.body);
    const countries = (report.json() as { data: { countries: Array<{ name: string | null; visits: number }> } }).data.countries;
    assert.deepEqual(countries[0], { name: null, visits: 2 });
    assert.deepEqual(
      countries.slice(1).sort((a, b) => String(a.name).localeCompare(String(b.name))),
      [
        { name: gb, visits: 1 },
        { name: 'US', visits: 2 },
      ].sort((a, b) => a.name.localeCompare(b.name)),
    );

    const json = await shortener.app.inject({ method: 'GET', url: `/api/links/${code}/visits/export?format=json`, headers: auth });
    const exported = json.json() as Array<{ country: string | null; visits: number }>;
    assert.deepEqual(
      Object.fromEntries(
        [...new Set(exported.map((r) => r.country))].map((c) => [
          String(c),
          exported.filter((r) => r.country === c).reduce((s, r) => s + r.visits, 0),
        ]),
      ),
      { null: 2, US: 2, [gb]: 1 },
    );
    const csv = await shortener.app.inject({ method: 'GET', url: `/api/links/${code}/visits/export?format=csv`, headers: auth });
    const lines = csv.body.trim().split('\r\n');
    assert.equal(lines[0], 'hour,class,referrer,browser,os,device,visits,country');
    assert.ok(lines.some((l) => l.endsWith(',US')));
    assert.ok(
      lines.some((l) => l.endsWith(',')),
      'an unknown country is an empty cell',
    );
  });

  it('X-Forwarded-For from an untrusted peer is ignored: the socket address decides', async () => {
    const { code } = await createOn(shortener);
    const res = await shortener.app.inject({
      method: 'GET',
      url: `/${code}`,
      remoteAddress: '10.9.8.7',
      headers: { 'user-agent': CHROME, 'x-forwarded-for': '8.8.8.8' },
    });
    assert.equal(res.statusCode, 302);
    const { rows } = await pool.query('SELECT country FROM visit_counts WHERE code = $1', [code]);
    assert.deepEqual(
      rows.map((r) => r.country),
      [''],
    );
  });

  it('the lookup adds no database query to the redirect', async () => {
    const { code } = await create();
    await visit(code, '8.8.8.4'); // the day's salt is fetched by an earlier visit
    const queries = watchQueries(pool);
    try {
      await visit(code, '8.8.4.4');
      assert.equal(queries.queries.length, 1, queries.queries.join('\n'));
    } finally {
      queries.stop();
    }
  });

  it('daily rollups keep the country: a report from rolled-up days shows the same countries', async () => {
    const { code, token } = await create();
    const day = '2026-01-10';
    await pool.query(
      `INSERT INTO visit_counts (code, hour, class, referrer, browser, os, device, country, visits) VALUES
         ($1, $2::timestamptz, 'human', '(direct)', 'Chrome', 'Windows', 'desktop', 'FR', 3),
         ($1, $2::timestamptz + interval '1 hour', 'human', '(direct)', 'Chrome', 'Windows', 'desktop', '', 1)`,
      [code, `${day}T05:00:00Z`],
    );
    const url = `/api/links/${code}/visits?from=2026-01-09&to=2026-01-12`;
    const auth = { authorization: `Bearer ${token}` };
    const hourly = (await shortener.app.inject({ method: 'GET', url, headers: auth })).json() as { data: { countries: unknown } };
    const repo = new LinkRepository(pool);
    while ((await repo.rollUpVisitDay('2026-01-12')) !== undefined);
    const { rows } = await pool.query('SELECT country, visits::int FROM visit_days WHERE code = $1 ORDER BY country', [code]);
    assert.deepEqual(rows, [
      { country: '', visits: 1 },
      { country: 'FR', visits: 3 },
    ]);
    const daily = (await shortener.app.inject({ method: 'GET', url, headers: auth })).json() as { data: { countries: unknown } };
    assert.deepEqual(daily.data.countries, [
      { name: 'FR', visits: 3 },
      { name: null, visits: 1 },
    ]);
    assert.deepEqual(daily.data.countries, hourly.data.countries);
  });

  it('the table refuses anything but two capital letters or the empty text', async () => {
    const { code } = await create();
    for (const country of ['us', 'USA', 'U1']) {
      await assert.rejects(
        pool.query(
          `INSERT INTO visit_counts (code, hour, class, referrer, browser, os, device, country, visits)
           VALUES ($1, '2026-01-01T00:00:00Z', 'human', '(direct)', 'x', 'x', 'x', $2, 1)`,
          [code, country],
        ),
        /visit_counts_country_check/,
      );
    }
  });

  async function createOn(service: RunningShortener) {
    const res = await service.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/geo2' },
      headers: TEST_ADMIN_AUTH,
    });
    assert.equal(res.statusCode, 201, res.body);
    return { code: (res.json() as { data: { code: string } }).data.code };
  }
});
