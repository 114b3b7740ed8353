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
// - accounts: lengths are counted in Unicode code points after trim (a combining accent or each
//   part of a ZWJ emoji is one), as PostgreSQL's char_length counts; names may not contain
//   control characters; passwords are 8-72 code points and at most 72 UTF-8 bytes, never trimmed.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { domainToASCII } from 'node:url';
import fc from 'fast-check';
import { characterCount, emailProblem, nameProblem, normalizeEmail, passwordProblem } from '../../src/accounts/validation.js';
import { CODE_PATTERN, randomCode } from '../../src/shortener/codes.js';
import { reportFigures } from './helpers/figures.js';
import {
  idpRequest,
  request,
  type Running,
  type RunningIdp,
  startAccountsInProcess,
  startIdpInProcess,
  startNotesInProcess,
  startShortenerInProcess,
} from './fuzz/in-process.js';
import { runSeed } from './fuzz/prng.js';
import { watchQueries } from '../helpers/database.js';

const seed = runSeed();
const params = (numRuns: number) => ({ seed, numRuns, endOnFailure: true, includeErrorInReport: true });

let shortener: Awaited<ReturnType<typeof startShortenerInProcess>>;
let accounts: Awaited<ReturnType<typeof startAccountsInProcess>>;
let idp: RunningIdp;
let notes: Running;
let notesLocal: Running;
/** Requests notes sent to the idp's REST API (the note store). */
let storeCalls = 0;

const EXISTING = { name: 'Existing User', email: 'existing-hostile@example.com', password: 'existing-password-1' };
let notesToken = '';

before(async () => {
  [shortener, accounts, idp] = await Promise.all([startShortenerInProcess(), startAccountsInProcess(), startIdpInProcess()]);
  const countingFetch: typeof fetch = (input, init) => {
    if (String(input instanceof Request ? input.url : input).includes('/rest/v1/')) storeCalls += 1;
    return fetch(input, init);
  };
  [notes, notesLocal] = await Promise.all([
    startNotesInProcess(idp, { verify: 'remote', fetch: countingFetch }),
    startNotesInProcess(idp, { verify: 'local' }),
  ]);
  const registered = await accounts.app.inject({ method: 'POST', url: '/auth/register', payload: EXISTING });
  assert.equal(registered.statusCode, 201, registered.body);
  const email = 'notes-hostile@example.com';
  assert.equal((await request(notes.url, 'POST', '/auth/register', { body: { email, password: 'notes-password-1' } })).status, 201);
  const login = await request(notes.url, 'POST', '/auth/login', { body: { email, password: 'notes-password-1' } });
  assert.equal(login.status, 200, login.text);
  notesToken = login.body.access_token;
});

after(async () => {
  await notes?.close();
  await notesLocal?.close();
  await shortener?.close();
  await accounts?.close();
  await idp?.close();
});

// ---- helpers ---------------------------------------------------------------------------------

let nextIp = 0;
/** A client address of its own per create, so the 10-per-minute limit never answers instead of the validator. */
const freshIp = () => {
  nextIp += 1;
  return `10.77.${(nextIp >> 8) & 255}.${nextIp & 255}`;
};

function envelopeOf(body: string, status: number): { status: number; response: string; message: string } {
  const parsed = JSON.parse(body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(parsed).sort(), ['message', 'response', 'status'], body);
  assert.equal(parsed.status, status, body);
  return parsed as { status: number; response: string; message: string };
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const byteLength = (s: string) => Buffer.byteLength(s, 'utf8');

/** Characters from every UTF-8 width, combining marks, ZWJ sequences, whitespace and controls. */
const unicodeUnit = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('a', 'Z', '7', '-', '_', '.', "'", ' ') },
  { weight: 3, arbitrary: fc.constantFrom('é', 'ß', 'ø', 'Ж', 'ש', 'ع') },
  { weight: 3, arbitrary: fc.constantFrom('€', '中', '日', 'ह', '\u0301', '\u200d', '\u3000', '\ufeff') },
  { weight: 3, arbitrary: fc.constantFrom('😀', '👩\u200d👩\u200d👧', '🏳️\u200d🌈', '𝔘', '🇫🇷') },
  { weight: 1, arbitrary: fc.constantFrom('\t', '\n', '\u0000', '\u007f', '\u0085', '\u00a0', '\ud800', '\udfff') },
);
const unicodeText = (maxLength: number) => fc.string({ unit: unicodeUnit, maxLength });

// ---- shortener ----------------------------------------------------------------------------------

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
    const routes = /^(healthz|readyz|docs)(\/|$)|^api(\/|$)/;
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

// ---- accounts -----------------------------------------------------------------------------------

describe('accounts: email, name and password rules', () => {
  const register = (body: unknown) =>
    accounts.app.inject({ method: 'POST', url: '/auth/register', payload: JSON.stringify(body), headers: { 'content-type': 'application/json' }, remoteAddress: freshIp() });
  const login = (body: unknown) =>
    accounts.app.inject({ method: 'POST', url: '/auth/login', payload: JSON.stringify(body), headers: { 'content-type': 'application/json' }, remoteAddress: freshIp() });

  /** Flips the case of some letters and pads with whitespace: the same address once normalised. */
  const caseAndPadding = (email: string) =>
    fc
      .tuple(fc.array(fc.boolean(), { minLength: email.length, maxLength: email.length }), fc.constantFrom('', ' ', '\t', '  \n'), fc.constantFrom('', ' ', '\t'))
      .map(([flips, a, b]) => a + [...email].map((c, i) => (flips[i] ? c.toUpperCase() : c)).join('') + b);

  const invalidEmail = fc.oneof(
    fc.string({ maxLength: 40 }).filter((s) => !s.includes('@')),
    fc.tuple(fc.emailAddress(), fc.webSegment()).map(([e, x]) => `${e}@${x}`),
    fc.emailAddress().map((e) => e.replace('@', ' @')),
    fc.emailAddress().map((e) => e.replace('@', '@ ')),
    fc.tuple(unicodeText(8).filter((s) => /[^\x00-\x7f]/.test(s.trim())), fc.domain()).map(([l, d]) => `${l}@${d}`),
    fc.constantFrom(
      'user@localhost',
      'user@-example.com',
      'user@example-.com',
      'user@.example.com',
      'user@example..com',
      '@example.com',
      'user@',
      '"quoted local"@example.com',
      'user@[127.0.0.1]',
      `user@${'a'.repeat(64)}.com`,
      `${'a'.repeat(65)}@example.com`,
      `${'a'.repeat(60)}@${Array(4).fill('b'.repeat(60)).join('.')}.com`,
      'user@bücher.de',
      'üser@example.com',
      'user@exa mple.com',
      "x' OR '1'='1",
      'user@example.com\u0000',
    ),
  );

  test('emails: every valid address (any case, padded) is accepted and normalised; invalid ones are a 400 on email', async (t) => {
    fc.assert(
      fc.property(fc.emailAddress().chain((e) => fc.tuple(fc.constant(e), caseAndPadding(e))), ([email, variant]) => {
        const normalized = normalizeEmail(variant);
        assert.equal(normalized, email.toLowerCase());
        assert.equal(emailProblem(normalized), undefined, `${email} should be valid`);
      }),
      params(3000),
    );
    fc.assert(fc.property(invalidEmail, (e) => assert.notEqual(emailProblem(normalizeEmail(e)), undefined, JSON.stringify(e))), params(3000));
    // Through the route: a valid email passes to the next check (the too-short password); an invalid one stops at email.
    await fc.assert(
      fc.asyncProperty(fc.emailAddress().chain(caseAndPadding), async (email) => {
        const res = await register({ name: 'Valid Name', email, password: 'short' });
        assert.equal(res.statusCode, 400);
        assert.match(envelopeOf(res.body, 400).message, /^body\/password /, `${JSON.stringify(email)}: ${res.body}`);
      }),
      params(200),
    );
    await fc.assert(
      fc.asyncProperty(invalidEmail, async (email) => {
        for (const res of [await register({ name: 'Valid Name', email, password: 'long-enough-1' }), await login({ email, password: 'long-enough-1' })]) {
          assert.equal(res.statusCode, 400, `${JSON.stringify(email)}: ${res.body}`);
          assert.match(envelopeOf(res.body, 400).message, /^body\/email /);
        }
      }),
      params(300),
    );
    reportFigures(t, 'property: accounts emails', { runs: 6500, seed });
  });

  test('emails are stored lowercased and unique in any case: a case variant of a taken address is a duplicate', async (t) => {
    // Real registrations (cost-12 bcrypt each): a few.
    await fc.assert(
      fc.asyncProperty(fc.emailAddress().chain((e) => fc.tuple(caseAndPadding(e), caseAndPadding(e))), async ([first, second]) => {
        const res = await register({ name: 'Case Test', email: first, password: 'case-test-pw-1' });
        assert.equal(res.statusCode, 201, res.body);
        assert.equal((res.json() as { data: { email: string } }).data.email, normalizeEmail(first));
        const again = await register({ name: 'Case Test', email: second, password: 'case-test-pw-1' });
        assert.equal(envelopeOf(again.body, 400).message, 'An account with this email already exists');
      }),
      params(3),
    );
    // The duplicate check needs no hashing: many variants of the existing address.
    await fc.assert(
      fc.asyncProperty(caseAndPadding(EXISTING.email), async (email) => {
        const res = await register({ name: 'Another', email, password: 'another-pw-1' });
        assert.equal(envelopeOf(res.body, 400).message, 'An account with this email already exists', JSON.stringify(email));
      }),
      params(150),
    );
    reportFigures(t, 'property: accounts email lowercased + unique', { registrations: 3, variants: 150, seed });
  });

  /** The rule as an oracle: 2-60 code points after trim, valid Unicode, no control characters. */
  const nameValid = (raw: string) => {
    const name = raw.trim();
    return !LONE_SURROGATE.test(name) && !/\p{Cc}/u.test(name) && characterCount(name) >= 2 && characterCount(name) <= 60;
  };

  test('names: 2-60 code points after trim (emoji, combining marks, ZWJ sequences), no control characters', async (t) => {
    const names = fc.oneof(unicodeText(70), fc.string({ unit: 'grapheme', maxLength: 65 }), fc.string({ unit: unicodeUnit, minLength: 55, maxLength: 64 }));
    fc.assert(fc.property(names, (raw) => assert.equal(nameProblem(raw.trim()) === undefined, nameValid(raw), JSON.stringify(raw))), params(5000));
    // Route: a valid name gets as far as the duplicate check (no hashing); an invalid one stops at name.
    await fc.assert(
      fc.asyncProperty(names, async (name) => {
        const res = await register({ name, email: EXISTING.email, password: 'valid-password-1' });
        const { message } = envelopeOf(res.body, 400);
        if (nameValid(name)) assert.equal(message, 'An account with this email already exists', JSON.stringify(name));
        else assert.match(message, /^body\/name /, JSON.stringify(name));
      }),
      params(300),
    );
    for (const [name, ok] of [
      ['Zoë', true],
      ['e\u0301', true],
      ['👩\u200d👩\u200d👧', true],
      ['😀', false],
      ['  a  ', false],
      ['a'.repeat(60), true],
      ['😀'.repeat(60), true],
      ['😀'.repeat(61), false],
      ['ab\u0000c', false],
      ['line\nbreak', false],
    ] as const) {
      assert.equal(nameProblem(name.trim()) === undefined, ok, JSON.stringify(name));
    }
    reportFigures(t, 'property: accounts names', { runs: 5300, seed });
  });

  /** 8-72 code points, at most 72 UTF-8 bytes, valid Unicode; never trimmed. */
  const passwordValid = (p: string) => !LONE_SURROGATE.test(p) && characterCount(p) >= 8 && characterCount(p) <= 72 && byteLength(p) <= 72;

  test('passwords: 8-72 characters and at most 72 UTF-8 bytes, the byte boundary exact with multibyte characters', async (t) => {
    const passwords = fc.oneof(unicodeText(80), fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀'), minLength: 15, maxLength: 40 }));
    fc.assert(fc.property(passwords, (p) => assert.equal(passwordProblem(p) === undefined, passwordValid(p), JSON.stringify(p))), params(5000));
    await fc.assert(
      fc.asyncProperty(passwords, async (password) => {
        const res = await register({ name: 'Valid Name', email: EXISTING.email, password });
        const { message } = envelopeOf(res.body, 400);
        if (passwordValid(password)) assert.equal(message, 'An account with this email already exists');
        else assert.match(message, /^body\/password /, JSON.stringify(password));
      }),
      params(300),
    );
    for (const [password, ok] of [
      ['€'.repeat(24), true], // 24 characters, 72 bytes
      [`${'€'.repeat(24)}a`, false], // 73 bytes
      ['😀'.repeat(18), true], // 18 characters, 72 bytes
      [`${'😀'.repeat(18)}a`, false],
      ['é'.repeat(36), true],
      [`${'é'.repeat(36)}a`, false],
      ['a'.repeat(72), true],
      ['a'.repeat(73), false],
      ['a'.repeat(7), false],
      [' '.repeat(8), true], // never trimmed
    ] as const) {
      assert.equal(passwordProblem(password) === undefined, ok, `${password.length} units, ${byteLength(password)} bytes`);
      const res = await register({ name: 'Valid Name', email: EXISTING.email, password });
      assert.equal(/^body\/password /.test(envelopeOf(res.body, 400).message), !ok);
    }
    reportFigures(t, 'property: accounts passwords', { runs: 5300, seed });
  });

  test('never truncation: a password sharing the first 72 bytes of a real one never logs in (accounts and idp)', async (t) => {
    const p72 = `${'€'.repeat(23)}xyz`; // 72 bytes
    assert.equal(byteLength(p72), 72);
    const email = 'truncation-hostile@example.com';
    assert.equal((await register({ name: 'Trunc', email, password: p72 })).statusCode, 201);
    await fc.assert(
      fc.asyncProperty(unicodeText(20).filter((s) => s.length > 0), async (suffix) => {
        const res = await login({ email, password: p72 + suffix });
        assert.equal(res.statusCode, 400, 'a password over 72 bytes must be refused before bcrypt, not truncated');
        // And it cannot be registered either (so no second account relies on truncation).
        assert.equal((await register({ name: 'Trunc', email: 'other-trunc@example.com', password: p72 + suffix })).statusCode, 400);
      }),
      params(100),
    );
    assert.equal((await login({ email, password: p72 })).statusCode, 200);
    assert.equal((await login({ email, password: p72.slice(0, -1) })).statusCode, 401);

    // The idp: same 72-byte limit (GoTrue's), refused at sign-up, never matched at sign-in.
    const idpEmail = 'truncation-idp@example.com';
    const signup = await idpRequest(idp, 'POST', '/auth/v1/signup', { body: { email: idpEmail, password: p72 } });
    assert.equal(signup.status, 200, signup.text);
    await fc.assert(
      fc.asyncProperty(unicodeText(10).filter((s) => s.length > 0), async (suffix) => {
        const longer = await idpRequest(idp, 'POST', '/auth/v1/signup', { body: { email: 'x-trunc@example.com', password: p72 + suffix } });
        assert.equal(longer.status, 400, longer.text);
        const signin = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email: idpEmail, password: p72 + suffix } });
        assert.equal(signin.status, 400, signin.text);
        assert.equal(signin.body.code, 'invalid_credentials');
      }),
      params(15),
    );
    assert.equal((await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email: idpEmail, password: p72 } })).status, 200);
    reportFigures(t, 'property: no password truncation', { accountsRuns: 100, idpRuns: 15, seed });
  });
});

// ---- notes --------------------------------------------------------------------------------------

describe('notes: titles, bodies and note ids', () => {
  const titleValid = (t: string) => t.length > 0 && characterCount(t) <= 200 && !t.includes('\u0000') && !LONE_SURROGATE.test(t);

  test('titles: 1-200 characters of any text are stored exactly; empty, longer or unstorable ones are a 400', async (t) => {
    const titles = fc.oneof(
      { weight: 4, arbitrary: unicodeText(60) },
      { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('a', '😀', 'é'), minLength: 195, maxLength: 205 }) },
      { weight: 1, arbitrary: fc.constantFrom('', ' ', '\u0000', "'; DROP TABLE notes; --", '<script>alert(1)</script>') },
    );
    let created = 0;
    await fc.assert(
      fc.asyncProperty(titles, async (title) => {
        // JSON escapes keep lone surrogates intact on the wire (fetch would replace them).
        const raw = JSON.stringify({ title }).replace(/[\ud800-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
        const res = await request(notes.url, 'POST', '/notes', { raw, token: notesToken });
        if (titleValid(title)) {
          assert.equal(res.status, 201, `${JSON.stringify(title)}: ${res.text}`);
          assert.equal(res.body.title, title);
          created += 1;
        } else {
          assert.equal(res.status, 400, `${JSON.stringify(title)}: ${res.text}`);
          assert.deepEqual(Object.keys(res.body), ['message']);
        }
      }),
      params(80),
    );
    const body = await request(notes.url, 'POST', '/notes', { body: { title: 'long body', body: 'b'.repeat(10_001) }, token: notesToken });
    assert.equal(body.status, 400);
    assert.equal((await request(notes.url, 'POST', '/notes', { body: { title: 'max body', body: '😀'.repeat(10_000) }, token: notesToken })).status, 201);
    const list = await request(notes.url, 'GET', '/notes', { token: notesToken });
    assert.equal(list.body.length, created + 1);
    reportFigures(t, 'property: notes titles', { runs: 80, created, seed });
  });

  test('note ids: anything but a bigint in decimal is a 404 "Note not found" without a store request', async (t) => {
    const ids = fc
      .oneof(
        fc.string({ unit: 'binary', maxLength: 40 }),
        fc.stringMatching(/^-?[0-9]{1,25}$/),
        fc.bigInt({ min: 9_223_372_036_854_775_808n, max: 10n ** 19n - 1n }).map(String),
        fc.constantFrom('1e3', '0x10', '1.0', ' 1', '1 ', '+1', '1;DROP TABLE notes', "1' OR '1'='1", 'NaN', 'Infinity', '１'),
      )
      .filter((s) => !/^[0-9]{1,19}$/.test(s) || BigInt(s) > 9_223_372_036_854_775_807n)
      .filter((s) => s !== '' && !LONE_SURROGATE.test(s));
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(ids, async (id) => {
        runs += 1;
        const before = storeCalls;
        const res = await request(notes.url, 'DELETE', `/notes/${encodeURIComponent(id)}`, { token: notesToken });
        assert.equal(res.status, 404, `${JSON.stringify(id)}: ${res.text}`);
        // `.` and `..` are dot segments: the client resolves them away and another route's 404 answers.
        const dotSegment = id === '.' || id === '..';
        assert.deepEqual(res.body, { message: dotSegment ? res.body.message : 'Note not found' });
        assert.equal(storeCalls, before, `${JSON.stringify(id)} reached the store`);
      }),
      params(150),
    );
    const missing = await request(notes.url, 'DELETE', '/notes/9223372036854775807', { token: notesToken });
    assert.deepEqual([missing.status, missing.body], [404, { message: 'Note not found' }]);
    reportFigures(t, 'property: notes ids', { runs, seed });
  });
});

// ---- JWT-looking strings on every bearer-protected route --------------------------------------

describe('JWT-looking strings against every bearer-protected route', () => {
  const segment = fc.stringMatching(/^[A-Za-z0-9_-]{0,80}$/);
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const structured = fc
    .tuple(
      fc.record({
        alg: fc.constantFrom('none', 'HS256', 'HS512', 'ES256', 'RS256', 'EdDSA', 'None', ''),
        kid: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
        typ: fc.constantFrom('JWT', 'at+jwt', undefined),
      }),
      fc.record({
        sub: fc.uuid(),
        id: fc.uuid(),
        role: fc.constantFrom('authenticated', 'service_role', 'admin', 'user', 'anon'),
        aud: fc.constantFrom('authenticated', 'anon', undefined),
        exp: fc.integer({ min: 0, max: 4_000_000_000 }),
        iat: fc.integer({ min: 0, max: 4_000_000_000 }),
      }),
      segment,
    )
    .map(([h, p, s]) => `${b64(h)}.${b64(p)}.${s}`);
  const tokens = fc.oneof(fc.tuple(segment, segment, segment).map((parts) => parts.join('.')), structured).filter((t) => !t.startsWith('sb_'));

  test('accounts, notes (both modes) and the idp refuse every one with their documented 401/403, never a 5xx', async (t) => {
    let requests = 0;
    const statuses: Record<string, number> = {};
    const expectStatus = (what: string, res: { status: number; text: string }, status: number) => {
      requests += 1;
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      assert.equal(res.status, status, `${what}: ${res.text.slice(0, 200)}`);
    };
    await fc.assert(
      fc.asyncProperty(tokens, async (token) => {
        for (const path of ['/auth/me', '/admin/users']) {
          const res = await accounts.app.inject({ method: 'GET', url: path, headers: { authorization: `Bearer ${token}` } });
          expectStatus(`accounts ${path}`, { status: res.statusCode, text: res.body }, 401);
          assert.equal(envelopeOf(res.body, 401).message, 'Invalid or expired token.');
        }
        for (const app of [notes, notesLocal]) {
          for (const [method, path, body] of [['GET', '/notes'], ['POST', '/notes', { title: 'x' }], ['DELETE', '/notes/1']] as const) {
            const res = await request(app.url, method, path, { token, body });
            expectStatus(`notes ${method} ${path}`, res, 401);
            assert.deepEqual(res.body, { message: 'Invalid or expired token' });
          }
        }
        for (const [method, path] of [['GET', '/auth/v1/user'], ['POST', '/auth/v1/logout'], ['POST', '/auth/v1/admin/users'], ['DELETE', `/auth/v1/admin/users/${randomUUID()}`]] as const) {
          const res = await idpRequest(idp, method, path, { token, body: method === 'POST' ? {} : undefined });
          expectStatus(`idp ${method} ${path}`, res, 403);
          assert.equal(res.body.code, 'bad_jwt');
        }
        for (const method of ['GET', 'POST', 'PATCH', 'DELETE']) {
          const res = await idpRequest(idp, method, '/rest/v1/notes?id=eq.1', { token, body: method === 'POST' || method === 'PATCH' ? { title: 'x' } : undefined });
          expectStatus(`idp ${method} /rest/v1/notes`, res, 401);
          assert.equal(res.body.code, 'PGRST301');
        }
      }),
      params(40),
    );
    reportFigures(t, 'property: JWT-looking strings on bearer routes', { runs: 40, requests, statuses, seed });
  });
});
