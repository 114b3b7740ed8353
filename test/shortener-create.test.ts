import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { domainToASCII } from 'node:url';
import fc from 'fast-check';
import { canonicalIp } from '../src/kit/http/client-ip.js';
import { createPool } from '../src/kit/db.js';
import type { App } from '../src/kit/http/app.js';
import { CODE_PATTERN } from '../src/shortener/codes.js';
import { MAX_CODE_ATTEMPTS } from '../src/shortener/links.js';
import {
  assertEnvelope,
  startShortener,
  countLinks,
  createCode,
  createLink,
  postLinkBody,
  scriptedCodes,
  type RunningShortener,
  shortenerDatabase,
  type ShortenerOptions,
  withShortener,
} from './helpers/shortener.js';
import { uniqueIp } from './helpers/client-ips.js';
import { fileDatabase } from './helpers/database.js';

const db = fileDatabase(shortenerDatabase, 5);

const withApp = <T>(fn: (app: App, shortener: RunningShortener) => Promise<T>, options: ShortenerOptions = {}) =>
  withShortener({ pool: db.pool, ...options }, fn);

/** A valid http URL of exactly `length` characters. */
function urlOfLength(length: number): string {
  const prefix = 'https://example.com/';
  return prefix + 'a'.repeat(length - prefix.length);
}

describe('POST /api/links: success', () => {
  it("answers 201 with the spec body plus the link's one-time manage token, and the row exists", async () => {
    await withApp(async (app) => {
      const before = await countLinks(db.pool);
      const res = await createLink(app, 'https://example.com/a/long/path?q=1#frag');
      assert.equal(res.status, 201);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const data = res.body.data as { code: string; short_url: string; original_url: string; manage_token: string };
      assert.deepEqual(res.body, {
        status: 201,
        response: 'Created',
        message: 'Short link created successfully',
        data: {
          code: data.code,
          short_url: `https://sho.rt/${data.code}`,
          original_url: 'https://example.com/a/long/path?q=1#frag',
          manage_token: data.manage_token,
        },
      });
      assert.match(data.manage_token, /^[A-Za-z0-9_-]{43}$/);
      assert.match(data.code, /^[0-9a-zA-Z]{7}$/);
      assert.equal(await countLinks(db.pool), before + 1);
      const { rows } = await db.pool.query('SELECT original_url, clicks FROM links WHERE code = $1', [data.code]);
      assert.deepEqual(rows, [{ original_url: 'https://example.com/a/long/path?q=1#frag', clicks: 0 }]);
    });
  });

  it('builds short_url as BASE_URL, one slash, the code, even when BASE_URL ends with slashes', async () => {
    for (const [base, expected] of [
      ['https://sho.rt/', 'https://sho.rt/'],
      ['http://localhost:3001//', 'http://localhost:3001/'],
      ['https://example.org/s/', 'https://example.org/s/'],
    ] as const) {
      await withApp(
        async (app) => {
          const res = await createLink(app, 'http://example.com/');
          assert.equal(res.status, 201);
          const data = res.body.data as { code: string; short_url: string };
          assert.equal(data.short_url, `${expected}${data.code}`);
          assert.doesNotMatch(data.short_url.replace(/^https?:\/\//, ''), /\/\//);
        },
        { env: { BASE_URL: base } },
      );
    }
  });

  it('issues different codes for the same URL', async () => {
    await withApp(async (app) => {
      const a = await createCode(app, 'https://example.com/same');
      const b = await createCode(app, 'https://example.com/same');
      assert.notEqual(a, b);
    });
  });

  it('accepts a URL of exactly 2048 characters and stores it unchanged', async () => {
    await withApp(async (app) => {
      const url = urlOfLength(2048);
      assert.equal(url.length, 2048);
      assert.doesNotThrow(() => new URL(url));
      const res = await createLink(app, url);
      assert.equal(res.status, 201);
      assert.equal((res.body.data as { original_url: string }).original_url, url);
    });
  });

  it('drops unknown body properties instead of failing', async () => {
    await withApp(async (app) => {
      const res = await app.inject({
        method: 'POST',
        url: '/api/links',
        payload: { url: 'https://example.com/', extra: 'ignored' },
        remoteAddress: uniqueIp(),
      });
      assert.equal(res.statusCode, 201);
    });
  });
});

describe('POST /api/links: validation (rule 1) gives 400 and inserts nothing', () => {
  const cases: Array<[string, unknown, RegExp?]> = [
    ['missing url', undefined, /url/],
    ['a number', 42, /url/],
    ['an array', ['https://example.com/'], /url/],
    ['an object', { href: 'https://example.com/' }, /url/],
    ['null', null, /url/],
    ['a boolean', true, /url/],
    ['an empty string', '', /url/],
    ['2049 characters', urlOfLength(2049), /url/],
    ['an unparsable string', 'not a url', /url/],
    ['a relative path', '/just/a/path', /url/],
    ['http: without host', 'http://', /url/],
    ['javascript:', 'javascript:alert(1)', /protocol/],
    ['data:', 'data:text/html,<script>alert(1)</script>', /protocol/],
    ['ftp:', 'ftp://example.com/file', /protocol/],
    ['file:', 'file:///etc/passwd', /protocol/],
    ['mailto:', 'mailto:someone@example.com', /protocol/],
    ['ws:', 'ws://example.com/socket', /protocol/],
    ['vbscript:', 'vbscript:msgbox(1)', /protocol/],
    ['uppercase JAVASCRIPT:', 'JAVASCRIPT:alert(1)', /protocol/],
    ['a URL holding U+0000', 'https://example.com/a\u0000b', /url/],
    ['a URL holding a lone surrogate', 'https://example.com/\ud800', /url/],
    // Where the text reads as one place and the redirect goes to another.
    ['a backslash before @ (shown as good.com, goes to evil.com)', 'http://evil.com\\@good.com/', /backslash/],
    ['credentials naming another host', 'https://good.com@evil.com/', /credentials/],
    ['user and password', 'http://user:pass@host/', /credentials/],
    ['an empty user-info', 'http://@evil.com/', /credentials/],
    ['a backslash in the path', 'https://example.com/a\\b', /backslash/],
    ['a tab inside the host', 'http://exa\tmple.com/', /tabs or line breaks/],
    ['a line break inside the path', 'https://example.com/\r\nSet-Cookie: injected=1', /tabs or line breaks/],
    ['no // after the scheme', 'http:evil.com/', /http:\/\/ or https:\/\//],
    ['three slashes after the scheme', 'http:///evil.com/', /http:\/\/ or https:\/\//],
    ['a percent-escaped host', 'http://ex%61mple.com/', /host/],
    ['a hexadecimal IPv4 host', 'http://0x7f.1/', /host/],
    ['an IPv4 host as one number', 'http://2130706433/', /host/],
    ['a zero-padded IPv4 host (read as octal)', 'http://010.0.0.1/', /host/],
    // A short link of this service (BASE_URL https://sho.rt), in either scheme: a chain of redirects.
    ['a short link of this service', 'https://sho.rt/aZ3k9Qx', /link of this shortener already/],
    ['a short link of this service over http, in capitals', 'HTTP://SHO.RT/aZ3k9Qx', /link of this shortener already/],
    ['a page of this service', 'https://sho.rt/stats/aZ3k9Qx?x=1', /link of this shortener already/],
  ];

  let app: App;
  before(async () => ({ app } = await startShortener({ pool: db.pool })));
  after(() => app.close());

  for (const [name, url, message] of cases) {
    it(`rejects ${name}`, async () => {
      const before = await countLinks(db.pool);
      const payload = url === undefined ? {} : { url };
      const res = await app.inject({ method: 'POST', url: '/api/links', payload, remoteAddress: uniqueIp() });
      assert.equal(res.statusCode, 400, res.body);
      const text = assertEnvelope(res.json(), 400, 'Bad Request');
      if (message) assert.match(text, message);
      assert.equal(await countLinks(db.pool), before);
    });
  }

  it('accepts a link to the same host on another port, another host, or outside a BASE_URL path', async () => {
    await withApp(async (app) => {
      assert.equal((await createLink(app, 'https://sho.rt:8443/aZ3k9Qx')).status, 201);
      assert.equal((await createLink(app, 'https://www.sho.rt/aZ3k9Qx')).status, 201);
    });
    await withApp(
      async (app) => {
        assert.equal((await createLink(app, 'https://example.com/elsewhere')).status, 201);
        assert.equal((await createLink(app, 'https://example.com/s-not-the-base/x')).status, 201);
        const own = await createLink(app, 'https://example.com/s/aZ3k9Qx');
        assert.equal(own.status, 400);
        assert.match(assertEnvelope(own.body, 400, 'Bad Request'), /link of this shortener already/);
      },
      { env: { BASE_URL: 'https://example.com/s' } },
    );
  });

  it('rejects a body that is not an object', async () => {
    await withApp(async (app) => {
      for (const payload of ['"https://example.com/"', '[]', '7', 'null']) {
        const res = await postLinkBody(app, payload);
        assert.equal(res.statusCode, 400, `${payload}: ${res.body}`);
        assertEnvelope(res.json(), 400, 'Bad Request');
      }
    });
  });

  it('rejects an empty body', async () => {
    await withApp(async (app) => {
      const res = await app.inject({ method: 'POST', url: '/api/links', remoteAddress: uniqueIp() });
      assert.equal(res.statusCode, 400, res.body);
      assertEnvelope(res.json(), 400, 'Bad Request');
    });
  });
});

describe('POST /api/links: malformed requests', () => {
  it('malformed JSON gives a 400 envelope', async () => {
    await withApp(async (app) => {
      const before = await countLinks(db.pool);
      const res = await postLinkBody(app, '{"url": "https://example.com/"');
      assert.equal(res.statusCode, 400);
      assertEnvelope(res.json(), 400, 'Bad Request');
      assert.equal(await countLinks(db.pool), before);
    });
  });

  it('Content-Type text/plain gives a 415 envelope', async () => {
    await withApp(async (app) => {
      const res = await postLinkBody(app, '{"url":"https://example.com/"}', 'text/plain');
      assert.equal(res.statusCode, 415);
      assertEnvelope(res.json(), 415, 'Unsupported Media Type');
    });
  });

  it('a body over 64 KiB gives a 413 envelope', async () => {
    await withApp(async (app) => {
      const res = await postLinkBody(app, JSON.stringify({ url: `https://example.com/${'a'.repeat(70 * 1024)}` }));
      assert.equal(res.statusCode, 413);
      assertEnvelope(res.json(), 413, 'Payload Too Large');
    });
  });

  it('a __proto__ key gives 400 and nothing is inserted', async () => {
    await withApp(async (app) => {
      const before = await countLinks(db.pool);
      for (const payload of [
        '{"url":"https://example.com/","__proto__":{"polluted":true}}',
        '{"__proto__":{"url":"https://example.com/"}}',
        '{"url":"https://example.com/","constructor":{"prototype":{"polluted":true}}}',
      ]) {
        const res = await postLinkBody(app, payload);
        assert.equal(res.statusCode, 400, `${payload}: ${res.body}`);
        assertEnvelope(res.json(), 400, 'Bad Request');
      }
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
      assert.equal(await countLinks(db.pool), before);
    });
  });
});

describe('POST /api/links: code allocation (rule 2)', () => {
  it('retries with a fresh code after a duplicate, inserting exactly one row', async () => {
    await withApp(async (app) => {
      const existing = await createCode(app);
      const fresh = 'Fresh01';
      const script = scriptedCodes(existing, fresh);
      const before = await countLinks(db.pool);
      await withApp(
        async (retrying) => {
          const res = await createLink(retrying, 'https://example.com/retry');
          assert.equal(res.status, 201, JSON.stringify(res.body));
          assert.equal((res.body.data as { code: string }).code, fresh);
        },
        { deps: { generateCode: script.generateCode } },
      );
      assert.deepEqual(script.drawn, [existing, fresh]);
      assert.equal(await countLinks(db.pool), before + 1);
      const { rows } = await db.pool.query('SELECT original_url FROM links WHERE code = ANY($1) ORDER BY code', [[existing, fresh]]);
      assert.equal(rows.length, 2);
      // The existing link was not overwritten by the colliding attempt.
      const byCode = await db.pool.query('SELECT original_url FROM links WHERE code = $1', [existing]);
      assert.equal(byCode.rows[0].original_url, 'https://example.com/some/page');
    });
  });

  it('gives up with a 503 envelope after exactly 5 colliding attempts', async () => {
    await withApp(async (app) => {
      const existing = await createCode(app);
      const script = scriptedCodes(existing);
      const before = await countLinks(db.pool);
      await withApp(
        async (colliding) => {
          const res = await createLink(colliding, 'https://example.com/never');
          assert.equal(res.status, 503);
          assertEnvelope(res.body, 503, 'Service Unavailable');
          assert.equal(res.headers['retry-after'], '1');
        },
        { deps: { generateCode: script.generateCode } },
      );
      assert.equal(MAX_CODE_ATTEMPTS, 5);
      assert.equal(script.drawn.length, 5);
      assert.equal(await countLinks(db.pool), before);
    });
  });

  it('does not retry an error other than a duplicate code', async () => {
    // The CHECK constraint on code rejects this one: a different database error than a unique violation.
    const script = scriptedCodes('bad.cod');
    const before = await countLinks(db.pool);
    await withApp(
      async (app, { logs }) => {
        const res = await createLink(app, 'https://example.com/');
        assert.equal(res.status, 500);
        const message = assertEnvelope(res.body, 500, 'Internal Server Error');
        assert.equal(message, 'Internal Server Error');
        assert.doesNotMatch(JSON.stringify(res.body), /check|constraint|links|violat|stack|at /i);
        // The cause is in the log for the operator, not in the response.
        assert.match(logs.text(), /links_code_check/);
      },
      {
        deps: { generateCode: script.generateCode },
        env: { LOG_LEVEL: 'error' },
      },
    );
    assert.equal(script.drawn.length, 1);
    assert.equal(await countLinks(db.pool), before);
  });

  for (const [route, next] of [
    ['healthz', 'Normal1'],
    ['metrics', 'Normal2'],
  ] as const) {
    it(`never issues a code that is a path of the service (${route})`, async () => {
      const script = scriptedCodes(route, next);
      await withApp(
        async (app) => {
          const res = await createLink(app, 'https://example.com/');
          assert.equal(res.status, 201);
          assert.equal((res.body.data as { code: string }).code, next);
        },
        { deps: { generateCode: script.generateCode } },
      );
      assert.deepEqual(script.drawn, [route, next]);
      const { rowCount } = await db.pool.query('SELECT 1 FROM links WHERE code = $1', [route]);
      assert.equal(rowCount, 0);
    });
  }

  it('a generator that only yields reserved codes ends in 503 after 5 attempts, nothing inserted', async () => {
    const script = scriptedCodes('healthz');
    const before = await countLinks(db.pool);
    await withApp(
      async (app) => {
        const res = await createLink(app, 'https://example.com/');
        assert.equal(res.status, 503);
        assertEnvelope(res.body, 503, 'Service Unavailable');
        // /healthz itself still answers health, not a redirect.
        const health = await app.inject({ method: 'GET', url: '/healthz' });
        assert.deepEqual(health.json(), { status: 'ok' });
      },
      { deps: { generateCode: script.generateCode } },
    );
    assert.equal(script.drawn.length, 5);
    assert.equal(await countLinks(db.pool), before);
  });

  it('issued codes match the code pattern', async () => {
    await withApp(async (app) => {
      for (let i = 0; i < 5; i++) assert.match(await createCode(app), CODE_PATTERN);
    });
  });
});

describe('POST /api/links: failures never leak', () => {
  it('a database that is gone gives a 503 envelope without internals', async () => {
    const deadPool = createPool('postgres://postgres@127.0.0.1:1/none', { connectionTimeoutMillis: 500 });
    try {
      await withApp(
        async (app) => {
          const res = await createLink(app, 'https://example.com/');
          assert.equal(res.status, 503);
          const message = assertEnvelope(res.body, 503, 'Service Unavailable');
          assert.doesNotMatch(message, /ECONNREFUSED|127\.0\.0\.1|postgres/);
        },
        { pool: deadPool },
      );
    } finally {
      await deadPool.end();
    }
  });

  it('a missing table gives a 500 envelope with no internal message or stack', async () => {
    // A database of its own, since this one loses its table.
    const { app, pool: brokenPool, close } = await startShortener();
    try {
      await brokenPool.query('DROP TABLE links CASCADE');
      const create = await createLink(app, 'https://example.com/');
      assert.equal(create.status, 500);
      assert.deepEqual(create.body, { status: 500, response: 'Internal Server Error', message: 'Internal Server Error' });
      const stats = await app.inject({ method: 'GET', url: '/api/links/abcdefg' });
      assert.equal(stats.statusCode, 500);
      assert.deepEqual(stats.json(), { status: 500, response: 'Internal Server Error', message: 'Internal Server Error' });
      // A failed click batch counted nothing for anyone in it: 503, try again (docs: clicks under load).
      const redirect = await app.inject({ method: 'GET', url: '/abcdefg' });
      assert.equal(redirect.statusCode, 503);
      assert.equal(redirect.headers['retry-after'], '1');
      assert.deepEqual(redirect.json(), {
        status: 503,
        response: 'Service Unavailable',
        message: 'Service temporarily unavailable, try again shortly',
      });
    } finally {
      await close();
    }
  });
});

describe('POST /api/links: the URL shown is where the redirect goes', () => {
  let app: App;
  before(async () => ({ app } = await startShortener({ pool: db.pool })));
  after(() => app.close());

  /**
   * The host as a person (and RFC 3986) reads the text, spaces around it aside:
   * after "scheme://", up to / ? or #, without the port.
   */
  function hostAsRead(text: string): string | undefined {
    const trimmed = text.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '');
    const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(trimmed)?.[1];
    return authority?.replace(/:\d*$/, '');
  }

  /** Whether two spellings name one host: case, IDN punycode and IPv6 compression aside. */
  function sameHost(read: string, reached: string): boolean {
    if (read.startsWith('[')) return reached.startsWith('[') && canonicalIp(read.slice(1, -1)) === canonicalIp(reached.slice(1, -1));
    if (/^[\x00-\x7f]*$/.test(read)) return read.toLowerCase() === reached;
    return domainToASCII(read) === reached;
  }

  async function createAndFollow(
    url: string,
  ): Promise<{ status: number; shown?: string; stats?: string; location?: string; body: unknown }> {
    const res = await createLink(app, url);
    if (res.status !== 201) return { status: res.status, body: res.body };
    const { code, original_url } = res.body.data as { code: string; original_url: string };
    const stats = (await app.inject({ method: 'GET', url: `/api/links/${code}` })).json() as { data: { original_url: string } };
    const redirect = await app.inject({ method: 'GET', url: `/${code}` });
    assert.equal(redirect.statusCode, 302);
    return {
      status: 201,
      shown: original_url,
      stats: stats.data.original_url,
      location: String(redirect.headers.location),
      body: res.body,
    };
  }

  it('ordinary URLs are echoed exactly as submitted, by create and by stats', async () => {
    for (const url of [
      'https://example.com/a/long/path?q=1&r=%20x#frag',
      'https://example.com/search?q=C:\\dir\\file#a\\b',
      'HTTPS://Example.COM:8443/Path',
      'https://bücher.example/straße?q=ü#café',
      'http://[2001:DB8::1]:8080/x',
      'http://198.51.100.7/',
      'https://example.com/a b',
      '  https://example.com/padded\u0020\u0020',
      'https://example.com/trailing-newline\n',
    ]) {
      const result = await createAndFollow(url);
      assert.equal(result.status, 201, `${JSON.stringify(url)}: ${JSON.stringify(result.body)}`);
      assert.equal(result.shown, url);
      assert.equal(result.stats, url);
      assert.ok(sameHost(hostAsRead(url)!, new URL(result.location!).hostname), `${url} went to ${result.location}`);
    }
  });

  it('property: for every accepted URL, the Location host is the host a reader sees in the echoed URL', async () => {
    // Pieces that make parsers disagree, glued at random after an http(s) scheme.
    const piece = fc.constantFrom(
      'good.com',
      'evil.com',
      'a',
      '.',
      '@',
      ':',
      ':80',
      ':pass@',
      '\\',
      '/',
      '//',
      '\t',
      '\n',
      '\r',
      ' ',
      '?',
      '#',
      '%2e',
      '%40',
      '%2f',
      '%61',
      '0x7f',
      '1',
      '127',
      '010',
      '0',
      '[::1]',
      '[::ffff:127.0.0.1]',
      '[',
      ']',
      'bücher',
      'ＥＸＡＭＰＬＥ',
      '。',
      '１２７',
      '\u200b',
      '\u00ad',
      'xn--bcher-kva',
      'com',
    );
    const scheme = fc.constantFrom('http://', 'https://', 'HTTP://', 'http:', 'http:/', 'http:///', 'http:\\\\', ' https://');
    const hostile = fc.tuple(scheme, fc.array(piece, { minLength: 1, maxLength: 8 })).map(([s, parts]) => s + parts.join(''));
    const ordinary = fc.webUrl({
      withQueryParameters: true,
      withFragments: true,
      authoritySettings: { withIPv4: true, withIPv6: true, withPort: true },
    });
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(hostile, hostile, ordinary), async (url) => {
        const result = await createAndFollow(url);
        if (result.status !== 201) {
          assert.equal(result.status, 400, `${JSON.stringify(url)}: ${JSON.stringify(result.body)}`);
          assertEnvelope(result.body, 400, 'Bad Request');
          return;
        }
        accepted += 1;
        assert.equal(result.shown, url);
        assert.equal(result.stats, url);
        const read = hostAsRead(url);
        assert.ok(read !== undefined && !read.includes('@'), `${JSON.stringify(url)} was accepted without a plain authority`);
        const reached = new URL(result.location!).hostname;
        assert.ok(sameHost(read, reached), `${JSON.stringify(url)} reads as host ${JSON.stringify(read)} but redirects to ${reached}`);
      }),
      { numRuns: 300 },
    );
    assert.ok(accepted > 50, `only ${accepted} of 300 accepted: the property checked too little`);
  });
});

describe('POST /api/links: any body', () => {
  it('answers 201 only for an http(s) URL of at most 2048 characters, otherwise a 4xx envelope; never 5xx', async () => {
    await withApp(async (app) => {
      const url = fc.oneof(
        fc.webUrl({ withQueryParameters: true, withFragments: true }),
        fc
          .constantFrom('http:', 'https:', 'javascript:', 'data:', 'ftp:', 'file:', 'mailto:', 'ws:', 'blob:', 'about:', '')
          .chain((scheme) => fc.string({ unit: 'binary', maxLength: 40 }).map((rest) => `${scheme}${rest}`)),
        fc.jsonValue(),
        fc.string({ unit: 'binary', maxLength: 80 }),
      );
      await fc.assert(
        fc.asyncProperty(url, async (value) => {
          const before = await countLinks(db.pool);
          const res = await createLink(app, value);
          if (res.status === 201) {
            const data = res.body.data as { code: string; original_url: string };
            assert.equal(typeof value, 'string');
            assert.equal(data.original_url, value);
            assert.ok((value as string).length >= 1 && (value as string).length <= 2048);
            assert.match(new URL(value as string).protocol, /^https?:$/);
            assert.equal(await countLinks(db.pool), before + 1);
          } else {
            assert.equal(res.status, 400, `${JSON.stringify(value)} gave ${res.status} ${JSON.stringify(res.body)}`);
            assertEnvelope(res.body, 400, 'Bad Request');
            assert.equal(await countLinks(db.pool), before);
          }
        }),
        { numRuns: 250 },
      );
    });
  });
});
