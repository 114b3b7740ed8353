// Sessions and refresh tokens: login starts a session, /auth/refresh rotates its
// token once (tabs refreshing at once share one pair), a replay after the reuse
// interval ends the session, logout ends one or all, and the per-user cut-off
// refuses access tokens issued before a global logout. Time is the injected clock.
import { deviceName } from '../src/accounts/devices.js';
import type { TokenPair as Pair } from '../src/accounts/sessions.js';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { before, test } from 'node:test';
import { decodeJwt } from 'jose';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import type { PublicUser } from '../src/accounts/repository.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { LogCapture } from './helpers/logs.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0, 250));
const PASSWORD = 'session password 1';
const DAY = 86_400_000;
let app: App;
const logs = new LogCapture();

before(async () => {
  app = await suite.app({ LOG_LEVEL: 'debug' }, { clock, logs });
});

async function newUser(label: string): Promise<PublicUser> {
  return registerUser(app, { name: 'Session User', email: uniqueEmail(label), password: PASSWORD });
}

async function login(user: PublicUser, userAgent = 'test-agent/1'): Promise<Pair> {
  const res = await json(app, 'POST', '/auth/login', { email: user.email, password: PASSWORD }, { 'user-agent': userAgent });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data as Pair;
}

const refresh = (refreshToken: unknown) => json(app, 'POST', '/auth/refresh', { refresh_token: refreshToken });
const me = (token: string) => app.inject({ method: 'GET', url: '/auth/me', headers: bearer(token) });
const sha256 = (token: string) => createHash('sha256').update(token).digest();

async function auditEvents(userId: string): Promise<string[]> {
  const { rows } = await suite.pool.query('SELECT event FROM audit_log WHERE target_id = $1 OR actor_id = $1 ORDER BY id', [userId]);
  return rows.map((r) => r.event as string);
}

test('login answers a refresh token (256 bits, base64url) and expires_in, and stores the session with only the token hash', async () => {
  const user = await newUser('login-session');
  const pair = await login(user, 'Browser/1.0');
  assert.match(pair.refresh_token, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(Buffer.from(pair.refresh_token, 'base64url').length, 32);
  assert.equal(pair.expires_in, 3600);
  const { rows } = await suite.pool.query('SELECT * FROM sessions WHERE user_id = $1', [user.id]);
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0].refresh_token_hash, sha256(pair.refresh_token));
  assert.equal(rows[0].ip, '127.0.0.1');
  assert.equal(rows[0].user_agent, 'Browser/1.0');
  assert.equal(rows[0].created_at.getTime(), clock());
  assert.ok(!JSON.stringify(rows).includes(pair.refresh_token), 'the refresh token itself is stored');
});

test('refresh rotates: a new pair in the envelope, the new refresh token works, the session is kept', async () => {
  const user = await newUser('rotate');
  const first = await login(user);
  clock.advance(1500);
  const res = await refresh(first.refresh_token);
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json();
  assert.deepEqual(Object.keys(body).sort(), ['data', 'message', 'response', 'status']);
  assert.equal(body.status, 200);
  assert.equal(body.response, 'OK');
  const second = body.data as Pair;
  assert.deepEqual(Object.keys(second).sort(), ['expires_in', 'refresh_token', 'token', 'user']);
  assert.notEqual(second.refresh_token, first.refresh_token);
  assert.deepEqual(second.user, user);
  // A refreshed token adds auth_time: when the session signed in, which a refresh does not renew.
  assert.deepEqual(Object.keys(decodeJwt(second.token)).sort(), ['auth_time', 'exp', 'iat', 'id', 'role']);
  assert.equal(decodeJwt(second.token).auth_time, decodeJwt(first.token).iat);
  assert.equal((await me(second.token)).statusCode, 200);
  clock.advance(1000);
  const third = await refresh(second.refresh_token);
  assert.equal(third.statusCode, 200, third.body);
  const { rows } = await suite.pool.query('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [user.id]);
  assert.equal(rows[0].n, 1);
});

test('10 concurrent refreshes of one token all succeed with ONE pair, and the session rotated exactly once', async () => {
  const user = await newUser('concurrent');
  const first = await login(user);
  clock.advance(2000);
  const answers = await Promise.all(Array.from({ length: 10 }, () => refresh(first.refresh_token)));
  for (const res of answers) assert.equal(res.statusCode, 200, res.body);
  const pairs = answers.map((res) => res.json().data as Pair);
  assert.equal(new Set(pairs.map((p) => p.refresh_token)).size, 1);
  assert.equal(new Set(pairs.map((p) => p.token)).size, 1);
  const { rows } = await suite.pool.query('SELECT refresh_token_hash, previous_token_hash FROM sessions WHERE user_id = $1', [user.id]);
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0].previous_token_hash, sha256(first.refresh_token));
  assert.deepEqual(rows[0].refresh_token_hash, sha256(pairs[0]!.refresh_token));
  // The shared pair is a working one.
  assert.equal((await refresh(pairs[0]!.refresh_token)).statusCode, 200);
});

test('the replaced token within the reuse interval gets the current pair; after it, its reuse ends the session and is audited', async () => {
  const user = await newUser('reuse');
  const first = await login(user);
  const rotated = (await refresh(first.refresh_token)).json().data as Pair;
  clock.advance(10_000);
  const again = await refresh(first.refresh_token);
  assert.equal(again.statusCode, 200, again.body);
  assert.equal((again.json().data as Pair).refresh_token, rotated.refresh_token);
  clock.advance(1);
  assertError(await refresh(first.refresh_token), 401, 'Invalid or expired refresh token.');
  // The whole session ended: its current token is refused too.
  assertError(await refresh(rotated.refresh_token), 401, 'Invalid or expired refresh token.');
  const { rows } = await suite.pool.query('SELECT ended_at, end_reason FROM sessions WHERE user_id = $1', [user.id]);
  assert.equal(rows[0].end_reason, 'refresh_token_reused');
  assert.ok((await auditEvents(user.id)).includes('refresh_token_reused'));
});

test('unknown, malformed, ended and expired refresh tokens are 401 in the envelope; a wrong type is 400', async () => {
  assertError(await refresh('A'.repeat(43)), 401, 'Invalid or expired refresh token.');
  assertError(await refresh('not a token'), 401, 'Invalid or expired refresh token.');
  assertError(await refresh(''), 401, 'Invalid or expired refresh token.');
  assertError(await refresh(42), 400, /body\/refresh_token must be string/);
  assertError(await json(app, 'POST', '/auth/refresh', {}), 400, /refresh_token/);

  const user = await newUser('expiry');
  // Idle: unused for 7 days.
  const idle = await login(user);
  clock.advance(7 * DAY - 1);
  const kept = await refresh(idle.refresh_token);
  assert.equal(kept.statusCode, 200, kept.body);
  clock.advance(7 * DAY);
  assertError(await refresh((kept.json().data as Pair).refresh_token), 401, 'Invalid or expired refresh token.');
  // Absolute: 30 days after login, however often it is used.
  let current = (await login(user)).refresh_token;
  for (const step of [6 * DAY, 6 * DAY, 6 * DAY, 6 * DAY, 6 * DAY - 1]) {
    clock.advance(step);
    const res = await refresh(current);
    assert.equal(res.statusCode, 200, res.body);
    current = (res.json().data as Pair).refresh_token;
  }
  clock.advance(1);
  assertError(await refresh(current), 401, 'Invalid or expired refresh token.');
});

test('the reuse interval and both session lifetimes follow their configuration', async () => {
  const configured = await suite.app({ REFRESH_REUSE_INTERVAL: '2s', SESSION_IDLE_TIMEOUT: '1h', SESSION_MAX_LIFETIME: '3h' }, { clock });
  const user = await newUser('configured');
  const post = (body: unknown) => json(configured, 'POST', '/auth/refresh', body);
  const loginHere = async () =>
    (await json(configured, 'POST', '/auth/login', { email: user.email, password: PASSWORD })).json().data as Pair;
  // Reuse: 2 s, not 10.
  const first = await loginHere();
  const rotated = (await post({ refresh_token: first.refresh_token })).json().data as Pair;
  clock.advance(2000);
  assert.equal((await post({ refresh_token: first.refresh_token })).json().data.refresh_token, rotated.refresh_token);
  clock.advance(1);
  assertError(await post({ refresh_token: first.refresh_token }), 401, 'Invalid or expired refresh token.');
  // Idle: 1 h.
  const idle = await loginHere();
  clock.advance(3_600_000);
  assertError(await post({ refresh_token: idle.refresh_token }), 401, 'Invalid or expired refresh token.');
  // Absolute: 3 h, however often it is used.
  let current = (await loginHere()).refresh_token;
  for (let i = 0; i < 3; i += 1) {
    clock.advance(3_600_000 - 1);
    const res = await post({ refresh_token: current });
    assert.equal(res.statusCode, 200, res.body);
    current = (res.json().data as Pair).refresh_token;
  }
  clock.advance(3);
  assertError(await post({ refresh_token: current }), 401, 'Invalid or expired refresh token.');
});

test('a refresh racing a global logout: whichever goes first, nothing issued before the logout works after it', async () => {
  for (let round = 0; round < 5; round += 1) {
    const user = await newUser(`race-${round}`);
    const pair = await login(user);
    const [refreshed, logout] = await Promise.all([
      refresh(pair.refresh_token),
      json(app, 'POST', '/auth/logout', { scope: 'global' }, bearer(pair.token)),
    ]);
    assert.equal(logout.statusCode, 200, logout.body);
    assertError(await me(pair.token), 401, 'Invalid or expired token.');
    if (refreshed.statusCode === 200) {
      const got = refreshed.json().data as Pair;
      assertError(await me(got.token), 401, 'Invalid or expired token.');
      assertError(await refresh(got.refresh_token), 401, 'Invalid or expired refresh token.');
    } else {
      assertError(refreshed, 401, 'Invalid or expired refresh token.');
    }
  }
});

test('logout with a refresh token ends that session only; its access token lives on until it expires', async () => {
  const user = await newUser('logout-one');
  const a = await login(user, 'A');
  const b = await login(user, 'B');
  const res = await json(app, 'POST', '/auth/logout', { refresh_token: a.refresh_token }, bearer(a.token));
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(res.json(), { status: 200, response: 'OK', message: 'Logged out' });
  assertError(await refresh(a.refresh_token), 401, 'Invalid or expired refresh token.');
  assert.equal((await refresh(b.refresh_token)).statusCode, 200);
  assert.equal((await me(a.token)).statusCode, 200);
  // Another user's refresh token changes nothing.
  const other = await login(await newUser('logout-other'));
  assert.equal((await json(app, 'POST', '/auth/logout', { refresh_token: other.refresh_token }, bearer(a.token))).statusCode, 200);
  assert.equal((await refresh(other.refresh_token)).statusCode, 200);
  assert.ok((await auditEvents(user.id)).includes('logged_out'));
});

test('logout needs a token, and exactly one of refresh_token or scope "global"', async () => {
  const user = await newUser('logout-bad');
  const pair = await login(user);
  assertError(await json(app, 'POST', '/auth/logout', { scope: 'global' }), 401, 'Access denied. No token provided.');
  assertError(
    await json(app, 'POST', '/auth/logout', {}, bearer(pair.token)),
    400,
    'body must have either refresh_token or scope "global"',
  );
  assertError(
    await json(app, 'POST', '/auth/logout', { scope: 'global', refresh_token: pair.refresh_token }, bearer(pair.token)),
    400,
    'body must have either refresh_token or scope "global"',
  );
  assertError(await json(app, 'POST', '/auth/logout', { scope: 'local' }, bearer(pair.token)), 400, /scope/);
  assert.equal((await refresh(pair.refresh_token)).statusCode, 200, 'a refused logout changed something');
});

test('global logout ends every session and refuses every access token issued before it, even in the same second; a login after it works', async () => {
  const user = await newUser('global');
  const a = await login(user);
  const b = await login(user);
  // Same millisecond as the logins: iat cannot tell them apart by time.
  const res = await json(app, 'POST', '/auth/logout', { scope: 'global' }, bearer(a.token));
  assert.equal(res.statusCode, 200, res.body);
  assertError(await me(a.token), 401, 'Invalid or expired token.');
  assertError(await me(b.token), 401, 'Invalid or expired token.');
  assertError(await refresh(a.refresh_token), 401, 'Invalid or expired refresh token.');
  assertError(await refresh(b.refresh_token), 401, 'Invalid or expired refresh token.');
  // A fresh login, still in the same second, works, and so does its refresh.
  const c = await login(user);
  assert.equal((await me(c.token)).statusCode, 200);
  const refreshed = await refresh(c.refresh_token);
  assert.equal(refreshed.statusCode, 200);
  assert.equal((await me((refreshed.json().data as Pair).token)).statusCode, 200);
  // A second global logout in that same second still catches the tokens issued after the first.
  assert.equal((await json(app, 'POST', '/auth/logout', { scope: 'global' }, bearer(c.token))).statusCode, 200);
  assertError(await me(c.token), 401, 'Invalid or expired token.');
  assertError(await me((refreshed.json().data as Pair).token), 401, 'Invalid or expired token.');
  assert.equal((await me((await login(user)).token)).statusCode, 200);
  assert.ok((await auditEvents(user.id)).includes('logged_out_everywhere'));
});

test('GET /auth/sessions lists the caller’s live sessions, newest first; DELETE ends one of them; another user’s or unknown is 404', async () => {
  const user = await newUser('list');
  const older = await login(user, 'Old/1');
  clock.advance(1000);
  const newer = await login(user, 'New/2');
  clock.advance(1000);
  const ended = await login(user, 'Gone/3');
  await json(app, 'POST', '/auth/logout', { refresh_token: ended.refresh_token }, bearer(ended.token));
  const res = await app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(newer.token) });
  assert.equal(res.statusCode, 200, res.body);
  const list = res.json().data as Array<Record<string, unknown>>;
  assert.deepEqual(
    list.map((s) => s.user_agent),
    ['New/2', 'Old/1'],
  );
  for (const s of list) assert.deepEqual(Object.keys(s).sort(), ['created_at', 'device', 'id', 'ip', 'last_used_at', 'user_agent']);
  // Agents that name no browser have no device name; the page then shows the agent itself.
  assert.deepEqual(
    list.map((s) => s.device),
    [null, null],
  );
  assert.equal(list[0]!.ip, '127.0.0.1');

  const stranger = await login(await newUser('list-stranger'));
  const oldId = String(list[1]!.id);
  assertError(
    await app.inject({ method: 'DELETE', url: `/auth/sessions/${oldId}`, headers: bearer(stranger.token) }),
    404,
    'Session not found',
  );
  assertError(
    await app.inject({ method: 'DELETE', url: '/auth/sessions/00000000-0000-4000-8000-000000000000', headers: bearer(newer.token) }),
    404,
    'Session not found',
  );
  assertError(await app.inject({ method: 'DELETE', url: '/auth/sessions/nope', headers: bearer(newer.token) }), 400, /params\/id/);
  assert.equal((await refresh(older.refresh_token)).statusCode, 200, 'a refused DELETE ended the session');
  const del = await app.inject({ method: 'DELETE', url: `/auth/sessions/${oldId}`, headers: bearer(newer.token) });
  assert.equal(del.statusCode, 200, del.body);
  assertError(
    await app.inject({ method: 'DELETE', url: `/auth/sessions/${oldId}`, headers: bearer(newer.token) }),
    404,
    'Session not found',
  );
  const after = (await app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(newer.token) })).json().data as Array<{
    id: string;
  }>;
  assert.equal(after.length, 1);
  assert.ok((await auditEvents(user.id)).includes('session_ended'));
  assertError(await app.inject({ method: 'GET', url: '/auth/sessions' }), 401, 'Access denied. No token provided.');
});

test('an expired session is no longer listed, and ending it is 404 like an unknown one', async () => {
  const user = await newUser('expired-list');
  await login(user, 'Idle/1');
  clock.advance(7 * DAY);
  const fresh = await login(user, 'Fresh/1');
  const list = (await app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(fresh.token) })).json().data as Array<{
    user_agent: string;
  }>;
  assert.deepEqual(
    list.map((s) => s.user_agent),
    ['Fresh/1'],
  );
  const { rows } = await suite.pool.query("SELECT id FROM sessions WHERE user_id = $1 AND user_agent = 'Idle/1'", [user.id]);
  assertError(
    await app.inject({ method: 'DELETE', url: `/auth/sessions/${rows[0].id}`, headers: bearer(fresh.token) }),
    404,
    'Session not found',
  );
});

test('no refresh token, access token, password or email reaches the sessions or audit tables, or the log', async () => {
  const user = await newUser('secrets');
  const pair = await login(user);
  const rotated = (await refresh(pair.refresh_token)).json().data as Pair;
  const { rows } = await suite.pool.query(
    'SELECT row_to_json(s)::text AS t FROM sessions s UNION ALL SELECT row_to_json(a)::text FROM audit_log a',
  );
  await json(app, 'POST', '/auth/logout', { refresh_token: rotated.refresh_token }, bearer(rotated.token));
  const dump = `${rows.map((r) => r.t).join('\n')}\n${logs.text()}`;
  assert.ok(logs.text().includes('login_succeeded'), 'the log was not captured');
  for (const secret of [pair.refresh_token, rotated.refresh_token, pair.token, PASSWORD, user.email]) {
    assert.ok(!dump.includes(secret), `a secret is stored: ${secret.slice(0, 8)}…`);
  }
});

noSecretInAnyResponse();

test('a session’s device is its browser and system in words, read from the User-Agent', () => {
  const cases: Array<[string | null, string | null]> = [
    ['Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36', 'Chrome on Linux'],
    [
      'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1',
      'Mobile Safari on iOS',
    ],
    ['Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0', 'Firefox on Windows'],
    ['curl/8.4.0', null],
    [null, null],
  ];
  for (const [agent, device] of cases) assert.equal(deviceName(agent), device, String(agent));
});
