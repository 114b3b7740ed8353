// PATCH and DELETE /admin/users/:id and GET /admin/audit: a role change, ban or
// deletion takes effect at once (sessions end, access tokens stop working), the last
// usable admin stays (also when two admins demote each other at once), and every
// action's audit row is written in its transaction, in a log nobody may rewrite.
import assert from 'node:assert/strict';
import type { TokenPair as Pair } from '../src/accounts/sessions.js';
import { before, test } from 'node:test';
import { seedAdmin } from '../src/accounts/admin-seed.js';
import { UsersRepository } from '../src/accounts/repository.js';
import type { App } from '../src/kit/http/app.js';
import { accountsSuite, assertError, bearer, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const PASSWORD = 'admin changes password';
const quiet = { info: () => {}, warn: () => {} };
let app: App;

before(async () => {
  app = await suite.app();
});

async function login(email: string, userAgent = 'admin-test/1'): Promise<Pair> {
  const res = await json(app, 'POST', '/auth/login', { email, password: PASSWORD }, { 'user-agent': userAgent });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data as Pair;
}

async function newAdmin(label = 'admin'): Promise<Pair> {
  const email = uniqueEmail(label);
  assert.equal(await seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: email, ADMIN_PASSWORD: PASSWORD }, quiet), 'created');
  return login(email);
}

async function newUser(label = 'user'): Promise<Pair> {
  const user = await registerUser(app, { name: 'Some User', email: uniqueEmail(label), password: PASSWORD });
  return login(user.email);
}

/** Leaves exactly these accounts as the admins (test setup, straight in the database). */
async function onlyAdmins(...ids: string[]): Promise<void> {
  await suite.pool.query("UPDATE users SET role = 'user' WHERE role = 'admin' AND NOT (id = ANY($1::uuid[]))", [ids]);
}

const patch = (token: string | undefined, id: string, body: unknown) =>
  json(app, 'PATCH', `/admin/users/${id}`, body, token ? bearer(token) : {});
const remove = (token: string | undefined, id: string) =>
  app.inject({ method: 'DELETE', url: `/admin/users/${id}`, headers: token ? bearer(token) : {} });
const me = (token: string) => app.inject({ method: 'GET', url: '/auth/me', headers: bearer(token) });
const listUsers = (token: string) => app.inject({ method: 'GET', url: '/admin/users', headers: bearer(token) });
const refresh = (refreshToken: string) => json(app, 'POST', '/auth/refresh', { refresh_token: refreshToken });
const auditFor = async (id: string) =>
  (await suite.pool.query('SELECT * FROM audit_log WHERE target_id = $1 ORDER BY id', [id])).rows as Array<Record<string, unknown>>;

test('401 without a token, 403 for a non-admin before the body or id is even read, and the 403 is audited', async () => {
  const user = await newUser('not-admin');
  const victim = await newUser('victim');
  assertError(await patch(undefined, victim.user.id, { role: 'admin' }), 401, 'Access denied. No token provided.');
  assertError(await remove(undefined, victim.user.id), 401, 'Access denied. No token provided.');
  assertError(await patch(user.token, victim.user.id, { role: 'admin' }), 403, 'You do not have permission to access this resource.');
  assertError(await patch(user.token, 'not-a-uuid', { nonsense: true }), 403, 'You do not have permission to access this resource.');
  assertError(await remove(user.token, victim.user.id), 403, 'You do not have permission to access this resource.');
  assertError(await app.inject({ method: 'GET', url: '/admin/audit', headers: bearer(user.token) }), 403, /permission/);
  assert.equal((await me(victim.token)).json().data.role, 'user');
  const { rows } = await suite.pool.query("SELECT * FROM audit_log WHERE event = 'access_denied' AND actor_id = $1", [user.user.id]);
  assert.equal(rows.length, 4);
  assert.equal(rows[0].details.method, 'PATCH');
  assert.equal(rows[0].details.route, '/admin/users/:id');
  assert.equal(rows[0].ip, '127.0.0.1');
});

test('bad input is 400, an unknown user 404, and nothing changes', async () => {
  const admin = await newAdmin();
  const user = await newUser('bad-input');
  assertError(await patch(admin.token, user.user.id, {}), 400, /fewer than 1 properties/);
  assertError(await patch(admin.token, user.user.id, { role: 'root' }), 400, /body\/role/);
  assertError(await patch(admin.token, user.user.id, { banned: 'yes' }), 400, /body\/banned/);
  assertError(await patch(admin.token, 'nope', { role: 'admin' }), 400, /params\/id/);
  assertError(await remove(admin.token, 'nope'), 400, /params\/id/);
  assertError(await patch(admin.token, '00000000-0000-4000-8000-000000000000', { role: 'admin' }), 404, 'User not found');
  assertError(await remove(admin.token, '00000000-0000-4000-8000-000000000000'), 404, 'User not found');
  assert.equal((await me(user.token)).statusCode, 200);
  assert.equal((await me(user.token)).json().data.role, 'user');
});

test('a role change takes effect at once: the old tokens and sessions stop working; a demoted admin is refused at once', async () => {
  const admin = await newAdmin();
  const target = await newUser('promoted');
  const res = await patch(admin.token, target.user.id, { role: 'admin' });
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(res.json().data, { user: { ...res.json().data.user, role: 'admin' }, banned: false });
  assertError(await me(target.token), 401, 'Invalid or expired token.');
  assertError(await refresh(target.refresh_token), 401, 'Invalid or expired refresh token.');
  const promoted = await login(target.user.email);
  assert.equal((await listUsers(promoted.token)).statusCode, 200);

  // The other way: a demoted admin's token is refused at once, even on the admin routes.
  assert.equal((await patch(admin.token, target.user.id, { role: 'user' })).statusCode, 200);
  assertError(await listUsers(promoted.token), 401, 'Invalid or expired token.');
  const demoted = await login(target.user.email);
  assertError(await listUsers(demoted.token), 403, /permission/);

  const entries = (await auditFor(target.user.id)).filter((e) => e.event === 'role_changed');
  assert.deepEqual(
    entries.map((e) => e.details),
    [
      { from: 'user', to: 'admin' },
      { from: 'admin', to: 'user' },
    ],
  );
  assert.equal(entries[0]!.actor_id, admin.user.id);
  assert.equal(entries[0]!.user_agent, 'lightMyRequest');
  // The same role again changes nothing and writes nothing.
  assert.equal((await patch(admin.token, target.user.id, { role: 'user' })).statusCode, 200);
  assert.equal((await me(demoted.token)).statusCode, 200);
  assert.equal((await auditFor(target.user.id)).filter((e) => e.event === 'role_changed').length, 2);
});

test('a ban ends the sessions and tokens at once; a banned user cannot log in (403) or refresh; lifting it lets them in', async () => {
  const admin = await newAdmin();
  const target = await newUser('banned');
  const res = await patch(admin.token, target.user.id, { banned: true });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().data.banned, true);
  assertError(await me(target.token), 401, 'Invalid or expired token.');
  assertError(await refresh(target.refresh_token), 401, 'Invalid or expired refresh token.');
  assertError(
    await json(app, 'POST', '/auth/login', { email: target.user.email, password: PASSWORD }),
    403,
    'This account has been banned.',
  );
  // The ban is only told to whoever knows the password.
  assertError(
    await json(app, 'POST', '/auth/login', { email: target.user.email, password: 'wrong password' }),
    401,
    'Invalid email or password',
  );
  const unban = await patch(admin.token, target.user.id, { banned: false });
  assert.equal(unban.statusCode, 200);
  assert.equal(unban.json().data.banned, false);
  const back = await login(target.user.email);
  assert.equal((await me(back.token)).statusCode, 200);
  const events = (await auditFor(target.user.id)).map((e) => e.event);
  for (const event of ['user_banned', 'login_refused_banned', 'user_unbanned']) assert.ok(events.includes(event), event);
});

test('a refresh racing a ban: the session row lock orders them, and a banned account never gets a pair afterwards', async () => {
  const admin = await newAdmin();
  const target = await newUser('ban-race');
  const [ban, refreshed] = await Promise.all([patch(admin.token, target.user.id, { banned: true }), refresh(target.refresh_token)]);
  assert.equal(ban.statusCode, 200);
  if (refreshed.statusCode === 200) {
    // The refresh went first: what it got is cut off by the ban.
    assertError(await me(refreshed.json().data.token), 401, 'Invalid or expired token.');
    assertError(await refresh(refreshed.json().data.refresh_token), 401, 'Invalid or expired refresh token.');
  } else {
    assertError(refreshed, 401, 'Invalid or expired refresh token.');
  }
});

test('a deletion takes effect at once; the audit log keeps its entries', async () => {
  const admin = await newAdmin();
  const target = await newUser('deleted');
  const res = await remove(admin.token, target.user.id);
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(res.json(), { status: 200, response: 'OK', message: 'User deleted' });
  assertError(await me(target.token), 404, 'User not found');
  assertError(await app.inject({ method: 'GET', url: '/auth/sessions', headers: bearer(target.token) }), 401, 'Invalid or expired token.');
  assertError(await refresh(target.refresh_token), 401, 'Invalid or expired refresh token.');
  assertError(await remove(admin.token, target.user.id), 404, 'User not found');
  const events = (await auditFor(target.user.id)).map((e) => e.event);
  assert.deepEqual(events.slice(0, 2), ['user_registered', 'login_succeeded']);
  assert.equal(events.at(-1), 'user_deleted');
});

test('the last usable admin cannot be demoted, banned or deleted (409); with another admin it can', async () => {
  const admin = await newAdmin('last');
  await onlyAdmins(admin.user.id);
  const lastAdmin = 'The last admin cannot be demoted, banned or deleted.';
  assertError(await patch(admin.token, admin.user.id, { role: 'user' }), 409, lastAdmin);
  assertError(await patch(admin.token, admin.user.id, { banned: true }), 409, lastAdmin);
  assertError(await remove(admin.token, admin.user.id), 409, lastAdmin);
  assert.equal((await listUsers(admin.token)).statusCode, 200, 'a refused change cut the admin off');
  // A banned admin is no admin: banning the only other one leaves this one the last again.
  const other = await newAdmin('other');
  assert.equal((await patch(admin.token, other.user.id, { banned: true })).statusCode, 200);
  assertError(await patch(admin.token, admin.user.id, { role: 'user' }), 409, lastAdmin);
  assert.equal((await patch(admin.token, other.user.id, { banned: false })).statusCode, 200);
  const res = await patch(admin.token, admin.user.id, { role: 'user' });
  assert.equal(res.statusCode, 200, res.body);
  assertError(await listUsers(admin.token), 401, 'Invalid or expired token.');
});

test('two admins demoting (or deleting) each other at once leave exactly one admin, every time', async () => {
  for (let round = 0; round < 5; round += 1) {
    const a = await newAdmin(`duel-a${round}`);
    const b = await newAdmin(`duel-b${round}`);
    await onlyAdmins(a.user.id, b.user.id);
    const answers =
      round % 2 === 0
        ? await Promise.all([patch(a.token, b.user.id, { role: 'user' }), patch(b.token, a.user.id, { role: 'user' })])
        : await Promise.all([remove(a.token, b.user.id), remove(b.token, a.user.id)]);
    const statuses = answers.map((r) => r.statusCode).sort();
    // The loser is refused either by the last-admin rule (409) or, when the winner
    // committed first, because its own token was just cut off (401).
    assert.equal(statuses.filter((s) => s === 200).length, 1, `round ${round}: ${answers.map((r) => r.body).join(' | ')}`);
    for (const s of statuses) assert.ok([200, 401, 409].includes(s), `round ${round}: ${s}`);
    const { rows } = await suite.pool.query("SELECT count(*)::int AS n FROM users WHERE role = 'admin' AND banned_at IS NULL");
    assert.equal(rows[0].n, 1, `round ${round}`);
  }
});

test('the audit row is written in the action’s transaction: when it fails, the action is undone', async () => {
  const admin = await newAdmin();
  const target = await newUser('rollback');
  await suite.pool.query(`CREATE FUNCTION refuse_role_audit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.event = 'role_changed' THEN RAISE EXCEPTION 'audit write refused for the test'; END IF; RETURN NEW; END $$`);
  await suite.pool.query('CREATE TRIGGER refuse_role_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_role_audit()');
  try {
    const res = await patch(admin.token, target.user.id, { role: 'admin' });
    assertError(res, 500, 'Internal Server Error');
  } finally {
    await suite.pool.query('DROP TRIGGER refuse_role_audit ON audit_log');
    await suite.pool.query('DROP FUNCTION refuse_role_audit()');
  }
  // Neither the role, nor the cut-off, nor the sessions changed.
  assert.equal((await me(target.token)).json().data.role, 'user');
  assert.equal((await refresh(target.refresh_token)).statusCode, 200);
  assert.equal((await auditFor(target.user.id)).filter((e) => e.event === 'role_changed').length, 0);
});

test('the audit log is append-only: updates, deletes and truncation are refused, and the owner gave up those rights', async () => {
  for (const sql of ["UPDATE audit_log SET event = 'login_succeeded'", 'DELETE FROM audit_log', 'TRUNCATE audit_log']) {
    await assert.rejects(suite.pool.query(sql), (err: { code?: string; message?: string }) => {
      assert.equal(err.code, '42501', sql);
      assert.match(String(err.message), /append-only/);
      return true;
    });
  }
  const { rows } = await suite.pool.query(`SELECT privilege_type FROM information_schema.table_privileges
    WHERE table_name = 'audit_log' AND grantee = (SELECT tableowner FROM pg_tables WHERE tablename = 'audit_log') ORDER BY 1`);
  const privileges = rows.map((r) => r.privilege_type as string);
  assert.ok(privileges.includes('INSERT') && privileges.includes('SELECT'), privileges.join());
  for (const refused of ['UPDATE', 'DELETE', 'TRUNCATE']) assert.ok(!privileges.includes(refused), `owner still has ${refused}`);
});

test('GET /admin/audit pages newest first with X-Total-Count and Link, filters by user and event, and refuses bad filters', async () => {
  const admin = await newAdmin();
  const target = await newUser('audited');
  await patch(admin.token, target.user.id, { banned: true });
  await patch(admin.token, target.user.id, { banned: false });
  const get = (query: string) => app.inject({ method: 'GET', url: `/admin/audit${query}`, headers: bearer(admin.token) });

  const all = await get(`?user_id=${target.user.id}`);
  assert.equal(all.statusCode, 200, all.body);
  const entries = all.json() as Array<Record<string, unknown>>;
  assert.deepEqual(
    entries.map((e) => e.event),
    ['user_unbanned', 'user_banned', 'login_succeeded', 'user_registered'],
  );
  assert.equal(all.headers['x-total-count'], '4');
  assert.deepEqual(Object.keys(entries[0]!).sort(), ['actor_id', 'at', 'details', 'event', 'id', 'ip', 'target_id', 'user_agent']);
  assert.equal(entries[0]!.actor_id, admin.user.id);
  assert.equal(entries[0]!.target_id, target.user.id);

  const page = await get(`?user_id=${target.user.id}&per_page=1&page=2`);
  assert.deepEqual(
    (page.json() as Array<{ event: string }>).map((e) => e.event),
    ['user_banned'],
  );
  assert.equal(
    page.headers.link,
    [1, 1, 3, 4]
      .map((n, i) => `</admin/audit?page=${n}&per_page=1&user_id=${target.user.id}>; rel="${['first', 'prev', 'next', 'last'][i]}"`)
      .join(', '),
  );

  const banned = await get(`?event=user_banned&user_id=${target.user.id}`);
  assert.deepEqual(
    (banned.json() as Array<{ event: string }>).map((e) => e.event),
    ['user_banned'],
  );
  assert.equal(banned.headers['x-total-count'], '1');
  assert.match(String(banned.headers.link), /event=user_banned/);

  assertError(await get('?event=nope'), 400, /querystring\/event/);
  assertError(await get('?user_id=nope'), 400, /querystring\/user_id/);
  assertError(await get('?per_page=0'), 400, /querystring\/per_page/);
  assertError(await get('?page=1e400'), 400, /querystring\/page/);
  assertError(await app.inject({ method: 'GET', url: '/admin/audit' }), 401, 'Access denied. No token provided.');
});

test('logins are audited: success, failure with its reason, throttled, with the address and user agent but never the email', async () => {
  const pair = await newUser('login-audit');
  const email = pair.user.email;
  const failed = (password: string, target = email) =>
    json(app, 'POST', '/auth/login', { email: target, password }, { 'user-agent': 'guesser/1' });
  const nobody = uniqueEmail('nobody');
  assert.equal((await failed('wrong password', nobody)).statusCode, 401);
  for (let i = 0; i < 10; i += 1) assert.equal((await failed('wrong password')).statusCode, 401);
  assert.equal((await failed(PASSWORD)).statusCode, 429);
  const { rows } = await suite.pool.query(
    "SELECT * FROM audit_log WHERE event IN ('login_failed', 'login_throttled') AND user_agent = 'guesser/1' ORDER BY id",
  );
  assert.deepEqual(
    rows.map((r) => [r.event, r.details.reason ?? null, r.target_id]),
    [
      ['login_failed', 'unknown_email', null],
      ...Array(10).fill(['login_failed', 'wrong_password', pair.user.id]),
      ['login_throttled', null, null],
    ],
  );
  assert.match(rows[0].details.email_hmac, /^[0-9a-f]{64}$/);
  assert.equal(rows.at(-1).details.email_hmac, rows[1].details.email_hmac);
  assert.equal(rows[0].ip, '127.0.0.1');
  const succeeded = (await auditFor(pair.user.id)).filter((e) => e.event === 'login_succeeded');
  assert.equal(succeeded.length, 1);
  assert.equal(succeeded[0]!.actor_id, pair.user.id);
  assert.equal(succeeded[0]!.user_agent, 'admin-test/1');
  assert.ok(!JSON.stringify(rows).includes(email) && !JSON.stringify(rows).includes(nobody));
});

test('no audit row holds a password, a hash, a token or a raw email', async () => {
  const { rows } = await suite.pool.query('SELECT row_to_json(a)::text AS t FROM audit_log a');
  const dump = rows.map((r) => r.t).join('\n');
  assert.ok(rows.length > 20);
  assert.ok(!dump.includes(PASSWORD));
  assert.doesNotMatch(dump, /\$2[aby]\$/);
  assert.doesNotMatch(dump, /eyJ[A-Za-z0-9_-]+\./);
  assert.doesNotMatch(dump, /@example\./);
});

noSecretInAnyResponse();
