import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { PasswordHasher } from '../src/kit/password-hasher.js';
import { connectRedis } from '../src/kit/redis.js';
import { LINK_PASSWORD_LIMITS } from '../src/shortener/link-passwords.js';
import { uniqueIp } from './helpers/client-ips.js';
import { waitReady, withoutRedis } from './helpers/redis.js';
import {
  assertEnvelope,
  clicksOf,
  countLinks,
  startShortener,
  TEST_ADMIN_AUTH,
  TEST_ADMIN_KEY,
  sharedShortener,
} from './helpers/shortener.js';
import { TEST_BCRYPT_COST } from './helpers/passwords.js';

// Links with a password: set on create and by PATCH, stored as a bcrypt hash, never shown; the
// redirect asks for it (a page for a browser, 403 JSON for an API client) and counts the click
// only when a right one is POSTed; guesses are limited before any is checked.

/** The service's hasher, so a test can tell how many passwords were actually checked. */
const hasher = new PasswordHasher({ cost: TEST_BCRYPT_COST, maxQueued: 1000 });

const DEST = 'https://example.com/secret/page';
const PASSWORD = 'open sesame';
const BROWSER = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
const CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';

const ctx = sharedShortener({ env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY }, deps: { passwordHasher: hasher } });
after(() => hasher.close());

async function createProtected(password = PASSWORD, extra: object = {}): Promise<{ code: string; token: string }> {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/api/links',
    payload: { url: DEST, password, ...extra },
    remoteAddress: uniqueIp(),
  });
  assert.equal(res.statusCode, 201, res.body);
  const data = (res.json() as { data: { code: string; manage_token: string; password_protected: boolean } }).data;
  assert.equal(data.password_protected, true);
  return { code: data.code, token: data.manage_token };
}

const visitsOf = async (code: string) =>
  Number((await ctx.pool.query('SELECT coalesce(sum(visits), 0) AS n FROM visit_counts WHERE code = $1', [code])).rows[0].n);

function unlock(code: string, body: string | object, headers: Record<string, string> = {}, ip = uniqueIp()) {
  return typeof body === 'string'
    ? ctx.app.inject({
        method: 'POST',
        url: `/${code}`,
        payload: body,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        remoteAddress: ip,
      })
    : ctx.app.inject({ method: 'POST', url: `/${code}`, payload: body, headers, remoteAddress: ip });
}

const form = (password: string) => new URLSearchParams({ password }).toString();

describe('password-protected links: setting the password', () => {
  it('an anonymous create may set one; only a bcrypt hash is stored and no answer holds it', async () => {
    const { code } = await createProtected();
    const { rows } = await ctx.pool.query('SELECT password_hash FROM links WHERE code = $1', [code]);
    assert.match(rows[0].password_hash, /^\$2[aby]\$/);
    assert.ok(!rows[0].password_hash.includes(PASSWORD));
    for (const url of [`/api/links/${code}`, '/api/links?per_page=1000', `/api/links/export?format=json`]) {
      const res = await ctx.app.inject({ method: 'GET', url, headers: TEST_ADMIN_AUTH });
      assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
      assert.ok(!res.body.includes('$2'), `${url} shows a hash`);
      assert.ok(!res.body.includes(PASSWORD), `${url} shows the password`);
      assert.ok(!res.body.includes('password_hash'), url);
    }
  });

  it('a malformed password is a 400 naming the field, and creates nothing', async () => {
    const before = await countLinks(ctx.pool);
    for (const [password, message] of [
      ['', 'body/password must be a text of 1 to 72 bytes (UTF-8)'],
      ['é'.repeat(37), 'body/password must be a text of 1 to 72 bytes (UTF-8)'],
      ['a\u0000b', 'body/password must be a text of 1 to 72 bytes (UTF-8)'],
      [42, 'body/password must be string'],
    ] as const) {
      const res = await ctx.app.inject({ method: 'POST', url: '/api/links', payload: { url: DEST, password }, remoteAddress: uniqueIp() });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(assertEnvelope(res.json(), 400, 'Bad Request'), message);
    }
    assert.equal(await countLinks(ctx.pool), before);
    // 72 bytes is the most bcrypt reads whole.
    await createProtected('x'.repeat(72));
  });

  it('PATCH sets, changes and removes it (null); a refused PATCH changes nothing', async () => {
    const res = await ctx.app.inject({ method: 'POST', url: '/api/links', payload: { url: DEST }, remoteAddress: uniqueIp() });
    const { code, manage_token: token } = (res.json() as { data: { code: string; manage_token: string } }).data;
    assert.equal((res.json() as { data: { password_protected?: boolean } }).data.password_protected, undefined);
    const patch = (payload: object) =>
      ctx.app.inject({ method: 'PATCH', url: `/api/links/${code}`, payload, headers: { authorization: `Bearer ${token}` } });

    const set = await patch({ password: 'first' });
    assert.equal(set.statusCode, 200, set.body);
    assert.equal((set.json() as { data: { password_protected: boolean } }).data.password_protected, true);
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode, 403);

    const refused = await patch({ password: '', title: 'never stored' });
    assert.equal(refused.statusCode, 400);
    assert.equal(assertEnvelope(refused.json(), 400, 'Bad Request'), 'body/password must be a text of 1 to 72 bytes (UTF-8)');
    const { rows } = await ctx.pool.query('SELECT title, password_hash FROM links WHERE code = $1', [code]);
    assert.equal(rows[0].title, null);

    assert.equal((await patch({ password: 'second' })).statusCode, 200);
    assert.equal((await unlock(code, form('first'))).statusCode, 403, 'the old password is gone');
    assert.equal((await unlock(code, form('second'))).statusCode, 302);

    const removed = await patch({ password: null });
    assert.equal((removed.json() as { data: { password_protected: boolean } }).data.password_protected, false);
    const open = await ctx.app.inject({ method: 'GET', url: `/${code}` });
    assert.equal(open.statusCode, 302);
    assert.equal(open.headers.location, DEST);
  });

  it('a bulk item with a password is refused on its own; the other items are created', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/api/links/bulk',
      payload: [{ url: DEST, password: PASSWORD }, { url: `${DEST}/2` }],
      headers: TEST_ADMIN_AUTH,
    });
    assert.equal(res.statusCode, 200, res.body);
    const { results } = (res.json() as { data: { results: Array<{ status: number; message: string }> } }).data;
    assert.equal(results[0]!.status, 400);
    assert.match(results[0]!.message, /^body\/password is not taken by the bulk create/);
    assert.equal(results[1]!.status, 201);
  });
});

describe('password-protected links: the redirect', () => {
  it('an API client gets 403 password_required, no destination, nothing counted', async () => {
    const { code } = await createProtected();
    const res = await ctx.app.inject({ method: 'GET', url: `/${code}`, headers: { 'user-agent': CHROME } });
    assert.equal(res.statusCode, 403);
    assert.equal(res.headers.location, undefined);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.deepEqual(res.json(), {
      status: 403,
      response: 'Forbidden',
      message: 'This link is protected by a password: POST it to this URL as the field "password" (a form or JSON)',
      error: 'password_required',
    });
    assert.ok(!res.body.includes('example.com'));
    assert.equal(await clicksOf(ctx.pool, code), 0);
    assert.equal(await visitsOf(code), 0);
  });

  it('a browser gets the password form (403), under a policy that lets the answer redirect anywhere', async () => {
    const { code } = await createProtected();
    const res = await ctx.app.inject({ method: 'GET', url: `/${code}`, headers: { ...BROWSER, 'user-agent': CHROME } });
    assert.equal(res.statusCode, 403);
    assert.match(String(res.headers['content-type']), /^text\/html/);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.match(res.body, new RegExp(`<form class="card" method="post" action="${code}">`));
    assert.match(res.body, /<input id="password" name="password" type="password" required/);
    assert.ok(!res.body.includes('example.com'));
    const csp = String(res.headers['content-security-policy']);
    assert.match(csp, /default-src 'self'/);
    assert.ok(!csp.includes('form-action'), csp);
    assert.equal(await clicksOf(ctx.pool, code), 0);
  });

  it('HEAD, link previews and bots neither count nor get through', async () => {
    const { code } = await createProtected();
    for (const agent of [CHROME, 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)', 'Googlebot/2.1', '']) {
      for (const method of ['GET', 'HEAD'] as const) {
        const res = await ctx.app.inject({ method, url: `/${code}`, headers: agent ? { 'user-agent': agent } : {} });
        assert.equal(res.statusCode, 403, `${method} ${agent}`);
        assert.equal(res.headers.location, undefined);
      }
    }
    assert.equal(await clicksOf(ctx.pool, code), 0);
    assert.equal(await visitsOf(code), 0);
  });

  it('a wrong password is 403 password_incorrect (the form again for a browser) and counts nothing', async () => {
    const { code } = await createProtected();
    const json = await unlock(code, { password: 'wrong' });
    assert.equal(json.statusCode, 403);
    assert.deepEqual(json.json(), {
      status: 403,
      response: 'Forbidden',
      message: 'The password is not right',
      error: 'password_incorrect',
    });
    const page = await unlock(code, form('wrong'), BROWSER);
    assert.equal(page.statusCode, 403);
    assert.match(page.body, /<span id="password-error" class="field-error" role="alert">That password is not right/);
    assert.match(page.body, /aria-describedby="password-error" aria-invalid="true"/);
    assert.equal(await clicksOf(ctx.pool, code), 0);
    assert.equal(await visitsOf(code), 0);
  });

  it('the right password (form or JSON) answers the 302 and counts the click and its visit exactly once', async () => {
    const { code } = await createProtected();
    const viaForm = await unlock(code, form(PASSWORD), { ...BROWSER, 'user-agent': CHROME, 'sec-fetch-site': 'same-origin' });
    assert.equal(viaForm.statusCode, 302, viaForm.body);
    assert.equal(viaForm.headers.location, DEST);
    assert.equal(viaForm.headers['cache-control'], 'no-store');
    assert.equal(await clicksOf(ctx.pool, code), 1);
    assert.equal(await visitsOf(code), 1);
    const viaJson = await unlock(code, { password: PASSWORD });
    assert.equal(viaJson.statusCode, 302);
    assert.equal(await clicksOf(ctx.pool, code), 2);
    assert.equal(await visitsOf(code), 2);
    // Each visit asks again: nothing remembers the unlock.
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode, 403);
    assert.equal(await clicksOf(ctx.pool, code), 2);
  });

  it('the visit records where the visitor came from before the password page, carried by the form', async () => {
    const { code } = await createProtected();
    const page = await ctx.app.inject({
      method: 'GET',
      url: `/${code}`,
      headers: { ...BROWSER, referer: 'https://News.Example:8443/post?id=1' },
    });
    assert.match(page.body, /<input type="hidden" name="from" value="news.example">/);
    const direct = await ctx.app.inject({ method: 'GET', url: `/${code}`, headers: BROWSER });
    assert.match(direct.body, /<input type="hidden" name="from" value="">/);
    // The form's own Referer is the password page: what it carries counts instead.
    const selfReferer = { ...BROWSER, referer: `https://sho.rt/${code}` };
    assert.equal((await unlock(code, `password=${encodeURIComponent(PASSWORD)}&from=news.example`, selfReferer)).statusCode, 302);
    assert.equal((await unlock(code, `password=${encodeURIComponent(PASSWORD)}&from=`, selfReferer)).statusCode, 302);
    assert.equal((await unlock(code, `password=${encodeURIComponent(PASSWORD)}&from=%3Cscript%3E`, selfReferer)).statusCode, 302);
    // A wrong password keeps what the form carried for the next try.
    const wrong = await unlock(code, 'password=nope&from=news.example', BROWSER);
    assert.match(wrong.body, /name="from" value="news.example"/);
    const { rows } = await ctx.pool.query(
      'SELECT referrer, sum(visits)::int AS n FROM visit_counts WHERE code = $1 GROUP BY referrer ORDER BY referrer',
      [code],
    );
    assert.deepEqual(rows, [
      { referrer: '(direct)', n: 2 },
      { referrer: 'news.example', n: 1 },
    ]);
  });

  it('20 concurrent right passwords count exactly 20 clicks; with max_visits 5, exactly 5 get through', async () => {
    const { code } = await createProtected();
    const statuses = await Promise.all(Array.from({ length: 20 }, () => unlock(code, { password: PASSWORD }).then((r) => r.statusCode)));
    assert.deepEqual([...new Set(statuses)], [302]);
    assert.equal(await clicksOf(ctx.pool, code), 20);
    assert.equal(await visitsOf(code), 20);

    const capped = await createProtected(PASSWORD, { max_visits: 5 });
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => unlock(capped.code, { password: PASSWORD }).then((r) => r.statusCode)),
    );
    assert.equal(answers.filter((s) => s === 302).length, 5);
    assert.equal(answers.filter((s) => s === 410).length, 7);
    assert.equal(await clicksOf(ctx.pool, capped.code), 5);
  });

  it('a dead link says it is dead (410) whether or not it has a password', async () => {
    const { code } = await createProtected();
    await ctx.pool.query('UPDATE links SET disabled = true WHERE code = $1', [code]);
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/${code}` })).statusCode, 410);
    assert.equal((await ctx.app.inject({ method: 'HEAD', url: `/${code}` })).statusCode, 410);
    const started = hasher.started.verify;
    assert.equal((await unlock(code, { password: PASSWORD })).statusCode, 410);
    assert.equal(hasher.started.verify, started, 'no password checked for a dead link');
  });

  it('POST on an unknown, malformed or open code is a 404 (a browser is sent to an open link); a protected one needs a password', async () => {
    assert.equal((await unlock('zzzzzzz', { password: 'x' })).statusCode, 404);
    assert.equal((await unlock('a.b', { password: 'x' })).statusCode, 404);
    const made = await ctx.app.inject({ method: 'POST', url: '/api/links', payload: { url: DEST }, remoteAddress: uniqueIp() });
    const open = (made.json() as { data: { code: string } }).data.code;
    assert.equal((await unlock(open, { password: 'x' })).statusCode, 404);
    const browser = await unlock(open, form('x'), BROWSER);
    assert.equal(browser.statusCode, 303);
    assert.equal(browser.headers.location, open);
    assert.equal(await clicksOf(ctx.pool, open), 0);
    const { code } = await createProtected();
    const empty = await unlock(code, form(''));
    assert.equal(empty.statusCode, 400);
    assertEnvelope(empty.json(), 400, 'Bad Request');
    assert.equal((await unlock(code, {})).statusCode, 400);
    assert.equal((await unlock(code, 'password=a&password=b')).statusCode, 400);
  });

  it('a form sent from another site is refused before its body is read or any password checked', async () => {
    const { code } = await createProtected();
    const started = hasher.started.verify;
    const foreign: Array<Record<string, string>> = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: 'https://evil.example' },
      // A sandboxed frame's or an opaque origin.
      { origin: 'null' },
    ];
    for (const headers of foreign) {
      const res = await unlock(code, form(PASSWORD), headers);
      assert.equal(res.statusCode, 403, JSON.stringify(headers));
      assert.equal(assertEnvelope(res.json(), 403, 'Forbidden'), 'A link password is only taken from a page of this service');
    }
    assert.equal(hasher.started.verify, started);
    assert.equal(await clicksOf(ctx.pool, code), 0);
    // The service's own origin (BASE_URL) is welcome.
    assert.equal((await unlock(code, form(PASSWORD), { origin: 'https://sho.rt', 'sec-fetch-site': 'same-origin' })).statusCode, 302);
  });

  it("the public stats keep the contract's fields but leave out a protected link's destination", async () => {
    const { code, token } = await createProtected();
    await unlock(code, { password: PASSWORD });
    const res = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}` });
    assert.equal(res.statusCode, 200);
    const data = (res.json() as { data: Record<string, unknown> }).data;
    assert.equal(data.original_url, undefined);
    assert.equal(data.password_protected, true);
    assert.equal(data.code, code);
    assert.equal(data.clicks, 1);
    assert.equal(typeof data.createdAt, 'string');
    assert.ok(!res.body.includes('example.com'));
    // The visit detail stays its manager's.
    assert.equal((await ctx.app.inject({ method: 'GET', url: `/api/links/${code}/visits` })).statusCode, 401);
    const visits = await ctx.app.inject({ method: 'GET', url: `/api/links/${code}/visits`, headers: { authorization: `Bearer ${token}` } });
    assert.equal((visits.json() as { data: { totals: { visits: number } } }).data.totals.visits, 1);
  });
});

describe('password-protected links: guesses are limited before they are checked', () => {
  it('50 concurrent wrong guesses from one address: 10 checked (403), 40 refused (429) without hashing', async () => {
    const { code } = await createProtected();
    const ip = uniqueIp();
    const started = hasher.started.verify;
    const answers = await Promise.all(Array.from({ length: 50 }, () => unlock(code, { password: 'guess' }, {}, ip)));
    const statuses = answers.map((r) => r.statusCode);
    assert.equal(statuses.filter((s) => s === 403).length, LINK_PASSWORD_LIMITS.perLinkAndAddress);
    assert.equal(statuses.filter((s) => s === 429).length, 50 - LINK_PASSWORD_LIMITS.perLinkAndAddress);
    assert.equal(hasher.started.verify - started, LINK_PASSWORD_LIMITS.perLinkAndAddress);
    const refused = answers.find((r) => r.statusCode === 429)!;
    const seconds = Number(refused.headers['retry-after']);
    assert.ok(seconds > 0 && seconds <= 900, String(seconds));
    assert.deepEqual(refused.json(), {
      status: 429,
      response: 'Too Many Requests',
      message: `Too many password attempts, please try again in ${seconds} seconds.`,
      error: 'password_attempts_exceeded',
    });
    // Even the right password waits now, from that address; a browser is told in words.
    assert.equal((await unlock(code, { password: PASSWORD }, {}, ip)).statusCode, 429);
    const page = await unlock(code, form(PASSWORD), BROWSER, ip);
    assert.equal(page.statusCode, 429);
    assert.match(page.body, /Too many wrong passwords for this link: try again in \d+ minutes?\./);
    assert.equal(await clicksOf(ctx.pool, code), 0);
    // Another address is not held back by them.
    assert.equal((await unlock(code, { password: PASSWORD })).statusCode, 302);
  });

  it("a right password gives back its address's failures on that link: a visitor's own typos do not pile up", async () => {
    const { code } = await createProtected();
    const ip = uniqueIp();
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < LINK_PASSWORD_LIMITS.perLinkAndAddress - 1; i++)
        assert.equal((await unlock(code, { password: 'typo' }, {}, ip)).statusCode, 403);
      assert.equal((await unlock(code, { password: PASSWORD }, {}, ip)).statusCode, 302);
    }
  });

  it('one address guessing many links is stopped after 30 guesses in all', async () => {
    const ip = uniqueIp();
    const codes = await Promise.all(Array.from({ length: 4 }, () => createProtected().then((l) => l.code)));
    let checked = 0;
    for (const code of codes.slice(0, 3)) {
      for (let i = 0; i < 10; i++) if ((await unlock(code, { password: 'spray' }, {}, ip)).statusCode === 403) checked++;
    }
    assert.equal(checked, LINK_PASSWORD_LIMITS.perAddress);
    assert.equal((await unlock(codes[3]!, { password: 'spray' }, {}, ip)).statusCode, 429);
  });

  it('one link guessed from many addresses is stopped after 100 guesses in all', async () => {
    const { code } = await createProtected();
    const started = hasher.started.verify;
    const answers = await Promise.all(Array.from({ length: 120 }, () => unlock(code, { password: 'many' }).then((r) => r.statusCode)));
    assert.equal(answers.filter((s) => s === 403).length, LINK_PASSWORD_LIMITS.perLink);
    assert.equal(answers.filter((s) => s === 429).length, 20);
    assert.equal(hasher.started.verify - started, LINK_PASSWORD_LIMITS.perLink);
  });

  it('with Redis, the limit holds across two instances: 50 concurrent guesses, 10 checked', { skip: withoutRedis }, async () => {
    const redisA = connectRedis(process.env.REDIS_URL ?? '', () => {});
    const redisB = connectRedis(process.env.REDIS_URL ?? '', () => {});
    await waitReady(redisA);
    await waitReady(redisB);
    const a = await startShortener({ pool: ctx.pool, redis: redisA, deps: { passwordHasher: hasher } });
    const b = await startShortener({ pool: ctx.pool, redis: redisB, deps: { passwordHasher: hasher } });
    try {
      const { code } = await createProtected();
      const ip = uniqueIp();
      const started = hasher.started.verify;
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          (i % 2 === 0 ? a.app : b.app)
            .inject({ method: 'POST', url: `/${code}`, payload: { password: 'guess' }, remoteAddress: ip })
            .then((r) => r.statusCode),
        ),
      );
      assert.equal(answers.filter((s) => s === 403).length, 10);
      assert.equal(answers.filter((s) => s === 429).length, 40);
      assert.equal(hasher.started.verify - started, 10);
    } finally {
      await a.close();
      await b.close();
      redisA.disconnect();
      redisB.disconnect();
    }
  });
});
