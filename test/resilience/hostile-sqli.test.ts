// SQL injection through every parameter of every service: JSON body fields, path segments, query
// strings, bearer tokens, and for the idp's REST API every filter column, operator and value,
// select, order, limit/offset, columns, body key, table name and profile header. Every answer must
// be a 4xx, or a 2xx that holds only the caller's own rows and stores the text exactly as given;
// never a 5xx. Afterwards every table still exists and the other user's rows are untouched.
// The mail routes (reset, verification, recovery, invitation, links, codes) take the payloads too,
// with a real SMTP server behind them so they run their real code rather than a 503.
// The apps run in this process at trace level; their log streams are checked for the credentials
// the test used.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { reportFigures } from './helpers/figures.js';
import { hmacToken } from './fuzz/jwt-forge.js';
import { startAccounts, type RunningAccounts, TEST_SECRET } from '../helpers/accounts.js';
import { type RunningIdp, startIdp } from '../helpers/idp.js';
import { type RunningNotes, startNotes } from '../helpers/notes.js';
import { startShortener, type RunningShortener, TEST_ADMIN_KEY } from '../helpers/shortener.js';
import { findLeaks } from './fuzz/secrets.js';
import { idpRequest, type JsonReply, request } from '../helpers/http.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';
import { startAll } from '../helpers/services.js';

export const SQL_PAYLOADS: readonly string[] = [
  "' OR '1'='1",
  "' OR 1=1--",
  '" OR ""="',
  "'; DROP TABLE users; --",
  "'; DROP TABLE links; --",
  "'; DROP TABLE public.notes; --",
  '); DROP TABLE auth.users; --',
  '"; DROP TABLE "notes"; --',
  '1; DELETE FROM notes',
  "' UNION SELECT id, email, password_hash FROM users--",
  "' UNION SELECT NULL, NULL, NULL--",
  "1' AND pg_sleep(3) IS NULL--",
  "'; SELECT pg_sleep(3); --",
  '1) OR (1=1',
  "admin'--",
  "' OR ''='",
  '%27%20OR%201%3D1',
  "\\'; DROP TABLE x; --",
  '$1',
  '$$; DROP TABLE notes; $$',
  "E'\\x27'",
  "'||(SELECT current_user)||'",
  '1 OR 1=1',
  '-1 UNION SELECT 1',
  "'/**/OR/**/1=1",
  "' AND 1=CAST((SELECT version()) AS int)--",
  "COPY (SELECT '') TO PROGRAM 'id'",
  "'; SET ROLE service_role; --",
  "'; RESET ROLE; SELECT set_config('request.jwt.claims', '{}', false); --",
  "\u0000' OR 1=1",
];

let shortener: RunningShortener;
let accounts: RunningAccounts;
let idp: RunningIdp;
let notes: RunningNotes;
let db: pg.Client;
let smtp: TestSmtp;

const PASSWORDS = { accounts: 'sqli-accounts-password', idp: 'sqli-idp-password-1' };
const people = {
  accounts: {} as Record<'alice' | 'admin', { id: string; token: string }>,
  idp: {} as Record<'alice' | 'bob', { id: string; token: string; refresh: string }>,
};
const bobNoteIds: number[] = [];
const tally = { requests: 0, statuses: {} as Record<string, number> };
const failures: string[] = [];

/** Records the answer; a 5xx (or anything else `extra` objects to) is a failure of this file. */
function judge(where: string, res: JsonReply, extra?: (res: JsonReply) => string | undefined): void {
  tally.requests += 1;
  tally.statuses[res.status] = (tally.statuses[res.status] ?? 0) + 1;
  const problem = res.status >= 500 ? `${res.status} ${res.text.slice(0, 200)}` : extra?.(res);
  if (problem) failures.push(`${where}: ${problem}`);
}

/** Fails the running test if it recorded failures since `from`. */
function assertNoFailuresSince(from: number): void {
  assert.deepEqual(failures.slice(from), []);
}

const is4xx = (res: JsonReply) =>
  res.status >= 400 && res.status < 500 ? undefined : `expected a 4xx, got ${res.status} ${res.text.slice(0, 160)}`;

before(async () => {
  const env = { LOG_LEVEL: 'trace' };
  smtp = await startSmtp();
  // TRUST_PROXY: each test client names itself in X-Forwarded-For, so the create limit counts per client.
  // The mail limit per client is lifted: every payload must reach the validators, not the 429.
  [shortener, accounts, idp] = await startAll([
    startShortener({ env: { ...env, TRUST_PROXY: '127.0.0.1', SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY }, listen: true }),
    startAccounts({ env: { ...env, SMTP_URL: smtp.url, MAIL_REQUESTS_MAX_PER_IP: '1000000' }, listen: true }),
    startIdp({ env: { ...env, SMTP_URL: smtp.url } }),
  ]);
  notes = await startNotes({ idp, env: env });
  db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();

  for (const name of ['alice', 'admin'] as const) {
    const email = `${name}-sqli@example.com`;
    const reg = await request(accounts.url, 'POST', '/auth/register', { body: { name, email, password: PASSWORDS.accounts } });
    assert.equal(reg.status, 201, reg.text);
    if (name === 'admin') await accounts.pool.query(`UPDATE users SET role = 'admin' WHERE id = $1`, [reg.body.data.id]);
    const login = await request(accounts.url, 'POST', '/auth/login', { body: { email, password: PASSWORDS.accounts } });
    people.accounts[name] = { id: reg.body.data.id, token: login.body.data.token };
  }
  for (const name of ['alice', 'bob'] as const) {
    const email = `${name}-sqli@example.com`;
    const created = await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
      apikey: idp.secretKey,
      body: { email, password: PASSWORDS.idp, email_confirm: true },
    });
    assert.equal(created.status, 200, created.text);
    const session = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email, password: PASSWORDS.idp } });
    people.idp[name] = { id: created.body.id, token: session.body.access_token, refresh: session.body.refresh_token };
  }
  for (const title of ['bob secret 1', 'bob secret 2']) {
    const note = await idpRequest(idp, 'POST', '/rest/v1/notes', {
      token: people.idp.bob.token,
      body: { title },
      headers: { prefer: 'return=representation' },
    });
    bobNoteIds.push(note.body[0].id);
  }
});

after(async () => {
  await db?.end();
  await notes?.close();
  await shortener?.close();
  await accounts?.close();
  await idp?.close();
  await smtp?.close();
});

const enc = encodeURIComponent;
/** A payload as text a URL path can carry (no lone surrogates; NUL percent-encoded). */
const inPath = (p: string) => enc(p);

describe('SQL injection', () => {
  test('shortener: url, code and stats parameters', async () => {
    const from = failures.length;
    let created = 0;
    for (const p of SQL_PAYLOADS) {
      // Inside a valid URL the payload is data: stored and returned exactly.
      const url = `https://example.com/${p}`;
      const client = { 'x-forwarded-for': `10.55.0.${created + 1}` };
      const res = await request(shortener.url, 'POST', '/api/links', { body: { url }, headers: client });
      judge(`create ${JSON.stringify(url)}`, res, (r) => {
        if (p.includes('\u0000')) return r.status === 400 ? undefined : `NUL must be refused, got ${r.status}`;
        // The URL rule refuses what would not go where it reads: a backslash before the query, tabs and line breaks.
        if (/[\t\n\r]/.test(p) || p.split(/[?#]/, 1)[0]!.includes('\\'))
          return r.status === 400 ? undefined : `expected the URL rule's 400, got ${r.status}`;
        return r.status === 201 ? undefined : `expected 201, got ${r.status} ${r.text}`;
      });
      if (res.status === 201) {
        created += 1;
        const stats = await request(shortener.url, 'GET', `/api/links/${res.body.data.code}`);
        judge('stats', stats, (r) => (r.body?.data?.original_url === url ? undefined : `stored differently: ${r.text}`));
      }
      judge(
        `create with the bare payload`,
        await request(shortener.url, 'POST', '/api/links', { body: { url: p }, headers: { 'x-forwarded-for': `10.56.0.${created + 1}` } }),
        (r) => (r.status === 400 ? undefined : `expected 400, got ${r.status}`),
      );
      judge(`redirect /${p}`, await request(shortener.url, 'GET', `/${inPath(p)}`), is4xx);
      judge(`stats /${p}`, await request(shortener.url, 'GET', `/api/links/${inPath(p)}`), is4xx);
    }
    const { rows } = await shortener.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
    assert.equal(rows[0]!.n, created, 'links were created or lost by injection');
    assertNoFailuresSince(from);
  });

  test('shortener: admin search, paging, PATCH fields, DELETE and QR parameters', async () => {
    const from = failures.length;
    const admin = { authorization: `Bearer ${TEST_ADMIN_KEY}` };
    const known = await request(shortener.url, 'POST', '/api/links', {
      body: { url: 'https://example.com/sqli-known' },
      headers: { 'x-forwarded-for': '10.57.0.1' },
    });
    assert.equal(known.status, 201, known.text);
    const code: string = known.body.data.code;
    const before = await shortener.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
    for (const p of SQL_PAYLOADS) {
      // A search is data: every link listed has the payload as its code or inside its URL.
      judge(`list ?q=${p}`, await request(shortener.url, 'GET', `/api/links?q=${enc(p)}&per_page=1000`, { headers: admin }), (r) => {
        if (p.includes('\u0000')) return r.status === 400 ? undefined : `NUL must be refused, got ${r.status}`;
        if (r.status !== 200) return `expected 200, got ${r.status} ${r.text.slice(0, 160)}`;
        const links = r.body.data as Array<{ code: string; original_url: string }>;
        const stray = links.find((l) => l.code !== p && !l.original_url.toLowerCase().includes(p.toLowerCase()));
        if (stray) return `listed a link that does not match: ${stray.original_url}`;
        return r.headers.get('x-total-count') === String(links.length)
          ? undefined
          : `X-Total-Count ${r.headers.get('x-total-count')} for ${links.length} links`;
      });
      judge(
        `list ?page=${p}`,
        await request(shortener.url, 'GET', `/api/links?page=${enc(p)}&per_page=${enc(p)}`, { headers: admin }),
        is4xx,
      );
      for (const field of ['expires_at', 'max_visits', 'disabled']) {
        judge(
          `PATCH ${field}=${p}`,
          await request(shortener.url, 'PATCH', `/api/links/${code}`, { body: { [field]: p }, headers: admin }),
          (r) => (r.status === 400 ? undefined : `expected 400, got ${r.status}`),
        );
      }
      judge(
        `PATCH /api/links/${p}`,
        await request(shortener.url, 'PATCH', `/api/links/${inPath(p)}`, { body: { disabled: true }, headers: admin }),
        is4xx,
      );
      judge(`DELETE /api/links/${p}`, await request(shortener.url, 'DELETE', `/api/links/${inPath(p)}`, { headers: admin }), is4xx);
      judge(`QR /api/links/${p}/qr`, await request(shortener.url, 'GET', `/api/links/${inPath(p)}/qr`), is4xx);
      judge(`QR ?format=${p}`, await request(shortener.url, 'GET', `/api/links/${code}/qr?format=${enc(p)}&size=${enc(p)}`), is4xx);
    }
    const after = await shortener.pool.query('SELECT count(*)::int AS n FROM links');
    assert.equal(after.rows[0].n, before.rows[0]!.n, 'links were deleted or created by injection');
    const row = await shortener.pool.query('SELECT expires_at, max_visits, disabled FROM links WHERE code = $1', [code]);
    assert.deepEqual(row.rows, [{ expires_at: null, max_visits: null, disabled: false }]);
    const tombstones = await shortener.pool.query('SELECT count(*)::int AS n FROM deleted_codes');
    assert.equal(tombstones.rows[0].n, 0);
    assertNoFailuresSince(from);
  });

  test('shortener: visits parameters, stats pages, and the User-Agent and Referer a visit is recorded from', async () => {
    const from = failures.length;
    const known = await request(shortener.url, 'POST', '/api/links', {
      body: { url: 'https://example.com/sqli-visits' },
      headers: { 'x-forwarded-for': '10.58.0.1' },
    });
    assert.equal(known.status, 201, known.text);
    const code: string = known.body.data.code;
    // Visit detail is its manager's: the link's own token, so the parameters behind the check are reached.
    const admin = { authorization: `Bearer ${known.body.data.manage_token}` };
    const linksBefore = await shortener.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
    let redirects = 0;
    for (const p of SQL_PAYLOADS) {
      for (const name of ['from', 'to', 'interval']) {
        judge(
          `visits ?${name}=${p}`,
          await request(shortener.url, 'GET', `/api/links/${code}/visits?${name}=${enc(p)}`, { headers: admin }),
          (r) =>
            r.status === 400 && String(r.body?.message).startsWith(`${name} must be`)
              ? undefined
              : `expected a 400 naming ${name}, got ${r.status} ${r.text.slice(0, 160)}`,
        );
      }
      judge(`visits of /${p}`, await request(shortener.url, 'GET', `/api/links/${inPath(p)}/visits`), is4xx);
      judge(`stats page /stats/${p}`, await request(shortener.url, 'GET', `/stats/${inPath(p)}`), is4xx);
      // The agent and the referrer are stored only as families and a host: a payload is data, or (unknown).
      if (/^[\x20-\x7e]*$/.test(p)) {
        for (const referer of [`https://example.com/${enc(p)}`, `https://${p}/`, p]) {
          judge(
            `redirect with User-Agent ${p}, Referer ${referer}`,
            await request(shortener.url, 'GET', `/${code}`, { headers: { 'user-agent': p, referer } }),
            (r) => (r.status === 302 ? undefined : `expected 302, got ${r.status} ${r.text.slice(0, 160)}`),
          );
          redirects += 1;
        }
      }
    }
    const linksAfter = await shortener.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
    assert.equal(linksAfter.rows[0]!.n, linksBefore.rows[0]!.n, 'links were deleted or created by injection');
    const counted = await shortener.pool.query<{ clicks: number; visits: number }>(
      'SELECT clicks, (SELECT coalesce(sum(visits), 0)::int FROM visit_counts WHERE code = $1) AS visits FROM links WHERE code = $1',
      [code],
    );
    assert.deepEqual(counted.rows[0], { clicks: redirects, visits: redirects }, 'every redirect counted once, with its visit');
    const referrers = await shortener.pool.query<{ referrer: string }>(
      'SELECT DISTINCT referrer FROM visit_counts WHERE code = $1 ORDER BY 1',
      [code],
    );
    // A host as the URL parser reads it (which may hold `$` or `'`), never a path, query or space.
    for (const { referrer } of referrers.rows) assert.match(referrer, /^[^/?#\s]+$/, `a referrer stored as more than a host: ${referrer}`);
    assert.ok(referrers.rows.some((r) => r.referrer === 'example.com'));
    assertNoFailuresSince(from);
  });

  test('accounts: name, email, password, admin query, path and token claims', async () => {
    const from = failures.length;
    const { alice, admin } = people.accounts;
    let n = 0;
    for (const p of SQL_PAYLOADS) {
      n += 1;
      // As a name, in a real registration (a cost-12 hash each, so a dozen of them): stored exactly.
      if (n <= 12 || p.includes('\u0000')) {
        const email = `sqli-name-${n}@example.com`;
        const reg = await request(accounts.url, 'POST', '/auth/register', { body: { name: p, email, password: PASSWORDS.accounts } });
        const valid = !/[\u0000-\u001f]/.test(p) && [...p.trim()].length >= 2 && [...p.trim()].length <= 60;
        judge(`register name ${JSON.stringify(p)}`, reg, (r) =>
          !valid
            ? is4xx(r)
            : r.status === 201 && r.body.data.name === p.trim() && r.body.data.role === 'user'
              ? undefined
              : `got ${r.status} ${r.text.slice(0, 160)}`,
        );
      }
      judge(
        `bearer ${JSON.stringify(p)}`,
        await request(accounts.url, 'GET', '/auth/me', { headers: { authorization: `Bearer ${enc(p)}` } }),
        is4xx,
      );
      // As an email and in the email of a login: refused as invalid, or a plain miss.
      judge(
        `register email ${JSON.stringify(p)}`,
        await request(accounts.url, 'POST', '/auth/register', { body: { name: 'Inject', email: p, password: 'short' } }),
        is4xx,
      );
      judge(
        `login email ${JSON.stringify(p)}`,
        await request(accounts.url, 'POST', '/auth/login', { body: { email: p, password: PASSWORDS.accounts } }),
        is4xx,
      );
      judge(
        `admin query ${JSON.stringify(p)}`,
        await request(accounts.url, 'GET', `/admin/users?page=${enc(p)}&per_page=${enc(p)}`, { token: admin.token }),
        is4xx,
      );
      judge(`path ${JSON.stringify(p)}`, await request(accounts.url, 'GET', `/auth/me/${inPath(p)}`, { token: alice.token }), is4xx);
      // In the claims of a correctly signed token: the id is never used unless it is a UUID.
      const now = Math.floor(Date.now() / 1000);
      const token = hmacToken('HS256', { typ: 'JWT' }, { id: p, role: 'admin', iat: now, exp: now + 60 }, TEST_SECRET);
      judge(`token id ${JSON.stringify(p)}`, await request(accounts.url, 'GET', '/auth/me', { token }), (r) =>
        r.status === 401 ? undefined : `expected 401, got ${r.status}`,
      );
    }
    // Emails that are valid addresses and still carry SQL: a real account, stored lowercased, exactly.
    for (const local of ["x'or'1'='1", "a'--", "robert'drop-table"] as const) {
      const email = `${local}@example.com`;
      const reg = await request(accounts.url, 'POST', '/auth/register', {
        body: { name: 'Valid Inject', email, password: PASSWORDS.accounts },
      });
      judge(`register valid-address ${email}`, reg, (r) =>
        r.status === 201 && r.body.data.email === email ? undefined : `got ${r.status} ${r.text}`,
      );
    }
    // Passwords never reach SQL, and a wrong one stays wrong: a few (each costs a bcrypt comparison).
    for (const p of SQL_PAYLOADS.slice(0, 4)) {
      judge(
        `login password ${JSON.stringify(p)}`,
        await request(accounts.url, 'POST', '/auth/login', { body: { email: 'alice-sqli@example.com', password: p.padEnd(8, ' ') } }),
        is4xx,
      );
    }
    const me = await request(accounts.url, 'GET', '/auth/me', { token: alice.token });
    judge('me after the attempts', me, (r) => (r.body?.data?.id === alice.id ? undefined : `not alice: ${r.text}`));
    const list = await request(accounts.url, 'GET', '/admin/users?per_page=1000', { token: admin.token });
    const admins = (list.body as Array<{ role: string; email: string }>).filter((u) => u.role === 'admin').map((u) => u.email);
    assert.deepEqual(admins, ['admin-sqli@example.com'], 'an injection changed a role');
    const { rows } = await accounts.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM users');
    assert.equal(rows[0]!.n, (list.body as unknown[]).length);
    assertNoFailuresSince(from);
  });

  test('accounts mail: reset and verification addresses and tokens', async () => {
    const from = failures.length;
    const { alice } = people.accounts;
    for (const p of SQL_PAYLOADS) {
      const where = JSON.stringify(p);
      judge(`reset email ${where}`, await request(accounts.url, 'POST', '/auth/password-reset', { body: { email: p } }), is4xx);
      judge(`resend email ${where}`, await request(accounts.url, 'POST', '/auth/verify-email/resend', { body: { email: p } }), is4xx);
      // A payload as the token is looked up as a hash of it: never found, always the same 400.
      judge(
        `reset token ${where}`,
        await request(accounts.url, 'POST', '/auth/password-reset/confirm', { body: { token: p, new_password: 'sqli-new-password' } }),
        is4xx,
      );
      judge(`verify token ${where}`, await request(accounts.url, 'POST', '/auth/verify-email', { body: { token: p } }), is4xx);
    }
    // Valid addresses that carry SQL: the same 202 as any address, and no account behind them gets mail.
    for (const email of ["x'or'1'='1@example.com", "alice-sqli@example.com'--@example.com", "a'--@example.com"]) {
      judge(`reset valid-address ${email}`, await request(accounts.url, 'POST', '/auth/password-reset', { body: { email } }), (r) =>
        r.status === 202 || r.status === 400 ? undefined : `got ${r.status} ${r.text}`,
      );
    }
    const me = await request(accounts.url, 'GET', '/auth/me', { token: alice.token });
    judge('me after the mail attempts', me, (r) =>
      r.status === 200 && r.body.data.id === alice.id ? undefined : `alice's session changed: ${r.status} ${r.text}`,
    );
    const { rows } = await accounts.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM email_tokens t JOIN users u ON u.id = t.user_id WHERE u.email NOT IN ($1, $2, $3)',
      ["x'or'1'='1@example.com", "a'--@example.com", "robert'drop-table@example.com"],
    );
    assert.equal(rows[0]!.n, 0, 'a payload issued a token for an account');
    assertNoFailuresSince(from);
  });

  test('notes: password reset address, new password (stored exactly) and recovery token', async () => {
    const from = failures.length;
    const email = 'carol-sqli@example.com';
    const created = await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
      apikey: idp.secretKey,
      body: { email, password: PASSWORDS.idp, email_confirm: true },
    });
    assert.equal(created.status, 200, created.text);
    const session = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email, password: PASSWORDS.idp } });
    const token = session.body.access_token as string;
    let n = 0;
    for (const p of SQL_PAYLOADS) {
      n += 1;
      const where = JSON.stringify(p);
      judge(`reset email ${where}`, await request(notes.url, 'POST', '/auth/password-reset', { body: { email: p } }), is4xx);
      judge(
        `password with token ${where}`,
        await request(notes.url, 'POST', '/auth/password', {
          headers: { authorization: `Bearer ${enc(p)}` },
          body: { password: 'sqli-new-password' },
        }),
        is4xx,
      );
      // As the new password (a hash each, so a few): refused, or stored exactly, so it signs in as given.
      if (n <= 6 || p.includes('\u0000')) {
        const set = await request(notes.url, 'POST', '/auth/password', { token, body: { password: p } });
        judge(`new password ${where}`, set, (r) =>
          r.status === 204 || (r.status >= 400 && r.status < 500) ? undefined : `got ${r.status} ${r.text.slice(0, 160)}`,
        );
        if (set.status === 204) {
          const login = await request(notes.url, 'POST', '/auth/login', { body: { email, password: p } });
          judge(`login with the new password ${where}`, login, (r) =>
            r.status === 200 ? undefined : `the password was not stored as given: ${r.status} ${r.text.slice(0, 160)}`,
          );
        }
      }
    }
    // The idp's user count is checked by a later test: carol goes again.
    const removed = await idpRequest(idp, 'DELETE', `/auth/v1/admin/users/${created.body.id}`, {
      apikey: idp.secretKey,
      body: { should_soft_delete: false },
    });
    assert.equal(removed.status, 200, removed.text);
    assertNoFailuresSince(from);
  });

  test('idp mail: recover, resend, verify (body and link), invite, generate_link and the address change', async () => {
    const from = failures.length;
    const { alice } = people.idp;
    const { rows: before } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM auth.users');
    const secret = { apikey: idp.secretKey };
    for (const p of SQL_PAYLOADS) {
      const where = JSON.stringify(p);
      judge(`recover email ${where}`, await idpRequest(idp, 'POST', '/auth/v1/recover', { body: { email: p } }), is4xx);
      judge(`resend email ${where}`, await idpRequest(idp, 'POST', '/auth/v1/resend', { body: { type: 'signup', email: p } }), is4xx);
      judge(
        `resend type ${where}`,
        await idpRequest(idp, 'POST', '/auth/v1/resend', { body: { type: p, email: 'alice-sqli@example.com' } }),
        is4xx,
      );
      judge(
        `verify token_hash ${where}`,
        await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 'recovery', token_hash: p } }),
        is4xx,
      );
      judge(
        `verify code ${where}`,
        await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 'recovery', email: 'alice-sqli@example.com', token: p } }),
        is4xx,
      );
      judge(
        `verify email ${where}`,
        await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 'recovery', email: p, token: '123456' } }),
        is4xx,
      );
      judge(
        `verify type ${where}`,
        await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: p, token_hash: 'a'.repeat(56) } }),
        is4xx,
      );
      // The mailed link: a refusal is a 303 carrying the error in the fragment (or a 400 for a malformed link).
      const link = await fetch(`${idp.url}/auth/v1/verify?token=${enc(p)}&type=recovery`, { redirect: 'manual' });
      const location = link.headers.get('location') ?? '';
      await link.arrayBuffer();
      judge(`link token ${where}`, { status: link.status, text: location, body: undefined } as JsonReply, () =>
        (link.status === 303 && location.includes('error=access_denied')) || link.status === 400
          ? undefined
          : `got ${link.status} ${location}`,
      );
      judge(`invite email ${where}`, await idpRequest(idp, 'POST', '/auth/v1/invite', { ...secret, body: { email: p } }), is4xx);
      judge(
        `generate_link email ${where}`,
        await idpRequest(idp, 'POST', '/auth/v1/admin/generate_link', { ...secret, body: { type: 'magiclink', email: p } }),
        is4xx,
      );
      judge(
        `generate_link type ${where}`,
        await idpRequest(idp, 'POST', '/auth/v1/admin/generate_link', { ...secret, body: { type: p, email: 'alice-sqli@example.com' } }),
        is4xx,
      );
      judge(`address change ${where}`, await idpRequest(idp, 'PUT', '/auth/v1/user', { token: alice.token, body: { email: p } }), is4xx);
    }
    const user = await idpRequest(idp, 'GET', '/auth/v1/user', { token: alice.token });
    judge('alice after the mail attempts', user, (r) =>
      r.status === 200 && r.body.email === 'alice-sqli@example.com' ? undefined : `alice changed: ${r.status} ${r.text.slice(0, 160)}`,
    );
    const { rows: afterwards } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM auth.users');
    assert.equal(afterwards[0]!.n, before[0]!.n, 'a payload created a user');
    assertNoFailuresSince(from);
  });

  test('notes: title, body, search, edits, note id, credentials, refresh token and bearer token', async () => {
    const from = failures.length;
    const token = people.idp.alice.token;
    for (const p of SQL_PAYLOADS) {
      const created = await request(notes.url, 'POST', '/notes', { token, body: { title: p, body: p } });
      judge(`create ${JSON.stringify(p)}`, created, (r) => {
        if (p.includes('\u0000')) return is4xx(r);
        return r.status === 201 && r.body.title === p && r.body.body === p && r.body.user_id === people.idp.alice.id
          ? undefined
          : `got ${r.status} ${r.text.slice(0, 160)}`;
      });
      judge(`delete ${JSON.stringify(p)}`, await request(notes.url, 'DELETE', `/notes/${inPath(p)}`, { token }), is4xx);
      judge(
        `register ${JSON.stringify(p)}`,
        await request(notes.url, 'POST', '/auth/register', { body: { email: p, password: p } }),
        is4xx,
      );
      judge(`login ${JSON.stringify(p)}`, await request(notes.url, 'POST', '/auth/login', { body: { email: p, password: p } }), is4xx);
      judge(
        `token ${JSON.stringify(p)}`,
        await request(notes.url, 'GET', '/notes', { headers: { authorization: `Bearer ${enc(p)}` } }),
        is4xx,
      );
      // The search text goes into a PostgREST or=() tree: it may find notes, never another user's.
      judge(`search ${JSON.stringify(p)}`, await request(notes.url, 'GET', `/notes?q=${enc(p)}&limit=100`, { token }), (r) => {
        if (r.status === 400) return undefined;
        if (r.status !== 200) return `got ${r.status} ${r.text.slice(0, 160)}`;
        return (r.body as Array<{ user_id: string }>).every((n) => n.user_id === people.idp.alice.id)
          ? undefined
          : "another user's note in a search";
      });
      if (created.status === 201) {
        judge(
          `edit ${JSON.stringify(p)}`,
          await request(notes.url, 'PATCH', `/notes/${created.body.id}`, { token, body: { body: `${p}!` } }),
          (r) =>
            r.status === 200 && r.body.body === `${p}!` && r.body.user_id === people.idp.alice.id
              ? undefined
              : `got ${r.status} ${r.text.slice(0, 160)}`,
        );
      }
      judge(
        `edit id ${JSON.stringify(p)}`,
        await request(notes.url, 'PATCH', `/notes/${inPath(p)}`, { token, body: { title: 'x' } }),
        is4xx,
      );
      judge(`refresh ${JSON.stringify(p)}`, await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: p } }), is4xx);
    }
    const list = await request(notes.url, 'GET', '/notes', { token });
    judge('list', list, (r) =>
      (r.body as Array<{ user_id: string }>).every((n) => n.user_id === people.idp.alice.id)
        ? undefined
        : "another user's note in the list",
    );
    assertNoFailuresSince(from);
  });

  test('idp auth: email, password, refresh token, metadata keys, admin user id, bearer token', async () => {
    const from = failures.length;
    let n = 0;
    let signups = 0;
    for (const p of SQL_PAYLOADS) {
      n += 1;
      judge(
        `signup email ${JSON.stringify(p)}`,
        await idpRequest(idp, 'POST', '/auth/v1/signup', { body: { email: p, password: 'password-123' } }),
        is4xx,
      );
      judge(
        `login email ${JSON.stringify(p)}`,
        await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email: p, password: p } }),
        is4xx,
      );
      judge(
        `refresh ${JSON.stringify(p)}`,
        await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=refresh_token', { body: { refresh_token: p } }),
        is4xx,
      );
      judge(
        `admin delete ${JSON.stringify(p)}`,
        await idpRequest(idp, 'DELETE', `/auth/v1/admin/users/${inPath(p)}`, { apikey: idp.secretKey, body: {} }),
        is4xx,
      );
      judge(
        `user with token ${JSON.stringify(p)}`,
        await idpRequest(idp, 'GET', '/auth/v1/user', { headers: { authorization: `Bearer ${enc(p)}` } }),
        is4xx,
      );
      // As data: a real user whose metadata key and value are the payload, stored as given.
      const signup = await idpRequest(idp, 'POST', '/auth/v1/signup', {
        body: { email: `sqli-${n}@example.com`, password: p.padEnd(8, '!'), data: { [p]: p } },
      });
      judge(`signup data ${JSON.stringify(p)}`, signup, (r) => {
        if (p.includes('\u0000')) return is4xx(r);
        return r.status === 200 && r.body.user.user_metadata[p] === p ? undefined : `got ${r.status} ${r.text.slice(0, 160)}`;
      });
      if (signup.status === 200) signups += 1;
    }
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM auth.users');
    assert.equal(rows[0]!.n, 2 + signups, 'users were created or removed by injection');
    assertNoFailuresSince(from);
  });

  test('idp REST: every filter, operator, value, select, order, limit, columns, body key, table and profile', async () => {
    const from = failures.length;
    const alice = people.idp.alice;
    const aliceIds = new Set<number>();
    const mine = (r: JsonReply): string | undefined => {
      if (r.status >= 400) return undefined;
      const rows = r.body === undefined ? [] : Array.isArray(r.body) ? r.body : [r.body];
      for (const row of rows as Array<Record<string, unknown>>) {
        if (row.user_id !== undefined && row.user_id !== alice.id) return `another user's row: ${JSON.stringify(row)}`;
        if (typeof row.id === 'number' && bobNoteIds.includes(row.id)) return `bob's note: ${JSON.stringify(row)}`;
      }
      return undefined;
    };
    const rest = (method: string, path: string, opts: { body?: unknown; headers?: Record<string, string>; token?: string | null } = {}) =>
      idpRequest(idp, method, `/rest/v1/${path}`, {
        token: opts.token === null ? undefined : (opts.token ?? alice.token),
        body: opts.body,
        headers: { prefer: 'return=representation', ...opts.headers },
      });

    for (const p of SQL_PAYLOADS) {
      const e = enc(p);
      const where = JSON.stringify(p);
      // Values are bound parameters: stored and matched as text.
      const inserted = await rest('POST', 'notes', { body: { title: p } });
      judge(`insert title ${where}`, inserted, (r) =>
        p.includes('\u0000') ? is4xx(r) : r.status === 201 && r.body[0].title === p ? undefined : `got ${r.status} ${r.text.slice(0, 160)}`,
      );
      if (inserted.status === 201) aliceIds.add(inserted.body[0].id);
      judge(`filter value ${where}`, await rest('GET', `notes?title=eq.${e}`), mine);
      judge(`in-list ${where}`, await rest('GET', `notes?title=in.(${e})`), mine);
      judge(`like-ish value ${where}`, await rest('GET', `notes?title=neq.${e}&select=id,title,user_id`), mine);
      judge(`id value ${where}`, await rest('GET', `notes?id=eq.${e}`), is4xx);
      judge(`is value ${where}`, await rest('GET', `notes?title=is.${e}`), is4xx);
      judge(`operator ${where}`, await rest('GET', `notes?title=${e}`), is4xx);
      judge(`negated operator ${where}`, await rest('GET', `notes?title=not.${e}`), is4xx);
      // Names only ever come from the catalog.
      judge(`filter column ${where}`, await rest('GET', `notes?${e}=eq.1`), is4xx);
      judge(`select ${where}`, await rest('GET', `notes?select=${e}`), is4xx);
      judge(`select list ${where}`, await rest('GET', `notes?select=id,${e}`), is4xx);
      judge(`order ${where}`, await rest('GET', `notes?order=${e}`), is4xx);
      judge(`order direction ${where}`, await rest('GET', `notes?order=id.${e}`), is4xx);
      judge(`limit ${where}`, await rest('GET', `notes?limit=${e}`), is4xx);
      judge(`offset ${where}`, await rest('GET', `notes?offset=${e}`), is4xx);
      judge(`columns ${where}`, await rest('POST', `notes?columns=${e}`, { body: { title: 'x' } }), is4xx);
      judge(`body key ${where}`, await rest('POST', 'notes', { body: { title: 'x', [p]: 1 } }), is4xx);
      judge(`table ${where}`, await rest('GET', `${inPath(p)}`), is4xx);
      judge(`table suffix ${where}`, await rest('GET', `notes${inPath(p)}`), is4xx);
      judge(
        `accept-profile ${where}`,
        await rest('GET', 'notes', { headers: { 'accept-profile': p.replace(/[\u0000-\u001f]/g, '') } }),
        is4xx,
      );
      judge(
        `content-profile ${where}`,
        await rest('POST', 'notes', { body: { title: 'x' }, headers: { 'content-profile': p.replace(/[\u0000-\u001f]/g, '') } }),
        is4xx,
      );
      judge(`prefer ${where}`, await rest('GET', 'notes', { headers: { prefer: p.replace(/[\u0000-\u001f]/g, '') } }), mine);
      // Pattern and logic-tree values are bound parameters too; a tree the payload breaks is a 400.
      judge(`ilike value ${where}`, await rest('GET', `notes?title=ilike.${e}`), mine);
      judge(`or value ${where}`, await rest('GET', `notes?or=(title.eq.${e},body.ilike.${e})`), (r) =>
        r.status === 400 ? undefined : mine(r),
      );
      judge(`or quoted value ${where}`, await rest('GET', `notes?or=(title.eq.${enc(`"${p.replace(/["\\]/g, (c) => `\\${c}`)}"`)})`), mine);
      judge(`or column ${where}`, await rest('GET', `notes?or=(${e}.eq.1)`), is4xx);
      // Writes aimed at bob's rows: RLS skips them; an update never hands a row to someone else.
      judge(
        `update bob's note ${where}`,
        await rest('PATCH', `notes?id=in.(${bobNoteIds.join(',')})`, { body: { title: p.replace(/\u0000/g, '') } }),
        mine,
      );
      judge(
        `update with a payload filter ${where}`,
        await rest('PATCH', `notes?title=eq.${e}`, { body: { user_id: people.idp.bob.id } }),
        (r) => (r.status >= 400 || (Array.isArray(r.body) && r.body.length === 0) ? undefined : `a note changed owner: ${r.text}`),
      );
      judge(`delete with a payload filter ${where}`, await rest('DELETE', `notes?title=eq.${e}`), mine);
      judge(`delete with a payload id ${where}`, await rest('DELETE', `notes?id=eq.${e}`), is4xx);
      // Without a user token the anon role has no grant at all.
      judge(`anon ${where}`, await rest('GET', `notes?title=eq.${e}`, { token: null }), is4xx);
    }
    // The other user's notes are exactly as they were, and every table is still there.
    const bob = await idpRequest(idp, 'GET', '/rest/v1/notes?select=id,title&order=id', { token: people.idp.bob.token });
    assert.deepEqual(
      bob.body,
      bobNoteIds.map((id, i) => ({ id, title: `bob secret ${i + 1}` })),
    );
    const { rows } = await db.query<{ name: string; present: boolean }>(
      `SELECT name, to_regclass(name) IS NOT NULL AS present FROM unnest($1::text[]) AS name`,
      [['public.notes', 'auth.users', 'auth.sessions', 'auth.refresh_tokens', 'auth.identities']],
    );
    assert.deepEqual(
      rows.filter((r) => !r.present),
      [],
      'a table is gone',
    );
    assert.ok(aliceIds.size > 0);
    assertNoFailuresSince(from);
  });

  test("every table intact, and no credential in the apps' trace logs", async (t) => {
    reportFigures(t, 'SQL injection through every parameter', {
      payloads: SQL_PAYLOADS.length,
      requests: tally.requests,
      statuses: tally.statuses,
      failures: failures.length,
    });
    for (const [pool, tables] of [
      [shortener.pool, ['links', 'deleted_codes']],
      [accounts.pool, ['users']],
    ] as const) {
      const { rows } = await pool.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', [tables[0]]);
      assert.equal(rows[0]!.present, true, `${tables[0]} is gone`);
    }
    const secrets = [
      { label: 'JWT_SECRET', value: TEST_SECRET },
      { label: 'SHORTENER_ADMIN_KEY', value: TEST_ADMIN_KEY },
      { label: 'accounts password', value: PASSWORDS.accounts },
      { label: 'idp password', value: PASSWORDS.idp },
      { label: 'idp secret key', value: idp.secretKey },
      { label: 'idp publishable key', value: idp.publishableKey },
      ...Object.entries(people.accounts).map(([name, p]) => ({ label: `${name}'s accounts token`, value: p.token })),
      ...Object.entries(people.idp).flatMap(([name, p]) => [
        { label: `${name}'s access token`, value: p.token },
        { label: `${name}'s refresh token`, value: p.refresh },
      ]),
    ];
    const leaks = [shortener, accounts, idp, notes].flatMap((app, i) =>
      findLeaks(app.logs.text(), secrets).map((l) => `${['shortener', 'accounts', 'idp', 'notes'][i]}: ${l}`),
    );
    assert.deepEqual(leaks, []);
  });
});
