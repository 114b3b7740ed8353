// The web pages' session (routes under /auth/browser): the refresh token only in
// an HttpOnly, Secure, SameSite=Strict cookie scoped to those routes, never in a
// body; every route refuses a request without the CSRF header before reading
// anything; a refused cookie is cleared; sign-out ends the session and clears it.
// The browser side (a second tab stays signed in) is in test/browser/accounts-web.test.ts.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
const PASSWORD = 'browser session passphrase';
const CSRF = { 'x-csrf-protection': '1' };
const COOKIE_ATTRIBUTES = 'Path=/auth/browser; HttpOnly; Secure; SameSite=Strict';
let app: App;

before(async () => {
  app = await suite.app({}, { clock });
});

interface BrowserSession {
  token: string;
  expires_in: number;
  session_id: string;
  user: { email: string };
}

/** The value the answer set for accounts_refresh ('' when it cleared it), and the whole Set-Cookie. */
function cookieOf(res: Awaited<ReturnType<App['inject']>>): { value: string | undefined; header: string } {
  const header = String(res.headers['set-cookie'] ?? '');
  const value = /^accounts_refresh=([^;]*);/.exec(header)?.[1];
  return { value, header };
}

async function signIn(email: string): Promise<{ session: BrowserSession; cookie: string }> {
  const res = await json(app, 'POST', '/auth/browser/login', { email, password: PASSWORD }, CSRF);
  assert.equal(res.statusCode, 200, res.body);
  const { value, header } = cookieOf(res);
  assert.ok(value);
  assert.equal(header, `accounts_refresh=${value}; Max-Age=${30 * 86_400}; ${COOKIE_ATTRIBUTES}`);
  return { session: res.json().data as BrowserSession, cookie: value };
}

const refresh = (cookie: string | undefined, headers: Record<string, string> = CSRF) =>
  json(app, 'POST', '/auth/browser/refresh', undefined, { ...headers, ...(cookie ? { cookie: `accounts_refresh=${cookie}` } : {}) });

async function newUser(label: string): Promise<string> {
  const email = uniqueEmail(label);
  await registerUser(app, { name: 'Browser User', email, password: PASSWORD });
  return email;
}

test('sign-in: the refresh token only in the cookie, the answer names the session; refresh rotates the cookie', async () => {
  const email = await newUser('cookie');
  const { session, cookie } = await signIn(email);
  assert.deepEqual(Object.keys(session).sort(), ['expires_in', 'session_id', 'token', 'user']);
  assert.equal(session.user.email, email);
  assert.doesNotMatch(JSON.stringify(session), new RegExp(cookie));
  // The session it names is the one GET /auth/sessions lists.
  const listed = await app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(session.token) });
  assert.deepEqual(
    (listed.json().data as Array<{ id: string }>).map((s) => s.id),
    [session.session_id],
  );

  clock.advance(60_000);
  const first = await refresh(cookie);
  assert.equal(first.statusCode, 200, first.body);
  const rotated = cookieOf(first).value;
  assert.ok(rotated && rotated !== cookie);
  assert.equal((first.json().data as BrowserSession).session_id, session.session_id);
  // Two tabs refreshing at once with the same cookie share the rotation (the reuse interval)...
  const twin = await refresh(cookie);
  assert.equal(twin.statusCode, 200);
  assert.equal(cookieOf(twin).value, rotated);
  // ...and later the replaced cookie is a replay: refused, cleared, and the session is over.
  clock.advance(60_000);
  const replay = await refresh(cookie);
  assertError(replay, 401, 'Invalid or expired refresh token.');
  assert.equal(cookieOf(replay).header, `accounts_refresh=; Max-Age=0; ${COOKIE_ATTRIBUTES}`);
  assert.equal((await refresh(rotated)).statusCode, 401);
});

test('every route refuses a request without the CSRF header (403), before reading the body or the cookie', async () => {
  const email = await newUser('csrf');
  const { session, cookie } = await signIn(email);
  const refused = [
    await json(app, 'POST', '/auth/browser/login', { email, password: PASSWORD }),
    await refresh(cookie, {}),
    await json(
      app,
      'POST',
      '/auth/browser/password',
      { current_password: PASSWORD, new_password: 'another passphrase' },
      bearer(session.token),
    ),
    await json(app, 'POST', '/auth/browser/logout', {}, bearer(session.token)),
  ];
  for (const res of refused) {
    assertError(res, 403, "This route answers the service's own pages only (header x-csrf-protection missing)");
    assert.equal(res.headers['set-cookie'], undefined);
  }
  // Nothing was done: the cookie still works and the password is unchanged.
  assert.equal((await refresh(cookie)).statusCode, 200);
  assert.equal((await json(app, 'POST', '/auth/login', { email, password: PASSWORD })).statusCode, 200);
});

test('without a cookie, or with only another service’s cookie, refresh answers 204: nobody is signed in here', async () => {
  for (const headers of [CSRF, { ...CSRF, cookie: 'notes_refresh=abc; other=1' }]) {
    const res = await json(app, 'POST', '/auth/browser/refresh', undefined, headers);
    assert.equal(res.statusCode, 204);
    assert.equal(res.body, '');
    assert.equal(res.headers['set-cookie'], undefined);
  }
  // A cookie that is not a token of this service is refused like a spent one, and cleared.
  const made = await refresh('made-up');
  assertError(made, 401, 'Invalid or expired refresh token.');
  assert.equal(cookieOf(made).value, '');
});

test('a password change puts the new session in the cookie; the old cookie is dead', async () => {
  const email = await newUser('password');
  const { session, cookie } = await signIn(email);
  const res = await json(
    app,
    'POST',
    '/auth/browser/password',
    { current_password: PASSWORD, new_password: 'a brand new passphrase' },
    { ...CSRF, ...bearer(session.token) },
  );
  assert.equal(res.statusCode, 200, res.body);
  const fresh = cookieOf(res).value;
  assert.ok(fresh && fresh !== cookie);
  assert.notEqual((res.json().data as BrowserSession).session_id, session.session_id);
  assert.equal((await refresh(fresh)).statusCode, 200);
  clock.advance(60_000);
  assert.equal((await refresh(cookie)).statusCode, 401);
  // A common password is refused here as at registration.
  const common = await json(
    app,
    'POST',
    '/auth/browser/password',
    { current_password: 'a brand new passphrase', new_password: 'password123' },
    { ...CSRF, ...bearer((res.json().data as BrowserSession).token) },
  );
  assertError(common, 400, 'body/new_password is one of the most commonly used passwords: choose one that is harder to guess');
});

test('sign-out ends the cookie’s session and clears it; with scope "global" every session ends', async () => {
  const email = await newUser('logout');
  const one = await signIn(email);
  const two = await signIn(email);
  const out = await json(
    app,
    'POST',
    '/auth/browser/logout',
    {},
    { ...CSRF, ...bearer(one.session.token), cookie: `accounts_refresh=${one.cookie}` },
  );
  assert.equal(out.statusCode, 200, out.body);
  assert.equal(cookieOf(out).header, `accounts_refresh=; Max-Age=0; ${COOKIE_ATTRIBUTES}`);
  assert.equal((await refresh(one.cookie)).statusCode, 401);
  assert.equal((await refresh(two.cookie)).statusCode, 200, 'the other session goes on');

  const three = await signIn(email);
  const everywhere = await json(
    app,
    'POST',
    '/auth/browser/logout',
    { scope: 'global' },
    { ...CSRF, ...bearer(three.session.token), cookie: `accounts_refresh=${three.cookie}` },
  );
  assert.equal(everywhere.statusCode, 200);
  assert.equal(cookieOf(everywhere).value, '');
  clock.advance(60_000);
  for (const cookie of [three.cookie]) assert.equal((await refresh(cookie)).statusCode, 401);
  const { rows } = await suite.pool.query(
    'SELECT count(*)::int AS n FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1 AND s.ended_at IS NULL',
    [email],
  );
  assert.equal(rows[0].n, 0);
});

test('a wrong password at the browser sign-in is the API’s 401, and sets no cookie', async () => {
  const email = await newUser('wrong');
  const res = await json(app, 'POST', '/auth/browser/login', { email, password: 'not the passphrase' }, CSRF);
  assertError(res, 401, 'Invalid email or password');
  assert.equal(res.headers['set-cookie'], undefined);
});

noSecretInAnyResponse();
