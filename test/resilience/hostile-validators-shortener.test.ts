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
import { CODE_PATTERN, randomCode } from '../../src/shortener/codes.js';
import { watchQueries } from '../helpers/database.js';
import { reportFigures } from './helpers/figures.js';
import { envelopeOf, freshIp, LONE_SURROGATE, params, seed, unicodeText } from './helpers/properties.js';
import { startShortenerInProcess } from './fuzz/in-process.js';

let shortener: Awaited<ReturnType<typeof startShortenerInProcess>>;

before(async () => {
  shortener = await startShortenerInProcess();
});

after(async () => {
  await shortener?.close();
});

describe('shortener: create, redirect and stats inputs', () => {
  const created: string[] = [];

  async function create(url: string) {
    return shortener.app.inject({ method: 'POST', url: '/api/links', payload: { url }, remoteAddress: freshIp() });
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
    assert.ok(sameHost(hostAsRead(url)!, new URL(location).hostname), `Location ${location} is not the host ${JSON.stringify(url)} reads as`);
    assert.match(location, /^[\x21-\x7e]+$/, `Location must be printable ASCII without spaces: ${JSON.stringify(location)}`);
    const stats = await shortener.app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal((stats.json() as { data: { original_url: string } }).data.original_url, url);
  }

  test('every scheme other than http and https is refused with 400 (allowlist)', async (t) => {
    const scheme = fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9+.-]{0,12}$/).filter((s) => !/^https?$/i.test(s));
    const rest = fc.oneof(fc.constant('//example.com/path'), fc.webPath(), fc.string({ maxLength: 40 }), fc.constant('alert(document.cookie)'));
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
    const arb = fc.oneof(fc.tuple(scheme, rest).map(([s, r]) => `${s}:${r}`), known);
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
      .tuple(fc.constantFrom('http', 'https', 'HTTP', 'hTTpS'), label, fc.constantFrom('com', 'de', 'рф', '中国', 'example'), unicodeText(20))
      .map(([s, l, tld, path]) => `${s}://${l}.${tld}/${path}`);
    const withCredentials = fc
      .tuple(fc.webSegment(), fc.webSegment(), fc.webUrl())
      .map(([user, pass, url]) => url.replace('://', `://${user}:${pass}@`));
    const whitespace = fc.constantFrom(' ', '\t', '\n', '\r\n', '\f', '\u000b', '\u00a0', '\u3000', '\u200b', '\u0000');
    const padded = fc.tuple(whitespace, fc.webUrl(), whitespace).map(([a, url, b]) => `${a}${url}${b}`);
    const inside = fc
      .tuple(fc.webUrl({ withQueryParameters: true }), whitespace, fc.nat())
      .map(([url, w, at]) => {
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

  test('codes: any path segment that is not ^[0-9a-zA-Z]{7}$ is a 404 in the envelope without a single database query', async (t) => {
    // Paths the service serves itself: its probes, documents, API, pages (`/`, which `.` and `..`
    // resolve to, `/admin`, `/stats/…`) and their assets; everything else at the top is a code.
    const routes = /^(healthz|readyz|docs|admin|stats|assets)(\/|$)|^api(\/|$)|^\.{0,2}$/;
    const malformed = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.stringMatching(/^[0-9a-zA-Z]{0,6}$/),
      fc.stringMatching(/^[0-9a-zA-Z]{8,40}$/),
      fc.tuple(fc.stringMatching(/^[0-9a-zA-Z]{6}$/), fc.constantFrom('-', '_', '.', '/', '%', ' ', 'é', '\u0000', '😀'), fc.nat(6))
        .map(([s, bad, at]) => s.slice(0, at) + bad + s.slice(at)),
      fc.constantFrom('../../etc/passwd', '..%2f..%2f', "abc'; DROP TABLE links; --", 'AAAAAAA ', ' AAAAAAA', 'ＡＢＣＤＥＦＧ'),
    )
      .filter((s) => !CODE_PATTERN.test(s))
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
    fc.assert(fc.property(fc.nat(), () => CODE_PATTERN.test(randomCode())), params(10_000));
    assert.ok(created.length > 0);
    for (const code of created) assert.match(code, CODE_PATTERN);
    reportFigures(t, 'property: shortener generated codes', { draws: 10_000, issued: created.length, seed });
  });

  async function countLinks(): Promise<number> {
    const { rows } = await shortener.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
    return rows[0]!.n;
  }
});
