// Property-based tests (fast-check) of every input rule, through the real validation path: the
// exported validators where they exist, and always the HTTP route too (app.inject for the
// shortener and accounts, real HTTP for notes and the idp), so schema and code are covered
// together. The seed is printed; FUZZ_SEED=<seed> replays a failing run.
//
// Decisions this file pins down (README "Reliability and security"):
// - shortener: an http(s) URL is whatever the WHATWG URL parser accepts with protocol http: or
//   https: (the spec's "parse as a URL"), at most 2048 code points, that goes where it reads:
//   original_url is shown as submitted while the redirect goes to the parser's form, so a URL
//   on which a reader and the parser disagree is refused (400): credentials or any "@" before
//   the host, a backslash before the query, tabs or line breaks anywhere (the parser deletes
//   them), no "//" after the scheme, and a host the parser rewrites beyond case, IDN punycode and
//   IPv6 compression (percent-escapes, numeric IPv4 forms). Surrounding whitespace is removed
//   by the parser: accepted, original_url is kept as submitted, and Location is the parser's
//   normalised, ASCII-only href (IDN hosts in punycode, the rest percent-encoded), never carrying
//   whitespace or control characters. A space inside the host does not parse (400). U+0000 and
//   unpaired surrogates are refused (400): they cannot be stored as given.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { domainToASCII } from 'node:url';
import fc from 'fast-check';
import { characterCount } from '../../src/accounts/validation.js';
import { CODE_PATTERN, LINK_CODE_PATTERN, randomCode } from '../../src/shortener/codes.js';
import { SHORTENER_ASSETS } from '../../src/shortener/routes/web-pages.js';
import { watchQueries } from '../helpers/database.js';
import { reportFigures } from './helpers/figures.js';
import { envelopeOf, LONE_SURROGATE, params, seed, unicodeText } from './helpers/properties.js';
import { startShortener, type RunningShortener, TEST_ADMIN_AUTH, TEST_ADMIN_KEY } from '../helpers/shortener.js';
import { uniqueIp } from '../helpers/client-ips.js';

let shortener: RunningShortener;

before(async () => {
  // The admin key set, so the admin routes are reached past authentication.
  shortener = await startShortener({ env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } });
});

after(async () => {
  await shortener?.close();
});

describe('shortener: create, redirect and stats inputs', () => {
  const created: string[] = [];

  async function create(url: string) {
    return shortener.app.inject({ method: 'POST', url: '/api/links', payload: { url }, remoteAddress: uniqueIp() });
  }

  /** The host as a person reads the text, spaces around it aside: after "http(s)://", up to / ? or #, without the port. */
  function hostAsRead(url: string): string | undefined {
    const text = url.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '');
    if (/[\t\n\r]/.test(text) || text.split(/[?#]/, 1)[0]!.includes('\\')) return undefined;
    const authority = /^https?:\/\/([^/?#]*)/i.exec(text)?.[1];
    if (!authority || authority.includes('@')) return undefined;
    return authority.replace(/:\d*$/, '');
  }

  /** Whether the host read is the host reached: case, IDN punycode and IPv6 compression aside. */
  function sameHost(read: string, reached: string): boolean {
    if (read.startsWith('[')) return reached.startsWith('[');
    if (/^[\x00-\x7f]*$/.test(read)) return read.toLowerCase() === reached;
    return !read.includes('%') && domainToASCII(read) === reached && !/^[\d.]+$/.test(reached);
  }

  /** The rule as an oracle: storable text, at most 2048 code points, parses, http(s), goes where it reads. */
  function acceptable(url: string): boolean {
    if (url.length === 0 || characterCount(url) > 2048 || url.includes('\u0000') || LONE_SURROGATE.test(url)) return false;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return false;
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return false;
    const read = hostAsRead(url);
    return read !== undefined && sameHost(read, parsed.hostname);
  }

  /** Creates, then checks the redirect and the stats of what was created. */
  async function checkUrl(url: string): Promise<void> {
    const res = await create(url);
    if (!acceptable(url)) {
      assert.equal(res.statusCode, 400, `${JSON.stringify(url)} should be refused: ${res.body}`);
      envelopeOf(res.body, 400);
      return;
    }
    assert.equal(res.statusCode, 201, `${JSON.stringify(url)} should be accepted: ${res.body}`);
    const { code, original_url } = (res.json() as { data: { code: string; original_url: string } }).data;
    assert.match(code, CODE_PATTERN);
    assert.equal(original_url, url, 'original_url is kept exactly as submitted');
    created.push(code);
    const redirect = await shortener.app.inject({ method: 'GET', url: `/${code}` });
    assert.equal(redirect.statusCode, 302);
    const location = String(redirect.headers.location);
    assert.equal(location, new URL(url).href, 'Location is the normalised URL');
    assert.ok(
      sameHost(hostAsRead(url)!, new URL(location).hostname),
      `Location ${location} is not the host ${JSON.stringify(url)} reads as`,
    );
    assert.match(location, /^[\x21-\x7e]+$/, `Location must be printable ASCII without spaces: ${JSON.stringify(location)}`);
    const stats = await shortener.app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal((stats.json() as { data: { original_url: string } }).data.original_url, url);
  }

  test('every scheme other than http and https is refused with 400 (allowlist)', async (t) => {
    const scheme = fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9+.-]{0,12}$/).filter((s) => !/^https?$/i.test(s));
    const rest = fc.oneof(
      fc.constant('//example.com/path'),
      fc.webPath(),
      fc.string({ maxLength: 40 }),
      fc.constant('alert(document.cookie)'),
    );
    const known = fc.constantFrom(
      'javascript:alert(1)',
      'JaVaScRiPt:alert(1)',
      ' javascript:alert(1)',
      '\tjavascript:alert(1)',
      'java\nscript:alert(1)',
      'data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==',
      'ftp://example.com/file',
      'file:///etc/passwd',
      'ws://example.com/',
      'wss://example.com/',
      'mailto:someone@example.com',
      'blob:https://example.com/uuid',
      'about:blank',
      'vbscript:msgbox(1)',
      'gopher://example.com/',
      'tel:+15555550100',
      '//example.com/no-scheme',
      'example.com/no-scheme',
      '/relative/path',
      'http//missing-colon.example',
    );
    const arb = fc.oneof(
      fc.tuple(scheme, rest).map(([s, r]) => `${s}:${r}`),
      known,
    );
    const before = await countLinks();
    await fc.assert(
      fc.asyncProperty(arb, async (url) => {
        const res = await create(url);
        assert.equal(res.statusCode, 400, `${JSON.stringify(url)}: ${res.body}`);
        envelopeOf(res.body, 400);
      }),
      params(400),
    );
    assert.equal(await countLinks(), before, 'a refused URL was stored');
    reportFigures(t, 'property: shortener scheme allowlist', { runs: 400, seed });
  });

  // ASCII, IDN, surrounding whitespace and unicode paths are accepted; credentials, tabs and line breaks refused.
  test('http(s) URLs: accepted exactly when they parse and go where they read; Location always ASCII', async (t) => {
    const label = fc.string({ unit: fc.constantFrom(...'abcxyzüöäßéñçø日本語中文한국어пример'), minLength: 1, maxLength: 12 });
    const idn = fc
      .tuple(
        fc.constantFrom('http', 'https', 'HTTP', 'hTTpS'),
        label,
        fc.constantFrom('com', 'de', 'рф', '中国', 'example'),
        unicodeText(20),
      )
      .map(([s, l, tld, path]) => `${s}://${l}.${tld}/${path}`);
    const withCredentials = fc
      .tuple(fc.webSegment(), fc.webSegment(), fc.webUrl())
      .map(([user, pass, url]) => url.replace('://', `://${user}:${pass}@`));
    const whitespace = fc.constantFrom(' ', '\t', '\n', '\r\n', '\f', '\u000b', '\u00a0', '\u3000', '\u200b', '\u0000');
    const padded = fc.tuple(whitespace, fc.webUrl(), whitespace).map(([a, url, b]) => `${a}${url}${b}`);
    const inside = fc.tuple(fc.webUrl({ withQueryParameters: true }), whitespace, fc.nat()).map(([url, w, at]) => {
      const i = 8 + (at % Math.max(1, url.length - 8));
      return url.slice(0, i) + w + url.slice(i);
    });
    const arb = fc.oneof(fc.webUrl({ withQueryParameters: true, withFragments: true }), idn, withCredentials, padded, inside);
    await fc.assert(fc.asyncProperty(arb, checkUrl), params(200));
    // Fixed cases the generators may miss.
    for (const url of [
      'http://user:pass@example.com/',
      'https://good.com@evil.com/',
      'http://evil.com\\@good.com/',
      'http://exa\tmple.com/',
      'http://0x7f.1/',
      'https://example.com/search?q=C:\\dir#a\\b',
      'http://[2001:DB8::1]:8080/',
      'https://bücher.example/ü?q=ä#é',
      '  https://example.com/padded  ',
      'https://exa mple.com/',
      'https://example.com/a b',
      'https://example.com/\r\nSet-Cookie: injected=1',
      'https://example.com/\u0000',
      'https://example.com/\ud800',
    ]) {
      await checkUrl(url);
    }
    reportFigures(t, 'property: shortener http(s) URLs', { runs: 208, created: created.length, seed });
  });

  test('length: 2048 code points are accepted and 2049 refused, whatever the width of the characters', async (t) => {
    const prefix = 'https://example.com/';
    const filler = fc.constantFrom('a', 'é', '€', '😀');
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2040, max: 2056 }), filler, async (total, ch) => {
        await checkUrl(prefix + ch.repeat(total - prefix.length));
      }),
      params(60),
    );
    for (const ch of ['a', '€', '😀']) {
      const at2048 = prefix + ch.repeat(2048 - prefix.length);
      assert.equal((await create(at2048)).statusCode, 201, `2048 code points of ${ch}`);
      assert.equal((await create(`${at2048}x`)).statusCode, 400, `2049 code points of ${ch}`);
    }
    reportFigures(t, 'property: shortener URL length 2048/2049', { runs: 66, seed });
  });

  test('codes: any path segment that is not ^[A-Za-z0-9_-]{3,64}$ (generated or chosen) is a 404 in the envelope without a single database query', async (t) => {
    // Paths the service serves itself: its probes, documents, API, pages (`/`, which `.` and `..`
    // resolve to, `/admin`, `/stats/…`) and their assets; everything else at the top is a code.
    const routes = /^(healthz|readyz|docs|admin|stats|assets)(\/|$)|^api(\/|$)|^\.{0,2}$/;
    const malformed = fc
      .oneof(
        fc.string({ unit: 'binary', maxLength: 300 }),
        fc.stringMatching(/^[0-9a-zA-Z_-]{0,2}$/),
        fc.stringMatching(/^[0-9a-zA-Z_-]{65,100}$/),
        fc
          .tuple(fc.stringMatching(/^[0-9a-zA-Z]{6}$/), fc.constantFrom('.', '/', '%', ' ', 'é', '\u0000', '😀'), fc.nat(6))
          .map(([s, bad, at]) => s.slice(0, at) + bad + s.slice(at)),
        fc.constantFrom('../../etc/passwd', '..%2f..%2f', "abc'; DROP TABLE links; --", 'AAAAAAA ', ' AAAAAAA', 'ＡＢＣＤＥＦＧ'),
      )
      .filter((s) => !LINK_CODE_PATTERN.test(s))
      // A lone surrogate has no UTF-8 form, so it cannot be put in a request path at all.
      .filter((s) => !LONE_SURROGATE.test(s));
    const watch = watchQueries(shortener.pool);
    let runs = 0;
    try {
      await fc.assert(
        fc.asyncProperty(malformed, fc.constantFrom('GET', 'HEAD'), async (code, method) => {
          runs += 1;
          const paths = [`/api/links/${encodeURIComponent(code)}`];
          if (!routes.test(code)) paths.push(`/${encodeURIComponent(code)}`);
          for (const url of paths) {
            const res = await shortener.app.inject({ method: method as 'GET' | 'HEAD', url });
            assert.equal(res.statusCode, 404, `${method} ${url}: ${res.body}`);
            if (method === 'GET') envelopeOf(res.body, 404);
          }
          assert.deepEqual(watch.queries, [], `a malformed code reached the database: ${JSON.stringify(code)}`);
          assert.equal(watch.connects, 0);
        }),
        params(400),
      );
    } finally {
      watch.stop();
    }
    reportFigures(t, 'property: shortener malformed codes, 0 queries', { runs, seed });
  });

  test('generated codes always match ^[0-9a-zA-Z]{7}$ (10,000 draws and every code issued above)', (t) => {
    fc.assert(
      fc.property(fc.nat(), () => CODE_PATTERN.test(randomCode())),
      params(10_000),
    );
    assert.ok(created.length > 0);
    for (const code of created) assert.match(code, CODE_PATTERN);
    reportFigures(t, 'property: shortener generated codes', { draws: 10_000, issued: created.length, seed });
  });

  async function countLinks(): Promise<number> {
    const { rows } = await shortener.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
    return rows[0]!.n;
  }
});

// The visits endpoint's parameters and the pages, through the real routes. The oracle is written
// from the rule, not from the code: a valid `from`/`to` is generated as an instant of 1970–9999
// written as a date or a timestamp with an offset, an invalid one is a near miss or any other text.
describe('shortener: visits parameters and pages', () => {
  const DAY = 86_400_000;
  const HOUR = 3_600_000;
  let code: string;
  let planted = 0;

  before(async () => {
    const res = await shortener.app.inject({
      method: 'POST',
      url: '/api/links',
      payload: { url: 'https://example.com/visited' },
      remoteAddress: uniqueIp(),
    });
    code = (res.json() as { data: { code: string } }).data.code;
    for (const agent of [
      'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0',
      'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
      'curl/8.4.0',
    ]) {
      assert.equal(
        (await shortener.app.inject({ method: 'GET', url: `/${code}`, headers: { 'user-agent': agent }, remoteAddress: uniqueIp() }))
          .statusCode,
        302,
      );
      planted += 1;
    }
  });

  /** Everything a request could change: the links and every visit table. */
  async function snapshot(): Promise<string> {
    const parts: string[] = [];
    for (const table of ['links', 'visit_counts', 'daily_visitors', 'visitor_salts', 'deleted_codes']) {
      const { rows } = await shortener.pool.query<{ row: string }>(`SELECT t::text AS row FROM ${table} AS t ORDER BY 1`);
      parts.push(`${table}: ${rows.map((r) => r.row).join(' | ')}`);
    }
    return parts.join('\n');
  }

  /** An instant written as the rule allows: a date (UTC midnight) or a timestamp with Z, ±hh:mm or ±hhmm. */
  const validTime = fc
    .tuple(
      fc.integer({ min: 0, max: Date.UTC(9999, 11, 31, 23, 59, 59, 999) }),
      fc.constantFrom('date', 'Z', 'minutes', 'fraction', '+05:30', '-08:00', '+14:00', '-12:00', '+0530', '-00:00'),
    )
    .map(([ms, form]) => {
      if (form === 'date') {
        const day = Math.floor(ms / DAY) * DAY;
        return { text: new Date(day).toISOString().slice(0, 10), ms: day };
      }
      const seconds = Math.floor(ms / 1000) * 1000;
      if (form === 'Z') return { text: new Date(seconds).toISOString().replace('.000Z', 'Z'), ms: seconds };
      if (form === 'minutes') {
        const minute = Math.floor(ms / 60_000) * 60_000;
        return { text: `${new Date(minute).toISOString().slice(0, 16)}Z`, ms: minute };
      }
      if (form === 'fraction') return { text: new Date(ms).toISOString(), ms };
      const sign = form[0] === '-' ? -1 : 1;
      const offsetMs = sign * (Number(form.slice(1, 3)) * HOUR + Number(form.slice(-2)) * 60_000);
      // The same instant as a local time at that offset (in Z when that local time is past 9999).
      const local = seconds + offsetMs;
      if (local >= Date.UTC(10000, 0, 1)) return { text: new Date(seconds).toISOString(), ms: seconds };
      return { text: new Date(local).toISOString().slice(0, 19) + form, ms: seconds };
    });
  const invalidTime = fc.oneof(
    fc.constantFrom(
      '2026-02-30',
      '2025-02-29',
      '2026-13-01',
      '2026-00-10',
      '2026-11-31',
      '2026-11-01T24:00:00Z',
      '2026-11-01T23:60:00Z',
      '2026-11-01T23:59:60Z',
      '2026-11-01T00:00:00',
      '2026-11-01T00:00',
      '2026-11-01 00:00:00Z',
      '2026-11-01t00:00:00Z',
      '2026-11-01T00:00:00z',
      '2026-11-01T00:00:00+24:00',
      '2026-11-01T00:00:00+05:60',
      '2026-11-01T00:00:00+5:00',
      '2026-11-01T00:00:00+05',
      '20261101',
      '2026-1-01',
      '2026-11',
      '1969-12-31',
      '10000-01-01',
      '+010000-01-01',
      '0000-01-01',
      ' 2026-11-01',
      '2026-11-01 ',
      '1e400',
      '1700000000000',
      'now',
      'today',
      '',
    ),
    unicodeText(40)
      .filter((s) => !/^\d{4}-\d{2}-\d{2}/.test(s))
      .filter((s) => !LONE_SURROGATE.test(s)),
  );
  const validInterval = fc.constantFrom(undefined, 'hour', 'day');
  const invalidInterval = fc.oneof(
    fc.constantFrom('HOUR', 'Day', 'week', 'minute', 'hours', 'days', ' hour', 'hour ', 'hour\u0000', '', 'null', '1'),
    unicodeText(20).filter((s) => s !== 'hour' && s !== 'day' && !LONE_SURROGATE.test(s)),
  );

  const query = (parts: Record<string, string | undefined>) =>
    Object.entries(parts)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${encodeURIComponent(v!)}`)
      .join('&');

  test('visits: exactly one invalid from, to or interval is a 400 naming it; nothing changes', async (t) => {
    const before = await snapshot();
    let runs = 0;
    const which = fc.constantFrom('from', 'to', 'interval');
    await fc.assert(
      fc.asyncProperty(
        which,
        validTime,
        validTime,
        validInterval,
        invalidTime,
        invalidInterval,
        async (bad, from, to, interval, badTime, badInterval) => {
          runs += 1;
          const parts: Record<string, string | undefined> = { from: from.text, to: to.text, interval };
          if (bad === 'interval') parts.interval = badInterval;
          else parts[bad] = badTime;
          const url = `/api/links/${code}/visits?${query(parts)}`;
          const res = await shortener.app.inject({ method: 'GET', url, headers: TEST_ADMIN_AUTH });
          assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
          const { message } = envelopeOf(res.body, 400);
          assert.ok(message.startsWith(`${bad} must be`), `${url}: the message names ${bad}: ${message}`);
        },
      ),
      params(300),
    );
    assert.equal(await snapshot(), before, 'bad input changed nothing');
    reportFigures(t, 'property: shortener visits, one invalid parameter → 400 naming it', { runs, seed });
  });

  test('visits: valid parameters answer 200 with every bucket of the range, or a 400 for the range rules; never a 5xx', async (t) => {
    const before = await snapshot();
    const now = Date.now();
    let runs = 0;
    const answered: Record<string, number> = {};
    // Ranges near now (where the planted visits are), and anywhere in 1970–9999.
    const nearNow = fc.integer({ min: -40 * DAY, max: 40 * DAY }).map((d) => {
      const ms = Math.floor((now + d) / 1000) * 1000;
      return { text: new Date(ms).toISOString(), ms };
    });
    const time = fc.option(fc.oneof(validTime, nearNow), { nil: undefined });
    // Half the pairs are a range of 1 hour to 400 days before `to`, around both interval limits.
    const relative = fc
      .tuple(fc.oneof(validTime, nearNow), fc.integer({ min: 1, max: 400 * 24 }))
      .map(([to, hours]) => {
        const ms = to.ms - hours * HOUR;
        return [{ text: new Date(ms).toISOString(), ms }, to] as const;
      })
      // An instant before 1970 is not a valid `from` (the other test covers it).
      .filter(([from]) => from.ms >= 0);
    const range = fc.oneof(fc.tuple(time, time), relative);
    await fc.assert(
      fc.asyncProperty(range, validInterval, async ([from, to], interval) => {
        runs += 1;
        const url = `/api/links/${code}/visits?${query({ from: from?.text, to: to?.text, interval })}`;
        const res = await shortener.app.inject({ method: 'GET', url, headers: TEST_ADMIN_AUTH });
        const step = interval === 'hour' ? HOUR : DAY;
        const toMs = to?.ms ?? undefined;
        const body = res.json() as {
          message: string;
          data?: {
            from: string;
            to: string;
            interval: string;
            series: Array<{ start: string; visits: number }>;
            totals: { visits: number };
          };
        };
        answered[res.statusCode] = (answered[res.statusCode] ?? 0) + 1;
        if (res.statusCode === 200) {
          const d = body.data!;
          const toUsed = Date.parse(d.to);
          const fromUsed = Date.parse(d.from);
          if (toMs !== undefined) assert.equal(toUsed, toMs, `${url}: to`);
          if (from) assert.equal(fromUsed, from.ms, `${url}: from`);
          else assert.equal(fromUsed, toUsed - 30 * DAY, `${url}: from defaults to 30 days before to`);
          assert.equal(d.interval, interval ?? 'day');
          assert.ok(
            fromUsed < toUsed && toUsed - fromUsed <= (interval === 'hour' ? 31 : 366) * DAY,
            `${url}: a range the rules refuse was answered`,
          );
          const first = Math.floor(fromUsed / step) * step;
          assert.equal(d.series.length, Math.ceil((toUsed - first) / step), `${url}: bucket count`);
          for (const [i, b] of d.series.entries()) assert.equal(Date.parse(b.start), first + i * step, `${url}: bucket ${i}`);
          assert.equal(
            d.totals.visits,
            d.series.reduce((s, b) => s + b.visits, 0),
            `${url}: totals = sum of the series`,
          );
          assert.ok(d.totals.visits <= planted);
        } else {
          assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
          envelopeOf(res.body, 400);
          const toApprox = toMs ?? Date.now();
          if ((from?.ms ?? toApprox - 30 * DAY) >= toApprox) assert.equal(body.message, 'from must be earlier than to', url);
          else assert.match(body.message, new RegExp(`the longest range for interval=${interval ?? 'day'}$`), url);
        }
      }),
      params(400),
    );
    // The planted visits are found by a range that holds them.
    const all = await shortener.app.inject({ method: 'GET', url: `/api/links/${code}/visits`, headers: TEST_ADMIN_AUTH });
    assert.equal((all.json() as { data: { totals: { visits: number } } }).data.totals.visits, planted);
    assert.equal(await snapshot(), before, 'reading visits changed nothing');
    reportFigures(t, 'property: shortener visits, valid parameters', { runs, seed, ...answered });
  });

  test('pages: /stats/<anything> is the stats page of an existing code, else the not-found page (404, no query for a malformed code); nothing changes', async (t) => {
    const before = await snapshot();
    const segment = fc
      .oneof(
        fc.constant(code),
        fc.stringMatching(/^[0-9a-zA-Z]{7}$/),
        fc.string({ unit: 'binary', maxLength: 120 }).filter((s) => !LONE_SURROGATE.test(s) && s !== code),
        fc.constantFrom('...', '..%2F..%2Fpackage.json', "abc'; DROP TABLE links; --", code.toLowerCase(), `${code}x`, ` ${code}`),
      )
      // `.` and `..` are resolved by the client (/stats/.. is /), as a browser does: not a code.
      .filter((s) => s !== '.' && s !== '..');
    const watch = watchQueries(shortener.pool);
    let runs = 0;
    try {
      await fc.assert(
        fc.asyncProperty(segment, fc.constantFrom('GET', 'HEAD'), async (s, method) => {
          runs += 1;
          const url = `/stats/${encodeURIComponent(s)}`;
          watch.queries.length = 0;
          const res = await shortener.app.inject({ method: method as 'GET' | 'HEAD', url });
          assert.match(String(res.headers['content-type']), /^text\/html/, `${url}: ${res.statusCode}`);
          if (s === code) {
            assert.equal(res.statusCode, 200, url);
            if (method === 'GET') assert.match(res.body, /<title>Link stats<\/title>/);
          } else {
            assert.equal(res.statusCode, 404, url);
            if (method === 'GET') assert.match(res.body, /<title>Link not found<\/title>/);
          }
          if (!LINK_CODE_PATTERN.test(s)) assert.deepEqual(watch.queries, [], `${url}: a malformed code reached the database`);
        }),
        params(300),
      );
    } finally {
      watch.stop();
    }
    assert.equal(await snapshot(), before, 'viewing pages changed nothing (no click counted)');
    reportFigures(t, 'property: shortener stats pages', { runs, seed });
  });

  test('pages: /, /admin and the assets answer with any query; any other asset path, or another method, is a 404 envelope', async (t) => {
    const before = await snapshot();
    const ASSETS = Object.keys(SHORTENER_ASSETS);
    const served = fc.constantFrom('/', '/admin', ...ASSETS);
    const queryText = fc.option(
      unicodeText(60).filter((s) => !LONE_SURROGATE.test(s)),
      { nil: undefined },
    );
    const otherAsset = fc
      .oneof(
        fc
          .string({ unit: 'binary', maxLength: 80 })
          .filter((s) => !LONE_SURROGATE.test(s))
          .map((s) => `/assets/${encodeURIComponent(s)}`),
        fc.constantFrom(
          '/assets/',
          '/assets/shortener/index.html',
          '/assets/shortener/stats.html',
          '/assets/serve.ts',
          '/assets/vendor/uPlot.iife.js',
          '/assets/../package.json',
          '/assets/%2e%2e/%2e%2e/package.json',
          '/assets/shortener/..%2f..%2f..%2fsrc%2fdev%2fcli.ts',
          '/assets/STYLE.CSS',
          '/assets/style.css/',
          '/assets/style.css%00',
        ),
      )
      .filter((p) => !ASSETS.includes(p));
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(served, queryText, otherAsset, fc.constantFrom('POST', 'PUT', 'DELETE', 'PATCH'), async (path, q, other, method) => {
        runs += 1;
        const url = q === undefined ? path : `${path}?x=${encodeURIComponent(q)}`;
        const res = await shortener.app.inject({ method: 'GET', url, headers: TEST_ADMIN_AUTH });
        assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`);
        assert.ok(res.body.length > 0);
        const missing = await shortener.app.inject({ method: 'GET', url: other });
        assert.equal(missing.statusCode, 404, `${other}: ${missing.body.slice(0, 200)}`);
        envelopeOf(missing.body, 404);
        const wrongMethod = await shortener.app.inject({ method: method as 'POST', url: path, payload: {} });
        assert.equal(wrongMethod.statusCode, 404, `${method} ${path}`);
        envelopeOf(wrongMethod.body, 404);
      }),
      params(200),
    );
    assert.equal(await snapshot(), before, 'nothing changed');
    reportFigures(t, 'property: shortener pages and assets', { runs, seed });
  });
});
