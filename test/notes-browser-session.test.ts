// The notes web app's session (routes under /auth/browser), against the real idp:
// the provider's refresh token only in an HttpOnly, Secure, SameSite=Strict
// cookie scoped to those routes, never in a body; the CSRF header required
// before anything is read; a refused cookie cleared; sign-out ends the session
// at the provider and clears the cookie. The browser side is in
// test/browser/notes-web.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PASSWORD, signUp, sharedNotes } from './helpers/notes.js';

const CSRF = { 'x-csrf-protection': '1' };
const ATTRIBUTES = 'Path=/auth/browser; HttpOnly; Secure; SameSite=Strict';
const ctx = sharedNotes();

const post = (url: string, headers: Record<string, string>, body?: unknown) =>
  ctx.notes.app.inject({
    method: 'POST',
    url,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    payload: body === undefined ? undefined : JSON.stringify(body),
  });

/** The value the answer set for notes_refresh ('' when it cleared it), and the whole Set-Cookie. */
function cookieOf(res: Awaited<ReturnType<typeof post>>): { value: string | undefined; header: string } {
  const header = String(res.headers['set-cookie'] ?? '');
  return { value: /^notes_refresh=([^;]*);/.exec(header)?.[1], header };
}

const refresh = (cookie?: string, headers: Record<string, string> = CSRF) =>
  post('/auth/browser/refresh', { ...headers, ...(cookie ? { cookie: `notes_refresh=${cookie}` } : {}) });

test('sign-in keeps the refresh token in the cookie only; refresh rotates it; the access token works on /notes', async () => {
  const user = await signUp(ctx.notes.url, 'cookie');
  const res = await post('/auth/browser/login', CSRF, { email: user.email, password: PASSWORD });
  assert.equal(res.statusCode, 200, res.body);
  const { value, header } = cookieOf(res);
  assert.ok(value);
  assert.equal(header, `notes_refresh=${value}; Max-Age=${30 * 86_400}; ${ATTRIBUTES}`);
  const session = res.json() as Record<string, unknown>;
  assert.deepEqual(Object.keys(session).sort(), ['access_token', 'expires_at']);
  assert.doesNotMatch(res.body, new RegExp(value));
  const list = await ctx.notes.app.inject({ method: 'GET', url: '/notes', headers: { authorization: `Bearer ${session.access_token}` } });
  assert.equal(list.statusCode, 200);

  const renewed = await refresh(value);
  assert.equal(renewed.statusCode, 200, renewed.body);
  const rotated = cookieOf(renewed).value;
  assert.ok(rotated && rotated !== value);
  assert.deepEqual(Object.keys(renewed.json()).sort(), ['access_token', 'expires_at']);
  assert.equal((await refresh(rotated)).statusCode, 200);
});

test('every route refuses a request without the CSRF header (403) and sets nothing', async () => {
  const user = await signUp(ctx.notes.url, 'csrf');
  const refused = [
    await post('/auth/browser/login', {}, { email: user.email, password: PASSWORD }),
    await refresh(user.refreshToken, {}),
    await post('/auth/browser/logout', { authorization: `Bearer ${user.token}` }),
  ];
  for (const res of refused) {
    assert.equal(res.statusCode, 403, res.body);
    assert.deepEqual(res.json(), { message: "This route answers the service's own pages only (header x-csrf-protection missing)" });
    assert.equal(res.headers['set-cookie'], undefined);
  }
  // The session is untouched: its refresh token still works.
  assert.equal((await refresh(user.refreshToken)).statusCode, 200);
});

test('no cookie (or another service’s) is 204; a cookie the provider refuses is 401 and cleared', async () => {
  for (const headers of [CSRF, { ...CSRF, cookie: 'accounts_refresh=abc' }]) {
    const res = await post('/auth/browser/refresh', headers);
    assert.equal(res.statusCode, 204);
    assert.equal(res.headers['set-cookie'], undefined);
  }
  const refused = await refresh('not-a-refresh-token');
  assert.equal(refused.statusCode, 401);
  assert.deepEqual(refused.json(), { message: 'Invalid or expired refresh token' });
  assert.equal(cookieOf(refused).header, `notes_refresh=; Max-Age=0; ${ATTRIBUTES}`);
});

test('sign-out ends the session at the provider and clears the cookie', async () => {
  const user = await signUp(ctx.notes.url, 'logout');
  const login = await post('/auth/browser/login', CSRF, { email: user.email, password: PASSWORD });
  const cookie = cookieOf(login).value!;
  const out = await post('/auth/browser/logout', { ...CSRF, authorization: `Bearer ${login.json().access_token}` });
  assert.equal(out.statusCode, 204, out.body);
  assert.equal(cookieOf(out).header, `notes_refresh=; Max-Age=0; ${ATTRIBUTES}`);
  assert.equal((await refresh(cookie)).statusCode, 401);
  // The other session of the user (from /auth/login) goes on.
  assert.equal((await refresh(user.refreshToken)).statusCode, 200);
});

test('a wrong password is the API’s 401 and sets no cookie', async () => {
  const user = await signUp(ctx.notes.url, 'wrong');
  const res = await post('/auth/browser/login', CSRF, { email: user.email, password: 'not the password' });
  assert.equal(res.statusCode, 401);
  assert.deepEqual(res.json(), { message: 'Invalid email or password' });
  assert.equal(res.headers['set-cookie'], undefined);
});
