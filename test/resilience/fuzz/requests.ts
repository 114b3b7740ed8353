// Generators of hostile HTTP requests for the fuzz run, one per service, all driven by a seeded
// PRNG: known routes with mutated paths, query strings, headers and JSON bodies (deep nesting,
// huge numbers, long strings, prototype-pollution keys, wrong content types, oversized bodies),
// and raw byte sequences for what an HTTP client will not send (bad framing, broken request
// lines, NUL and raw UTF-8 in paths). Requests that would make a service run bcrypt are capped
// per run, so the fuzz measures input handling rather than hashing.
import { randomBytes } from 'node:crypto';
import { checkCredentials, checkRegistration, passwordProblem } from '../../../src/accounts/validation.js';
import { ACCOUNTS_ASSETS } from '../../../src/accounts/routes/web-pages.js';
import { NOTES_ASSETS } from '../../../src/notes/routes/web-pages.js';
import { SHORTENER_ASSETS } from '../../../src/shortener/routes/web-pages.js';
import type { ServiceName } from './envelopes.js';
import type { PlainRequest } from './raw-http.js';
import type { Rng } from './prng.js';

export type FuzzCase =
  | { kind: 'http'; label: string; req: PlainRequest }
  | { kind: 'raw'; label: string; method: string; path: string; bytes: Buffer; incomplete?: boolean };

/** Real credentials and ids the generators mix in, so requests also get past authentication. */
export interface FuzzContext {
  /** accounts: a user's and the admin's token. */
  accountsTokens?: string[];
  /** idp / notes: a user's access token and refresh token. */
  idpToken?: string;
  idpRefreshToken?: string;
  publishableKey?: string;
  secretKey?: string;
  /** shortener: codes that exist. */
  codes?: string[];
  /** shortener: the admin key (SHORTENER_ADMIN_KEY). */
  shortenerAdminKey?: string;
  /** notes: ids of notes that exist. */
  noteIds?: number[];
}

// ---- value pools ------------------------------------------------------------------------------

export const HOSTILE_STRINGS: readonly string[] = [
  '',
  ' ',
  'a',
  'null',
  'undefined',
  'true',
  '0',
  '-1',
  'NaN',
  "' OR '1'='1",
  "'; DROP TABLE users; --",
  '"; DROP TABLE notes; --',
  '1; SELECT pg_sleep(10)',
  "admin'--",
  '<script>alert(1)</script>',
  '${7*7}{{7*7}}',
  '../../../../etc/passwd',
  '%00',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff\ud800',
  '\u202eevil',
  '\r\nX-Injected: 1',
  '\u0085\u2028\u2029',
  '😀'.repeat(40),
  'e\u0301'.repeat(30),
  'a'.repeat(73),
  '€'.repeat(25),
  'ｅｘａｍｐｌｅ',
  'İıß',
  'x@y',
  'a@b.co',
  'USER@EXAMPLE.COM',
  'user@exa mple.com',
  'user@bücher.de',
  'http://example.com/',
  'https://user:pass@example.com/',
  'javascript:alert(1)',
  'data:text/html,<script>alert(1)</script>',
  'file:///etc/passwd',
  'sb_secret_guess',
  'eyJhbGciOiJub25lIn0.eyJyb2xlIjoic2VydmljZV9yb2xlIn0.',
  '__proto__',
  'constructor',
  '1e400',
  '-0',
  '9223372036854775808',
  '00000000-0000-0000-0000-000000000000',
];

const PROTO_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'role',
  'user_id',
  'id',
  'is_admin',
  'email_confirm',
  'app_metadata',
];

function hostileString(rng: Rng): string {
  return rng.weighted<() => string>([
    [12, () => rng.pick(HOSTILE_STRINGS)],
    [4, () => rng.string(rng.int(0, 40), 'abcXYZ019 -_.@/%\'"\\<>&;:=?#\u00e9\u20ac\u{1F600}\u0000\t')],
    [1, () => rng.string(rng.int(1000, 20_000), 'ab€😀')],
  ])();
}

/** A random JSON value (JS side), nested at most `depth` levels. */
function hostileValue(rng: Rng, depth = 3): unknown {
  return rng.weighted<() => unknown>([
    [4, () => hostileString(rng)],
    [1, () => null],
    [1, () => rng.chance(0.5)],
    [2, () => rng.pick([0, -1, 1.5, 2 ** 53 + 2, -(2 ** 63), Number.MAX_VALUE, 1e-300, 12345678901234567890])],
    [depth > 0 ? 1 : 0, () => Array.from({ length: rng.int(0, 4) }, () => hostileValue(rng, depth - 1))],
    [
      depth > 0 ? 1 : 0,
      () =>
        Object.fromEntries(
          Array.from({ length: rng.int(0, 4) }, () => [rng.pick([...PROTO_KEYS, 'a', 'b', '']), hostileValue(rng, depth - 1)]),
        ),
    ],
  ])();
}

// ---- bodies ----------------------------------------------------------------------------------

type FieldGen = (rng: Rng) => unknown;

interface BodyTemplate {
  fields: Record<string, FieldGen>;
  /** True when this parsed body would make the service hash or compare a password. */
  costly?: (body: Record<string, unknown>, req: PlainRequest) => boolean;
  /** Changes the body so that it no longer costs a hash (used once the run's budget is spent). */
  cheapen?: (body: Record<string, unknown>) => void;
}

const CONTENT_TYPES = [
  'text/plain',
  'text/plain; charset=utf-8',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=----x',
  'application/xml',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'application/json;;;',
  'application/jsonx',
  'application/vnd.pgrst.object+json',
  'application/merge-patch+json',
  '*/*',
  'json',
  '',
];

const nested = (levels: number, open: string, close: string, inner = '1') => open.repeat(levels) + inner + close.repeat(levels);

interface Body {
  payload: Buffer;
  contentType?: string;
  object?: Record<string, unknown>;
}

function makeBody(rng: Rng, template: BodyTemplate): Body {
  const asJson = (text: string): Body => ({ payload: Buffer.from(text), contentType: 'application/json' });
  const body = rng.weighted<() => Body>([
    [
      55,
      () => {
        const object: Record<string, unknown> = {};
        for (const [name, good] of Object.entries(template.fields)) {
          const roll = rng.next();
          if (roll < 0.72) object[name] = good(rng);
          else if (roll < 0.92) object[name] = hostileValue(rng);
        }
        if (rng.chance(0.15)) object[rng.pick(PROTO_KEYS)] = hostileValue(rng, 2);
        return { payload: Buffer.from(JSON.stringify(object)), contentType: 'application/json', object };
      },
    ],
    [6, () => asJson(JSON.stringify(hostileValue(rng)))],
    [
      2,
      () => {
        // 10,000 levels, at the top or inside a field.
        const [open, close] = rng.pick([
          ['[', ']'],
          ['{"a":', '}'],
        ] as const);
        const field = rng.pick(Object.keys(template.fields));
        const deep = nested(rng.pick([1_000, 1_001, 10_000]), open, close);
        return asJson(rng.chance(0.5) ? deep : `{"${field}":${deep}}`);
      },
    ],
    [
      2,
      () => {
        // Around and beyond the body limits (64 KiB; 1 MiB for the idp).
        const field = rng.pick(Object.keys(template.fields));
        const size = rng.pick([60_000, 66_000, 1_100_000]);
        return asJson(`{"${field}":"${'x'.repeat(size)}"}`);
      },
    ],
    [
      8,
      () =>
        asJson(
          rng.pick([
            '{',
            '{"a":',
            '{"a":1,}',
            "{'a':1}",
            '{"a":NaN}',
            '{"a":Infinity}',
            '{"a":undefined}',
            '{"a":1} trailing',
            '\ufeff{"a":1}',
            '/* c */ {"a":1}',
            '{"a":"\\x41"}',
            '{"a":"\\ud800"}',
            '{"a":"\u0000"}',
            '[',
            ']',
            '"',
            'null',
            'true',
            '0',
            '""',
            '{"a":1}{"a":2}',
            '{"a":"\\u0000"}',
          ]),
        ),
    ],
    [
      6,
      () => {
        const field = rng.pick(Object.keys(template.fields));
        return asJson(
          rng.pick([
            `{"__proto__":{"role":"admin","isAdmin":true},"${field}":"x"}`,
            `{"constructor":{"prototype":{"role":"admin"}},"${field}":"x"}`,
            `{"${field}":{"__proto__":{"polluted":1}}}`,
            `{"prototype":{"polluted":1},"${field}":"x"}`,
            `{"${field}":"x","${field}":"y"}`,
            `{"__proto__":null}`,
          ]),
        );
      },
    ],
    [
      5,
      () => {
        const field = rng.pick(Object.keys(template.fields));
        return asJson(
          `{"${field}":${rng.pick(['1e400', '-1e400', '123456789012345678901234567890', '1.7976931348623157e309', '-0', '0.0000000000000000000000001', '9007199254740993'])}}`,
        );
      },
    ],
    [4, () => ({ payload: Buffer.alloc(0), contentType: 'application/json' })],
    [3, () => ({ payload: rng.bytes(rng.int(1, 300)), contentType: 'application/json' })],
  ])();
  if (rng.chance(0.12)) {
    body.contentType = rng.chance(0.15) ? undefined : rng.pick(CONTENT_TYPES);
    delete body.object;
  }
  return body;
}

// ---- paths and headers -----------------------------------------------------------------------

const PATH_MUTATIONS: ReadonlyArray<(p: string, rng: Rng) => string> = [
  (p) => `${p}/`,
  (p) => `${p}//`,
  (p) => `/${p}`,
  (p) => `${p}/..`,
  (p) => `${p}/../../../../etc/passwd`,
  (p) => `${p}/%2e%2e/%2e%2e/`,
  (p) => `${p}%2F..%2F..%2F`,
  (p) => `${p}%00`,
  (p) => `${p}%zz`,
  (p) => `${p}%`,
  (p) => `${p}%c0%ae%c0%ae/`,
  (p) => `${p}%252e%252e`,
  (p) => `${p};jsessionid=1`,
  (p) => `${p}%E2%80%AE`,
  (p) => `${p}%F0%9F%98%80`,
  (p) => `${p}%ED%A0%80`,
  (p) => `${p}\u00fc\u00ff`, // latin1 bytes, sent as they are
  (p) => p.toUpperCase(),
  (p) => p.replace(/\//g, '/./'),
  (p) => `/${p.slice(1).replace(/\//g, '\\')}`,
  (p, rng) => `${p}/${'a'.repeat(rng.pick([201, 2_000, 9_000]))}`,
  (p) => `${p}?${'a=b&'.repeat(2_000)}`,
  (p) => `${p}?__proto__[polluted]=1&constructor[prototype][x]=1`,
  (p) => `${p}?a=1&a=2&a[]=3&a[b]=4`,
  (p) => `${p}?%zz=%zz`,
  (p) => `${p}#fragment`,
];

function mutatePath(rng: Rng, path: string): string {
  return rng.chance(0.2) ? rng.pick(PATH_MUTATIONS)(path, rng) : path;
}

const pathSegment = (rng: Rng) => encodeURIComponent(hostileString(rng).replace(/[\ud800-\udfff]/g, '')).slice(0, 300);

const JUNK_TOKENS = (rng: Rng): string =>
  rng.pick([
    'a.b.c',
    'eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.',
    `${Buffer.from(JSON.stringify({ alg: 'HS256' })).toString('base64url')}.${Buffer.from(JSON.stringify({ role: 'admin', id: '00000000-0000-0000-0000-000000000000' })).toString('base64url')}.x`,
    'x'.repeat(8_000),
    "' OR '1'='1",
    'null',
    '...',
    rng.bytes(24).toString('base64url'),
  ]);

function authorization(rng: Rng, realTokens: string[]): string | undefined {
  return rng.weighted<() => string | undefined>([
    [realTokens.length > 0 ? 40 : 0, () => `Bearer ${rng.pick(realTokens)}`],
    [20, () => undefined],
    [20, () => `Bearer ${JUNK_TOKENS(rng)}`],
    [
      15,
      () =>
        rng.pick([
          '',
          'Bearer',
          'Bearer ',
          'bearer  x',
          'Basic dXNlcjpwYXNz',
          'Token abc',
          'Bearer a b',
          'Bearer\tabc',
          `Bearer ${realTokens[0] ?? 'x'}x`,
          `Bearer ${(realTokens[0] ?? 'x.y.z').slice(0, -2)}`,
          'Bearer sb_publishable_guess',
          'Digest username="a"',
        ]),
    ],
    [5, () => `Bearer ${rng.pick(realTokens.length > 0 ? realTokens : ['x'])}, Bearer x`],
  ])();
}

/** `clientIp()`: the address a request claims through X-Forwarded-For (the services trust 127.0.0.1). */
function commonHeaders(rng: Rng, clientIp: () => string): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  headers['x-forwarded-for'] = rng.chance(0.85)
    ? clientIp()
    : rng.pick(['zzz', '1.2.3.4, 5.6.7.8', '::1', '999.999.999.999', '', 'a'.repeat(500), '10.0.0.1, 10.0.0.1', '127.0.0.1']);
  if (rng.chance(0.1))
    headers['x-request-id'] = rng.pick(['id-1', 'a'.repeat(300), '../../etc', '\u00ff\u00fe', "'; DROP TABLE x; --", '']);
  if (rng.chance(0.1)) headers.accept = rng.pick(['application/json', 'text/html', '*/*', 'application/xml', 'image/png;q=0.9', '']);
  if (rng.chance(0.05)) headers['accept-encoding'] = rng.pick(['gzip, deflate, br', 'identity;q=0', '*']);
  if (rng.chance(0.03)) headers['content-encoding'] = rng.pick(['gzip', 'br', 'deflate', 'identity', 'x']);
  if (rng.chance(0.03)) headers.cookie = rng.pick(['a=b', `session=${'x'.repeat(4000)}`, '=;=;']);
  if (rng.chance(0.03)) headers['x-http-method-override'] = rng.pick(['DELETE', 'PUT', 'GET']);
  if (rng.chance(0.02)) headers.host = rng.pick(['evil.example', '127.0.0.1:1', 'a'.repeat(300), '[::1]']);
  if (rng.chance(0.02)) headers['x-duplicated'] = ['1', '2', '3'];
  if (rng.chance(0.02)) {
    // Many headers (Node keeps 2,000 and drops the rest).
    for (let i = 0; i < 150; i++) headers[`x-many-${i}`] = 'v'.repeat(rng.int(1, 20));
  }
  return headers;
}

const WEIRD_METHODS = [
  'PUT',
  'PATCH',
  'OPTIONS',
  'TRACE',
  'PROPFIND',
  'MKCOL',
  'PURGE',
  'SEARCH',
  'LINK',
  'REPORT',
  'M-SEARCH',
  'QUERY',
  'SOURCE',
  'BIND',
];

// ---- routes per service ------------------------------------------------------------------------

interface Route {
  weight: number;
  methods: readonly string[];
  path: (rng: Rng, ctx: FuzzContext) => string;
  body?: BodyTemplate;
  /** The Authorization values this route is tried with. */
  tokens?: (ctx: FuzzContext) => string[];
  /** Extra headers (the idp's gateway and REST headers). */
  headers?: (rng: Rng, ctx: FuzzContext) => Record<string, string>;
}

const uuid = (rng: Rng) => {
  const h = rng.bytes(16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
};
const validEmail = (rng: Rng) => rng.pick([`fuzz-${rng.int(0, 1e9)}@example.com`, `FUZZ-${rng.int(0, 1e9)}@Example.COM`]);
/**
 * An address the test registers before the run (accounts and idp), so the mail routes also take
 * their path for a known account and really send mail. New for each run, outside the seeded
 * sequence: accounts keeps its one-mail-a-minute limit per address in Redis, which outlives a run.
 */
export const FUZZ_MAIL_ADDRESS = `fuzz-mail-${randomBytes(4).toString('hex')}@example.com`;
const mailEmail = (rng: Rng) => (rng.chance(0.3) ? rng.pick([FUZZ_MAIL_ADDRESS, FUZZ_MAIL_ADDRESS.toUpperCase()]) : validEmail(rng));
const validPassword = (rng: Rng) => rng.pick(['fuzz-password-1', '€'.repeat(24), 'short', 'x'.repeat(72)]);
const HEALTH: Route = {
  weight: 2,
  methods: ['GET', 'HEAD', 'POST'],
  path: (rng) => rng.pick(['/healthz', '/readyz', '/docs/json', '/docs', '/docs/static/index.html', '/']),
};

const accountsRoutes: Route[] = [
  {
    weight: 25,
    methods: ['POST'],
    path: () => '/auth/register',
    body: {
      fields: { name: (rng) => rng.pick(['Fuzz User', 'Zoë 😀', 'a', ' '.repeat(3)]), email: validEmail, password: validPassword },
      costly: (b) => passes(() => checkRegistration(b as never)),
      cheapen: (b) => void (b.password = 'x'),
    },
  },
  {
    weight: 25,
    methods: ['POST'],
    path: () => '/auth/login',
    body: {
      fields: { email: validEmail, password: validPassword },
      costly: (b) => passes(() => checkCredentials(b as never)),
      cheapen: (b) => void (b.password = 'x'),
    },
  },
  { weight: 20, methods: ['GET', 'HEAD', 'POST', 'DELETE'], path: () => '/auth/me', tokens: (ctx) => ctx.accountsTokens ?? [] },
  {
    weight: 20,
    methods: ['GET', 'HEAD'],
    path: (rng) =>
      `/admin/users${rng.pick(['', '?page=1', '?page=0', '?page=-1', '?page=1e400', '?page=abc', '?per_page=1000', '?per_page=1001', '?page=1000000&per_page=1000', '?page[]=1', '?page=1&page=2', `?page=${rng.pick(HOSTILE_STRINGS.filter((s) => /^[\x21-\x7e]*$/.test(s)))}`, '?unknown=1'])}`,
    tokens: (ctx) => ctx.accountsTokens ?? [],
  },
  // Sessions, password and admin changes. Never scope "global", a real user id or a real
  // current password: the run's own tokens must keep working for the other routes.
  {
    weight: 8,
    methods: ['POST'],
    path: () => '/auth/refresh',
    body: { fields: { refresh_token: (rng) => rng.pick([rng.bytes(32).toString('base64url'), hostileString(rng)]) } },
  },
  {
    weight: 6,
    methods: ['POST'],
    path: () => '/auth/logout',
    body: {
      fields: {
        refresh_token: (rng) => rng.pick([rng.bytes(32).toString('base64url'), hostileString(rng)]),
        scope: (rng) => rng.pick(['local', hostileString(rng)]),
      },
    },
    tokens: (ctx) => ctx.accountsTokens ?? [],
  },
  { weight: 6, methods: ['GET', 'HEAD'], path: () => '/auth/sessions', tokens: (ctx) => ctx.accountsTokens ?? [] },
  {
    weight: 6,
    methods: ['DELETE'],
    path: (rng) => `/auth/sessions/${rng.chance(0.5) ? uuid(rng) : pathSegment(rng)}`,
    tokens: (ctx) => ctx.accountsTokens ?? [],
  },
  {
    weight: 6,
    methods: ['POST'],
    path: () => '/auth/password',
    body: {
      fields: { current_password: (rng) => hostileString(rng), new_password: validPassword },
      costly: (b) => typeof b.new_password === 'string' && passwordProblem(b.new_password) === undefined,
      cheapen: (b) => void (b.new_password = 'x'),
    },
    tokens: (ctx) => ctx.accountsTokens ?? [],
  },
  {
    weight: 8,
    methods: ['PATCH', 'DELETE'],
    path: (rng) => `/admin/users/${rng.chance(0.5) ? uuid(rng) : pathSegment(rng)}`,
    body: {
      fields: {
        role: (rng) => rng.pick(['user', 'admin', hostileString(rng)]),
        banned: (rng) => rng.pick([true, false, hostileString(rng)]),
      },
    },
    tokens: (ctx) => ctx.accountsTokens ?? [],
  },
  {
    weight: 6,
    methods: ['GET', 'HEAD'],
    path: (rng) =>
      `/admin/audit${rng.pick(['', '?page=2&per_page=3', '?page=1e400', '?per_page=1001', `?user_id=${uuid(rng)}`, '?event=role_changed', `?event=${pathSegment(rng)}`, `?user_id=${pathSegment(rng)}`])}`,
    tokens: (ctx) => ctx.accountsTokens ?? [],
  },
  // Mail: the reset and resend requests queue mails to the test's SMTP server (and meet the per-IP
  // and per-address limits, a 429 or the same 202); the confirms look made-up tokens up, so they
  // never reach bcrypt, and a real run token is never one of them.
  { weight: 8, methods: ['POST'], path: () => '/auth/password-reset', body: { fields: { email: mailEmail } } },
  { weight: 4, methods: ['POST'], path: () => '/auth/verify-email/resend', body: { fields: { email: mailEmail } } },
  {
    weight: 6,
    methods: ['POST'],
    path: () => '/auth/password-reset/confirm',
    body: { fields: { token: mailToken, new_password: validPassword } },
  },
  { weight: 5, methods: ['POST'], path: () => '/auth/verify-email', body: { fields: { token: mailToken } } },
  { weight: 6, methods: ['GET', 'HEAD', 'POST', 'PUT'], path: (rng) => accountsPage(rng) },
  HEALTH,
];

/** A mailed token's shape (32 random bytes, base64url), or a near miss. */
function mailToken(rng: Rng): string {
  return rng.pick([rng.bytes(32).toString('base64url'), rng.bytes(32).toString('base64url').slice(1), 'a'.repeat(257), hostileString(rng)]);
}

/** The accounts pages and their assets, the ones served and near misses (below a page, traversal). */
function accountsPage(rng: Rng): string {
  const page = rng.pick([
    '/',
    '/register',
    '/account',
    '/admin',
    '/reset-password',
    '/verify-email',
    '/account/x',
    '/reset-password/',
    ...Object.keys(ACCOUNTS_ASSETS),
    `/assets/accounts/${pathSegment(rng)}`,
    `/assets/${pathSegment(rng)}`,
    '/assets/../package.json',
    '/assets/%2e%2e/%2e%2e/package.json',
    '/assets/accounts/..%2f..%2f..%2fconfig.ts',
    '/assets/',
  ]);
  return rng.chance(0.2)
    ? `${page}?${rng.pick(['next=/admin', 'next=https://evil.example', 'token=x', `q=${pathSegment(rng)}`, 'a=1&a=2'])}`
    : page;
}

const shortenerRoutes: Route[] = [
  {
    weight: 35,
    methods: ['POST'],
    path: () => '/api/links',
    body: {
      fields: {
        url: (rng) =>
          rng.pick([
            'https://example.com/fuzz',
            'http://bücher.example/ü',
            `https://example.com/${'a'.repeat(2040)}`,
            'https://user:pass@example.com/',
          ]),
      },
    },
  },
  {
    weight: 20,
    methods: ['GET', 'HEAD'],
    path: (rng, ctx) => `/api/links/${rng.chance(0.4) && ctx.codes?.length ? rng.pick(ctx.codes) : pathSegment(rng)}`,
  },
  {
    weight: 30,
    methods: ['GET', 'HEAD', 'DELETE', 'POST'],
    path: (rng, ctx) =>
      `/${rng.chance(0.4) && ctx.codes?.length ? rng.pick(ctx.codes) : rng.chance(0.3) ? rng.string(7, 'abcXYZ0129') : pathSegment(rng)}`,
  },
  {
    weight: 8,
    methods: ['GET', 'HEAD'],
    path: (rng, ctx) =>
      `/api/links/${rng.chance(0.6) && ctx.codes?.length ? rng.pick(ctx.codes) : pathSegment(rng)}/qr` +
      rng.pick([
        '',
        '?format=png',
        '?format=svg&size=1024',
        '?size=64',
        '?size=63',
        '?size=1e400',
        '?format=gif',
        `?size=${rng.int(-2000, 3000)}`,
        `?format=${pathSegment(rng)}`,
      ]),
  },
  {
    weight: 8,
    methods: ['GET', 'HEAD'],
    path: (rng) =>
      `/api/links${rng.pick(['', '?page=2&per_page=1', '?per_page=1000', '?page=0', '?page=1e400', '?q=%00', '?q=example.com', '?q=%25_%5C', `?q=${pathSegment(rng)}`, `?per_page=${rng.int(-5, 2000)}`])}`,
    tokens: (ctx) => (ctx.shortenerAdminKey ? [ctx.shortenerAdminKey] : []),
  },
  {
    weight: 8,
    methods: ['PATCH'],
    // Mostly codes that do not exist, so the seeded links keep serving the other routes.
    path: (rng, ctx) =>
      `/api/links/${rng.chance(0.3) && ctx.codes?.length ? rng.pick(ctx.codes) : rng.chance(0.5) ? rng.string(7, 'abcXYZ0129') : pathSegment(rng)}`,
    body: {
      fields: {
        expires_at: (rng) =>
          rng.pick([
            null,
            '2030-01-01T00:00:00Z',
            '2030-01-01T00:00:00+14:00',
            '2030-02-30T00:00:00Z',
            '9999-12-31T23:59:59-01:00',
            'tomorrow',
          ]),
        max_visits: (rng) => rng.pick([null, 1, 0, -1, 2 ** 53, 1.5, '3']),
        disabled: (rng) => rng.pick([true, false, 'true', null]),
      },
    },
    tokens: (ctx) => (ctx.shortenerAdminKey ? [ctx.shortenerAdminKey] : []),
  },
  {
    weight: 3,
    methods: ['DELETE'],
    path: (rng) => `/api/links/${rng.chance(0.5) ? rng.string(7, 'abcXYZ0129') : pathSegment(rng)}`,
    tokens: (ctx) => (ctx.shortenerAdminKey ? [ctx.shortenerAdminKey] : []),
  },
  {
    weight: 10,
    methods: ['GET', 'HEAD'],
    path: (rng, ctx) => `/api/links/${existingOrNot(rng, ctx)}/visits${visitsQuery(rng)}`,
    // The admin key reads every link's visits, so the query parsing behind the credential check is fuzzed too.
    tokens: (ctx) => (ctx.shortenerAdminKey ? [ctx.shortenerAdminKey] : []),
  },
  {
    weight: 8,
    methods: ['GET', 'HEAD', 'POST'],
    path: (rng, ctx) => shortenerPage(rng, ctx),
    headers: (rng): Record<string, string> =>
      rng.chance(0.3) ? { 'if-none-match': rng.pick(['*', '"x"', 'W/"x"', '"', `"${'a'.repeat(300)}"`, '"a", "b"']) } : {},
  },
  HEALTH,
];

/** A code that exists, one that might (7 letters and digits), or any path segment. */
function existingOrNot(rng: Rng, ctx: FuzzContext): string {
  return rng.chance(0.6) && ctx.codes?.length ? rng.pick(ctx.codes) : rng.chance(0.3) ? rng.string(7, 'abcXYZ0129') : pathSegment(rng);
}

/** Values of the visits endpoint's `from` and `to`: valid dates and timestamps, and every near miss. */
const VISIT_TIMES = [
  '2026-11-01',
  '2026-11-01T00:00:00Z',
  '2026-11-01T12:30:00.123456789+05:30',
  '2026-11-01T12:30:00-0800',
  '2026-10-01',
  '2025-11-01',
  '1970-01-01',
  '9999-12-31T23:59:59Z',
  '2026-02-30',
  '2026-13-01',
  '2026-11-01T24:00:00Z',
  '2026-11-01T00:60:00Z',
  '2026-11-01T00:00:00',
  '2026-11-01T00:00:00+24:00',
  '2026-11-01 00:00:00Z',
  '2026-11-01T00:00:00%2B00:00',
  '20261101',
  '1969-12-31',
  '0000-01-01',
  '+275760-09-13',
  '1e400',
  '-1',
  'now',
  '',
];

function visitsQuery(rng: Rng): string {
  const parts: string[] = [];
  const value = (pool: readonly string[]) => (rng.chance(0.8) ? rng.pick(pool) : pathSegment(rng));
  if (rng.chance(0.6)) parts.push(`from=${value(VISIT_TIMES)}`);
  if (rng.chance(0.5)) parts.push(`to=${value(VISIT_TIMES)}`);
  if (rng.chance(0.6)) parts.push(`interval=${value(['hour', 'day', 'HOUR', 'Day', 'week', 'minute', 'hour%00', 'hour ', ''])}`);
  if (rng.chance(0.1))
    parts.push(
      rng.pick(['from=2026-11-01&from=2026-11-02', 'interval=hour&interval=day', 'from[]=2026-11-01', 'to[a]=1', 'interval', 'unknown=1']),
    );
  if (rng.chance(0.5)) parts.reverse();
  return parts.length > 0 ? `?${parts.join('&')}` : '';
}

/** The pages and their assets, the ones served and near misses (other files, traversal). */
function shortenerPage(rng: Rng, ctx: FuzzContext): string {
  const page = rng.pick([
    '/',
    '/admin',
    `/stats/${existingOrNot(rng, ctx)}`,
    '/stats/',
    '/stats',
    ...Object.keys(SHORTENER_ASSETS),
    `/assets/${pathSegment(rng)}`,
    '/assets/shortener/index.html',
    '/assets/../package.json',
    '/assets/%2e%2e/%2e%2e/package.json',
    '/assets/shortener/..%2f..%2f..%2fsrc%2fdev%2fcli.ts',
    '/assets/vendor/uPlot.iife.js',
    '/assets/',
  ]);
  return rng.chance(0.2) ? `${page}?${rng.pick(['code=x', 'key=secret', `q=${pathSegment(rng)}`, 'a=1&a=2'])}` : page;
}

const notesCredentials: BodyTemplate = {
  fields: { email: validEmail, password: validPassword },
  costly: (b) => typeof b.email === 'string' && b.email.includes('@') && typeof b.password === 'string' && b.password.length > 0,
  cheapen: (b) => void (b.password = ''),
};

const notesRoutes: Route[] = [
  { weight: 10, methods: ['POST'], path: () => '/auth/register', body: notesCredentials },
  { weight: 10, methods: ['POST'], path: () => '/auth/login', body: notesCredentials },
  {
    weight: 25,
    methods: ['GET', 'HEAD'],
    path: (rng) => rng.pick(['/notes', '/notes?select=*', '/notes?user_id=eq.x', '/notes/']),
    tokens: (ctx) => (ctx.idpToken ? [ctx.idpToken] : []),
  },
  {
    weight: 30,
    methods: ['POST', 'PUT', 'PATCH'],
    path: () => '/notes',
    body: {
      fields: {
        title: (rng) => rng.pick(['fuzz note', '😀', 'x'.repeat(200)]),
        body: (rng) => rng.pick(['body', null, 'y'.repeat(10_000)]),
      },
    },
    tokens: (ctx) => (ctx.idpToken ? [ctx.idpToken] : []),
  },
  {
    weight: 20,
    methods: ['DELETE', 'GET'],
    path: (rng, ctx) =>
      `/notes/${rng.chance(0.3) && ctx.noteIds?.length ? rng.pick(ctx.noteIds) : rng.chance(0.3) ? rng.int(0, 1e6) : pathSegment(rng)}`,
    tokens: (ctx) => (ctx.idpToken ? [ctx.idpToken] : []),
  },
  // The provider mails the recovery link (to the test's SMTP server) or answers the same 202.
  { weight: 6, methods: ['POST'], path: () => '/auth/password-reset', body: { fields: { email: mailEmail } } },
  {
    weight: 6,
    methods: ['POST'],
    path: () => '/auth/password',
    // Weak, too long or hostile passwords mostly; a valid one is hashed by the provider, within the budget.
    body: {
      fields: { password: (rng) => rng.pick(['short', 'x'.repeat(73), '€'.repeat(30), 'fuzz-notes-password', 'fuzz-new-password-1']) },
      costly: (b) => typeof b.password === 'string' && b.password.length >= 6,
      cheapen: (b) => void (b.password = ''),
    },
    tokens: (ctx) => (ctx.idpToken ? [ctx.idpToken] : []),
  },
  { weight: 5, methods: ['GET', 'HEAD', 'POST'], path: (rng) => notesPage(rng) },
  HEALTH,
];

/** The notes pages and their assets, the ones served and near misses. */
function notesPage(rng: Rng): string {
  const page = rng.pick([
    '/',
    '/forgot-password',
    '/reset-password',
    '/reset-password/x',
    ...Object.keys(NOTES_ASSETS),
    '/assets/notes/missing.js',
    `/assets/notes/${pathSegment(rng)}`,
    '/assets/../package.json',
    '/assets/%2e%2e/%2e%2e/package.json',
    '/assets/',
  ]);
  return rng.chance(0.2) ? `${page}?${rng.pick(['type=recovery', 'error=access_denied', `q=${pathSegment(rng)}`, 'a=1&a=2'])}` : page;
}

/** apikey: mostly the publishable key, sometimes the secret one, a wrong one or none. */
function gatewayHeaders(rng: Rng, ctx: FuzzContext): Record<string, string> {
  const headers: Record<string, string> = {};
  const apikey = rng.weighted<() => string | undefined>([
    [60, () => ctx.publishableKey],
    [15, () => ctx.secretKey],
    [15, () => rng.pick(['sb_publishable_wrong', 'sb_secret_wrong', '', 'x'.repeat(5_000), `${ctx.publishableKey ?? ''} `])],
    [10, () => undefined],
  ])();
  if (apikey !== undefined) headers.apikey = apikey;
  if (rng.chance(0.8)) headers['x-supabase-api-version'] = rng.pick(['2024-01-01', '2024-01-01', '2023-01-01', '9999-99-99', 'garbage']);
  return headers;
}

function restHeaders(rng: Rng, ctx: FuzzContext): Record<string, string> {
  const headers = gatewayHeaders(rng, ctx);
  if (rng.chance(0.4))
    headers.prefer = rng.pick([
      'return=representation',
      'return=minimal',
      'count=exact',
      'return=representation, count=exact',
      'resolution=merge-duplicates',
      'tx=rollback',
      'junk=1',
      ''.padEnd(3000, 'a'),
    ]);
  if (rng.chance(0.3))
    headers.accept = rng.pick(['application/json', 'application/vnd.pgrst.object+json', 'text/csv', '*/*', 'application/geo+json', '']);
  if (rng.chance(0.1)) headers['accept-profile'] = rng.pick(['public', 'auth', 'pg_catalog', "public'; --", '']);
  if (rng.chance(0.1)) headers['content-profile'] = rng.pick(['public', 'auth', 'information_schema']);
  if (rng.chance(0.05)) headers.range = rng.pick(['0-9', 'items=0-9', 'bytes=0-']);
  return headers;
}

const REST_TABLES = [
  'notes',
  'notes',
  'notes',
  'users',
  'notez',
  'pg_user',
  'auth.users',
  'notes;drop',
  '%22notes%22',
  '',
  'rpc/x',
  'notes/1',
];
const REST_COLUMNS = [
  'id',
  'title',
  'body',
  'user_id',
  'created_at',
  'nope',
  '"id"',
  'ti"tle',
  'or',
  'and',
  '__proto__',
  'constructor',
  'title->>x',
  'title::text',
  '*',
];
const REST_OPS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'is', 'like', 'ilike', 'cs', 'fts', 'not.eq', 'not.in', 'not', ''];

function restQuery(rng: Rng): string {
  const parts: string[] = [];
  const n = rng.int(0, 4);
  for (let i = 0; i < n; i++) {
    const value = rng.weighted<() => string>([
      [3, () => String(rng.int(-5, 100))],
      [3, () => hostileString(rng).slice(0, 200)],
      [1, () => `(${Array.from({ length: rng.int(0, 4) }, () => rng.pick(['1', '"a,b"', "'x'", '', ')', '(']))})`],
      [1, () => rng.pick(['null', 'true', 'false', 'unknown', 'NULL', 'nan'])],
    ])();
    const key = rng.weighted<() => string>([
      [5, () => rng.pick(REST_COLUMNS)],
      [1, () => rng.pick(['select', 'order', 'limit', 'offset', 'columns', 'on_conflict'])],
    ])();
    parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(`${rng.pick(REST_OPS)}.${value}`.replace(/[\ud800-\udfff]/g, ''))}`);
  }
  if (rng.chance(0.4))
    parts.push(
      `select=${encodeURIComponent(rng.pick(['*', 'id,title', 'title', 'nope', '*,foo(*)', 'count()', 'title::text', '"title"', 'ti"tle', '', 'id,id', 'user_id,auth.users(*)']))}`,
    );
  if (rng.chance(0.3))
    parts.push(
      `order=${encodeURIComponent(rng.pick(['created_at.desc', 'id.asc.nullsfirst', 'x', 'id;drop table notes', '', 'id.desc,title', '"id".desc', 'id.sideways', 'id.asc.nullsfirst.extra']))}`,
    );
  if (rng.chance(0.2)) parts.push(`limit=${encodeURIComponent(rng.pick(['0', '1', '-1', 'abc', '99999999999999999999', '1e3', '']))}`);
  if (rng.chance(0.1)) parts.push(`offset=${encodeURIComponent(rng.pick(['0', '5', '-1', 'x']))}`);
  if (rng.chance(0.1)) parts.push(`columns=${encodeURIComponent(rng.pick(['title', 'title,body', 'nope', '"title"', 'title)', '']))}`);
  return parts.length === 0 ? '' : `?${parts.join('&')}`;
}

const idpCredentials = (extra: Record<string, FieldGen> = {}): BodyTemplate => ({
  fields: { email: validEmail, password: validPassword, ...extra },
  costly: (b) => typeof b.email === 'string' && b.email !== '' && typeof b.password === 'string' && b.password !== '',
  cheapen: (b) => void (b.email = ''),
});

/** Referer values an HTTP client sends (header values are printable ASCII): GET /verify falls back to it without redirect_to. */
const REFERERS = [
  'http://127.0.0.1:9999/reset-password',
  'https://evil.example/',
  'javascript:alert(1)',
  '//evil.example',
  'about:blank',
  '',
  'x'.repeat(3000),
];
/** A verification type: the real ones, near misses, and names every object inherits (a type is looked up by name). */
const otpType = (rng: Rng): string =>
  rng.pick([
    'signup',
    'invite',
    'recovery',
    'magiclink',
    'email',
    'email_change',
    'sms',
    'phone_change',
    '',
    'SIGNUP',
    'constructor',
    '__proto__',
    'toString',
    hostileString(rng),
  ]);
const redirectValue = (rng: Rng): string =>
  rng.pick([
    'http://127.0.0.1:9999/reset-password',
    'https://evil.example/',
    'javascript:alert(1)',
    '//evil.example',
    'http://127.0.0.1:1/x?a=b#c',
    '',
    hostileString(rng),
  ]);
/** A query value percent-encoded, lone surrogates dropped (encodeURIComponent refuses them). */
const queryValue = (value: string): string => encodeURIComponent(value.replace(/[\ud800-\udfff]/g, ''));
const redirectQuery = (rng: Rng): string => (rng.chance(0.4) ? `?redirect_to=${queryValue(redirectValue(rng))}` : '');

const idpRoutes: Route[] = [
  {
    weight: 8,
    methods: ['POST'],
    path: () => '/auth/v1/signup',
    body: idpCredentials({ data: (rng) => hostileValue(rng, 3) }),
    headers: gatewayHeaders,
  },
  {
    weight: 10,
    methods: ['POST'],
    path: (rng) =>
      `/auth/v1/token${rng.pick(['?grant_type=password', '?grant_type=password', '?grant_type=refresh_token', '?grant_type=pkce', '?grant_type=', '', '?grant_type[]=password'])}`,
    body: idpCredentials({ refresh_token: (rng) => rng.pick(['x', 'a'.repeat(44), '']) }),
    headers: gatewayHeaders,
  },
  {
    weight: 8,
    methods: ['GET', 'HEAD', 'PUT'],
    path: () => '/auth/v1/user',
    // PUT with an email starts an address change (a mail to the new address); no password field,
    // so the run's user keeps its credentials.
    body: { fields: { email: validEmail, data: (rng) => hostileValue(rng, 2) } },
    tokens: (ctx) => (ctx.idpToken ? [ctx.idpToken] : []),
    headers: gatewayHeaders,
  },
  // Mail routes: recover and resend mail the test's SMTP server (or meet the per-address limit);
  // verify looks up made-up codes and hashes; invite and generate_link create users (a hash of a
  // random password each), so they count against the hashing budget.
  {
    weight: 5,
    methods: ['POST'],
    path: (rng) => `/auth/v1/recover${redirectQuery(rng)}`,
    body: { fields: { email: mailEmail } },
    headers: gatewayHeaders,
  },
  {
    weight: 4,
    methods: ['POST'],
    path: (rng) => `/auth/v1/resend${redirectQuery(rng)}`,
    body: { fields: { type: otpType, email: mailEmail } },
    headers: gatewayHeaders,
  },
  {
    weight: 6,
    methods: ['POST'],
    path: () => '/auth/v1/verify',
    body: {
      fields: {
        type: otpType,
        token: (rng) => rng.pick([String(rng.int(0, 999_999)).padStart(6, '0'), '1234567', '']),
        token_hash: (rng) => rng.bytes(28).toString('hex'),
        email: validEmail,
        redirect_to: redirectValue,
      },
    },
    headers: gatewayHeaders,
  },
  {
    weight: 5,
    methods: ['GET', 'HEAD'],
    // The mailed link: no apikey needed, a 303 with the outcome in the fragment.
    path: (rng) => {
      const parts = [`token=${rng.chance(0.6) ? rng.bytes(28).toString('hex') : pathSegment(rng)}`, `type=${queryValue(otpType(rng))}`];
      if (rng.chance(0.5)) parts.push(`redirect_to=${queryValue(redirectValue(rng))}`);
      if (rng.chance(0.2)) parts.push(rng.pick(['token=a&token=b', 'type[]=signup', 'redirect_to']));
      return `/auth/v1/verify?${(rng.chance(0.8) ? parts : parts.slice(1)).join('&')}`;
    },
    headers: (rng, ctx) => (rng.chance(0.5) ? gatewayHeaders(rng, ctx) : rng.chance(0.3) ? { referer: rng.pick(REFERERS) } : {}),
  },
  {
    weight: 2,
    methods: ['POST'],
    path: (rng) => `/auth/v1/invite${redirectQuery(rng)}`,
    body: {
      fields: { email: validEmail, data: (rng) => hostileValue(rng, 2) },
      costly: (b) => typeof b.email === 'string' && b.email.includes('@'),
      cheapen: (b) => void (b.email = ''),
    },
    headers: gatewayHeaders,
  },
  {
    weight: 3,
    methods: ['POST'],
    path: () => '/auth/v1/admin/generate_link',
    body: {
      fields: {
        type: (rng) => rng.pick(['signup', 'invite', 'recovery', 'magiclink', 'email_change', 'nope', 'constructor', '__proto__']),
        email: validEmail,
        password: validPassword,
        data: (rng) => hostileValue(rng, 2),
        redirect_to: redirectValue,
      },
      costly: (b) => typeof b.email === 'string' && b.email.includes('@'),
      cheapen: (b) => void (b.email = ''),
    },
    headers: gatewayHeaders,
  },
  // Logout is only fuzzed with junk tokens: the real session is what the other routes use.
  {
    weight: 3,
    methods: ['POST'],
    path: (rng) => `/auth/v1/logout${rng.pick(['', '?scope=global', '?scope=others', '?scope=all', '?scope[]=local'])}`,
    headers: gatewayHeaders,
  },
  {
    weight: 5,
    methods: ['POST', 'GET'],
    path: () => '/auth/v1/admin/users',
    body: idpCredentials({
      email_confirm: (rng) => rng.chance(0.5),
      user_metadata: (rng) => hostileValue(rng, 3),
      app_metadata: (rng) => hostileValue(rng, 3),
    }),
    headers: gatewayHeaders,
  },
  {
    weight: 4,
    methods: ['DELETE'],
    path: (rng) => `/auth/v1/admin/users/${rng.chance(0.5) ? uuid(rng) : pathSegment(rng)}`,
    headers: gatewayHeaders,
  },
  {
    weight: 3,
    methods: ['GET', 'HEAD', 'POST'],
    path: (rng) => rng.pick(['/auth/v1/.well-known/jwks.json', '/auth/v1/settings', '/auth/v1/', '/auth/v1/admin/users/']),
    headers: gatewayHeaders,
  },
  {
    weight: 50,
    methods: ['GET', 'GET', 'HEAD', 'POST', 'PATCH', 'DELETE', 'PUT'],
    path: (rng) => `/rest/v1/${rng.pick(REST_TABLES)}${restQuery(rng)}`,
    body: {
      fields: {
        title: (rng) => rng.pick(['fuzz', '😀', '']),
        body: (rng) => rng.pick(['b', null]),
        user_id: () => '00000000-0000-0000-0000-000000000000',
        id: (rng) => rng.int(1, 100),
      },
    },
    tokens: (ctx) => (ctx.idpToken ? [ctx.idpToken] : []),
    headers: restHeaders,
  },
  HEALTH,
];

export const ROUTES: Record<ServiceName, Route[]> = {
  accounts: accountsRoutes,
  shortener: shortenerRoutes,
  notes: notesRoutes,
  idp: idpRoutes,
};

function passes(check: () => unknown): boolean {
  try {
    check();
    return true;
  } catch {
    return false;
  }
}

// ---- raw byte sequences -----------------------------------------------------------------------

/** Raw cases that send fewer bytes than they announce (or no parsable request): the connection is half-closed at once. */
const INCOMPLETE = new Set([
  'huge Content-Length',
  'Content-Length larger than the body',
  'chunked without the last chunk',
  'chunk size overflow',
  'request head cut short',
  'random bytes',
  'TLS ClientHello',
  'HTTP/2 preface',
  'no version',
]);

function rawCase(rng: Rng, path: string): { label: string; method: string; bytes: Buffer; incomplete: boolean } {
  const json = '{"a":1}';
  const head = (method: string, target: string, headers: string[], body = '', version = 'HTTP/1.1') =>
    Buffer.concat([
      Buffer.from(`${method} `),
      Buffer.from(target, 'utf8'),
      Buffer.from(` ${version}\r\n${[...headers, 'Connection: close'].join('\r\n')}\r\n\r\n`, 'latin1'),
      Buffer.from(body),
    ]);
  const post = (headers: string[], body = json) =>
    head('POST', path, ['Host: 127.0.0.1', 'Content-Type: application/json', ...headers], body);
  const cases: Array<[string, () => Buffer]> = [
    ['Content-Length not a number', () => post([`Content-Length: ${rng.pick(['abc', '1e3', '0x10', ' 7', '7 7', '+7'])}`])],
    ['negative Content-Length', () => post(['Content-Length: -7'])],
    ['huge Content-Length', () => post(['Content-Length: 99999999999999999999'])],
    ['two different Content-Lengths', () => post(['Content-Length: 7', 'Content-Length: 8'])],
    ['Content-Length list', () => post(['Content-Length: 7, 8'])],
    ['Content-Length larger than the body', () => post(['Content-Length: 500'])],
    [
      'Content-Length smaller than the body (smuggled rest)',
      () => post(['Content-Length: 3'], `${json}GET /admin/users HTTP/1.1\r\nHost: x\r\n\r\n`),
    ],
    ['Transfer-Encoding and Content-Length', () => post(['Content-Length: 7', 'Transfer-Encoding: chunked'], `7\r\n${json}\r\n0\r\n\r\n`)],
    ['chunk size not hex', () => post(['Transfer-Encoding: chunked'], `zz\r\n${json}\r\n0\r\n\r\n`)],
    ['chunk size overflow', () => post(['Transfer-Encoding: chunked'], `ffffffffffffffffff\r\n${json}\r\n0\r\n\r\n`)],
    ['chunked without the last chunk', () => post(['Transfer-Encoding: chunked'], `7\r\n${json}\r\n`)],
    ['Transfer-Encoding gzip', () => post(['Transfer-Encoding: gzip'])],
    ['Transfer-Encoding chunked twice', () => post(['Transfer-Encoding: chunked, chunked'], `7\r\n${json}\r\n0\r\n\r\n`)],
    ['obfuscated Transfer-Encoding', () => post(['Transfer-Encoding : chunked'], `7\r\n${json}\r\n0\r\n\r\n`)],
    ['lowercase method', () => head('get', path, ['Host: x'])],
    ['unknown method', () => head(rng.pick(['FOO', 'GETS', 'G\u00e9T', '', 'GET GET']), path, ['Host: x'])],
    ['CONNECT', () => head('CONNECT', '127.0.0.1:443', ['Host: 127.0.0.1:443'])],
    ['absolute-form target', () => head('GET', `http://evil.example${path}`, ['Host: x'])],
    ['asterisk target', () => head('OPTIONS', '*', ['Host: x'])],
    ['HTTP/2.0 request line', () => head('GET', path, ['Host: x'], '', 'HTTP/2.0')],
    ['HTTP/9.9 request line', () => head('GET', path, ['Host: x'], '', 'HTTP/9.9')],
    ['HTTP/1.0 without Host', () => head('GET', path, [], '', 'HTTP/1.0')],
    ['no version', () => Buffer.from(`GET ${path}\r\nHost: x\r\n\r\n`)],
    ['HTTP/1.1 without Host', () => head('GET', path, [])],
    ['two Host headers', () => head('GET', path, ['Host: a', 'Host: b'])],
    ['raw UTF-8 in the path', () => head('GET', `${path}/ü€😀`, ['Host: x'])],
    ['raw NUL in the path', () => head('GET', `${path}\u0000x`, ['Host: x'])],
    ['raw space in the path', () => head('GET', `${path} x`, ['Host: x'])],
    ['raw control characters in the path', () => head('GET', `${path}\u0001\u007f`, ['Host: x'])],
    ['path of 20,000 characters (over the header limit)', () => head('GET', `${path}${'a'.repeat(20_000)}`, ['Host: x'])],
    ['header line without a colon', () => head('GET', path, ['Host: x', 'NoColonHere'])],
    ['NUL in a header value', () => head('GET', path, ['Host: x', 'X-A: a\u0000b'])],
    ['invalid header name', () => head('GET', path, ['Host: x', rng.pick(['X Y: 1', '(x): 1', ': empty', 'X-\u00e9: 1'])])],
    ['obsolete line folding', () => head('GET', path, ['Host: x', 'X-A: a', ' folded'])],
    ['bare LF line endings', () => Buffer.from(`GET ${path} HTTP/1.1\nHost: x\nConnection: close\n\n`)],
    ['header of 20,000 bytes', () => head('GET', path, ['Host: x', `X-Big: ${'a'.repeat(20_000)}`])],
    ['2,100 headers', () => head('GET', path, ['Host: x', ...Array.from({ length: 2_100 }, (_, i) => `X-${i}: v`)])],
    ['raw UTF-8 in a header value', () => head('GET', path, ['Host: x', 'X-A: ü€😀'])],
    ['Expect: 100-continue', () => post(['Expect: 100-continue', `Content-Length: ${json.length}`])],
    ['unknown Expect', () => post(['Expect: 200-ok', `Content-Length: ${json.length}`])],
    [
      'Upgrade to websocket',
      () =>
        head('GET', path, [
          'Host: x',
          'Connection: Upgrade',
          'Upgrade: websocket',
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
          'Sec-WebSocket-Version: 13',
        ]),
    ],
    [
      'Upgrade to h2c',
      () =>
        head('GET', path, ['Host: x', 'Connection: Upgrade, HTTP2-Settings', 'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA']),
    ],
    ['HTTP/2 preface', () => Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')],
    ['TLS ClientHello', () => Buffer.from('16030100a5010000a10303', 'hex')],
    ['random bytes', () => rng.bytes(rng.int(1, 2_000))],
    ['request head cut short', () => Buffer.from(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Partial: `)],
    [
      'two pipelined requests',
      () => Buffer.concat([head('GET', path, ['Host: x']).subarray(0, -2), Buffer.from(`\r\nGET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`)]),
    ],
    ['body on GET', () => head('GET', path, ['Host: x', 'Content-Type: application/json', `Content-Length: ${json.length}`], json)],
  ];
  const [label, make] = rng.pick(cases);
  return { label, method: label === 'CONNECT' ? 'CONNECT' : 'GET', bytes: make(), incomplete: INCOMPLETE.has(label) };
}

// ---- the generator ----------------------------------------------------------------------------

/** Node's parser (llhttp) takes an origin-form target of printable ASCII, and header values without DEL. */
function parserAccepts(req: PlainRequest): boolean {
  if (!/^\/[\x21-\x7e]*$/.test(req.path)) return false;
  return Object.values(req.headers).every((v) => (Array.isArray(v) ? v : [v]).every((x) => !x.includes('\x7f')));
}

export function toRawBytes(req: PlainRequest): Buffer {
  const lines = [`${req.method} ${req.path} HTTP/1.1`, 'Host: 127.0.0.1'];
  for (const [name, value] of Object.entries(req.headers)) {
    if (name === 'host' || name === 'connection') continue;
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
  }
  if (req.body !== undefined && req.headers['content-length'] === undefined) lines.push(`content-length: ${req.body.length}`);
  lines.push('connection: close');
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), req.body ?? Buffer.alloc(0)]);
}

export interface Generator {
  next(): FuzzCase;
  /** Requests whose hashing was let through (capped by `hashBudget`). */
  readonly hashed: number;
}

export function requestGenerator(
  service: ServiceName,
  rng: Rng,
  ctx: FuzzContext,
  opts: { hashBudget: number; rawShare: number; clientIp: () => string },
): Generator {
  const routes = ROUTES[service];
  let hashed = 0;
  const weighted = routes.map((r) => [r.weight, r] as const);
  return {
    get hashed() {
      return hashed;
    },
    next(): FuzzCase {
      const route = rng.weighted(weighted);
      const path = mutatePath(rng, route.path(rng, ctx));
      if (rng.chance(opts.rawShare)) {
        const raw = rawCase(
          rng,
          path.replace(/[^\x21-\x7e]/g, (c) => encodeURIComponent(c)),
        );
        return { kind: 'raw', label: `raw: ${raw.label}`, method: raw.method, path, bytes: raw.bytes, incomplete: raw.incomplete };
      }
      const method = rng.chance(0.05) ? rng.pick(WEIRD_METHODS) : rng.pick(route.methods);
      const headers: Record<string, string | string[]> = { ...commonHeaders(rng, opts.clientIp), ...route.headers?.(rng, ctx) };
      const auth = authorization(rng, route.tokens?.(ctx) ?? []);
      if (auth !== undefined) headers.authorization = auth;
      let body: Buffer | undefined;
      let label = `${method} ${path.split('?')[0]!.slice(0, 48)}`;
      if (route.body && method !== 'GET' && method !== 'HEAD') {
        const made = makeBody(rng, route.body);
        if (made.object && route.body.costly?.(made.object, { method, path, headers })) {
          if (hashed < opts.hashBudget) hashed += 1;
          else {
            route.body.cheapen?.(made.object);
            made.payload = Buffer.from(JSON.stringify(made.object));
          }
        }
        body = made.payload;
        if (made.contentType !== undefined) headers['content-type'] = made.contentType;
        label += made.object ? ' (mutated body)' : ' (hostile body)';
      } else if (rng.chance(0.05)) {
        body = Buffer.from(JSON.stringify(hostileValue(rng)));
        headers['content-type'] = 'application/json';
      }
      // Always framed: without Content-Length, node:http sends a GET/HEAD/DELETE body unframed, and the
      // server rightly reads it as the next request (unframed and mis-framed bodies are raw cases).
      if (body !== undefined) headers['content-length'] = String(body.length);
      const req: PlainRequest = { method, path, headers, body };
      // What the server's HTTP parser refuses goes over a fresh raw connection: on a shared
      // keep-alive socket, the parser's refusal closes the connection under the next request.
      if (!parserAccepts(req)) return { kind: 'raw', label: `raw: ${label}`, method, path, bytes: toRawBytes(req) };
      return { kind: 'http', label, req };
    },
  };
}
