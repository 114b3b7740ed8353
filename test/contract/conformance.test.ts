// The three contracts, rule by rule and in order, against `npm start` with its default configuration
// (only the contract's own variables set: ADMIN_EMAIL and ADMIN_PASSWORD, and ports), scripted as a
// client of each contract would script them: many users from one machine, concurrent duplicates,
// repeated wrong passwords on several accounts. A default setting that refuses such a client (a
// 429, a lockout, a 503) fails here. Every request comes from this one machine, 127.0.0.1.
// `npm run test:contract` runs it alone (CI runs it as a step of its own, on a machine doing nothing
// else): it measures defaults, and a machine starved by other suites would stretch the services
// past their own deadlines.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { type JsonReply, request } from '../helpers/http.js';
import { freePorts } from '../helpers/ports.js';
import { type SpawnedProcess, startLauncher } from '../helpers/process.js';

const START_BOUND_MS = 180_000;
const SERVICES = ['idp', 'accounts', 'shortener', 'notes'] as const;
const ADMIN = { email: 'contract-admin@example.com', password: 'contract admin passphrase' };
const MANY_USERS = 200;
const DUPLICATES = 20;

const scratch = mkdtempSync(path.join(tmpdir(), 'contract-'));
// As root PostgreSQL runs as the `postgres` OS user, which must reach DATA_DIR.
chmodSync(scratch, 0o755);
const url: Record<(typeof SERVICES)[number], string> = { idp: '', accounts: '', shortener: '', notes: '' };
let launcher: SpawnedProcess | undefined;
const run = Date.now().toString(36);

before(async () => {
  const free = await freePorts(6);
  for (const [i, name] of SERVICES.entries()) url[name] = `http://127.0.0.1:${free[i]}`;
  launcher = startLauncher({
    DATA_DIR: path.join(scratch, 'data'),
    LOG_LEVEL: 'warn',
    ADMIN_EMAIL: ADMIN.email,
    ADMIN_PASSWORD: ADMIN.password,
    MAILDEV_SMTP_PORT: String(free[4]),
    MAILDEV_WEB_PORT: String(free[5]),
    ...Object.fromEntries(SERVICES.map((name, i) => [`${name.toUpperCase()}_PORT`, String(free[i])])),
  });
  const deadline = Date.now() + START_BOUND_MS;
  for (const name of SERVICES) {
    for (;;) {
      if (launcher.child.exitCode !== null) throw new Error(`npm start exited with ${launcher.child.exitCode}: ${launcher.output()}`);
      if (Date.now() > deadline) throw new Error(`npm start did not bring ${name} up: ${launcher.output()}`);
      const ready = await fetch(`${url[name]}/readyz`).then(
        (res) => res.ok,
        () => false,
      );
      if (ready) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
});

after(async () => {
  if (launcher && launcher.child.exitCode === null && launcher.child.signalCode === null) {
    launcher.child.kill('SIGTERM');
    await launcher.exited;
  }
  rmSync(scratch, { recursive: true, force: true });
});

/** `count` calls, at most `concurrency` at a time, in order of their index. */
async function many<T>(count: number, concurrency: number, one: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await one(i);
      }
    }),
  );
  return results;
}

const tally = (answers: JsonReply[]) => {
  const counts: Record<string, number> = {};
  for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
  return counts;
};

const claimsOf = (token: string) => decodeJwt(token);

describe('accounts, as its contract describes it', () => {
  const a = () => url.accounts;
  const password = 'correct horse battery';
  const user = { name: 'Contract User', email: `Contract.User.${run}@Example.com`, password };
  let token = '';
  let userId = '';

  test('register reads only name, email and password: 201, role user, email lowercased, no hash (rules 1, 2)', async () => {
    const res = await request(a(), 'POST', '/auth/register', { body: { ...user, role: 'admin', id: 'mine', password_hash: 'x' } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const text = JSON.stringify(res.body);
    assert.ok(!/password_hash|\$2[aby]\$/.test(text), text);
    const data = res.body.data ?? res.body;
    assert.equal(data.role, 'user');
    assert.equal(data.email, user.email.toLowerCase());
    assert.equal(data.name, user.name);
    assert.notEqual(data.id, 'mine');
    userId = data.id;
  });

  test('validation first (400 with a message), then a duplicate email in any case (400, the contract message)', async () => {
    for (const bad of [
      { name: 'A', email: `short.${run}@example.com`, password },
      { name: 'x'.repeat(61), email: `long.${run}@example.com`, password },
      { name: 'Valid Name', email: 'not-an-email', password },
      { name: 'Valid Name', email: `pw.${run}@example.com`, password: 'seven77' },
      { name: 'Valid Name', email: `pw73.${run}@example.com`, password: 'p'.repeat(73) },
      { email: `noname.${run}@example.com`, password },
    ]) {
      const res = await request(a(), 'POST', '/auth/register', { body: bad });
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.equal(typeof res.body.message, 'string');
    }
    const duplicate = await request(a(), 'POST', '/auth/register', { body: { ...user, email: user.email.toUpperCase() } });
    assert.equal(duplicate.status, 400);
    assert.equal(duplicate.body.message, 'An account with this email already exists');
  });

  test(`${MANY_USERS} registrations of distinct addresses from one client, sent as fast as it is answered: every one 201`, async (t) => {
    const started = Date.now();
    const answers = await many(MANY_USERS, 8, (i) =>
      request(a(), 'POST', '/auth/register', { body: { name: `Many ${i}`, email: `many-${i}.${run}@example.com`, password } }),
    );
    assert.deepEqual(tally(answers), { 201: MANY_USERS });
    t.diagnostic(`${MANY_USERS} registrations (a cost-12 bcrypt each) in ${Date.now() - started} ms`);
  });

  test(`${DUPLICATES} concurrent registrations of one address in mixed case: one 201, the rest the contract's 400`, async () => {
    const base = `race.${run}@example.com`;
    const answers = await Promise.all(
      Array.from({ length: DUPLICATES }, (_, i) =>
        request(a(), 'POST', '/auth/register', {
          body: { name: 'Racer', email: i % 2 === 0 ? base.toUpperCase() : base, password },
        }),
      ),
    );
    assert.deepEqual(tally(answers), { 201: 1, 400: DUPLICATES - 1 });
    for (const res of answers.filter((r) => r.status === 400)) assert.equal(res.body.message, 'An account with this email already exists');
  });

  test('login needs email and password (400); unknown email and wrong password get the identical 401 (rule 3)', async () => {
    assert.equal((await request(a(), 'POST', '/auth/login', { body: { email: user.email } })).status, 400);
    assert.equal((await request(a(), 'POST', '/auth/login', { body: { password } })).status, 400);
    const unknown = await request(a(), 'POST', '/auth/login', { body: { email: `nobody.${run}@example.com`, password } });
    const wrong = await request(a(), 'POST', '/auth/login', { body: { email: user.email, password: 'wrong password here' } });
    assert.equal(unknown.status, 401);
    assert.deepEqual(unknown.body, wrong.body);
    assert.equal(unknown.body.message, 'Invalid email or password');
  });

  test('repeated wrong passwords on several accounts: every one the contract 401, and each owner still gets in', async () => {
    const owners = Array.from({ length: 5 }, (_, i) => `many-${i}.${run}@example.com`);
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        owners.map((email) => request(a(), 'POST', '/auth/login', { body: { email, password: `wrong password ${round}` } })),
      );
      assert.deepEqual(tally(answers), { 401: owners.length });
    }
    for (const email of owners) assert.equal((await request(a(), 'POST', '/auth/login', { body: { email, password } })).status, 200, email);
  });

  test('the login token carries id and role, and expires after JWT_EXPIRES_IN (1h) (rule 4); /auth/me returns the caller (rule 5)', async () => {
    const res = await request(a(), 'POST', '/auth/login', { body: { email: user.email, password } });
    assert.equal(res.status, 200);
    token = res.body.data.token;
    const claims = claimsOf(token);
    assert.equal(claims.id, userId);
    assert.equal(claims.role, 'user');
    assert.equal((claims.exp as number) - (claims.iat as number), 3600);
    for (const name of Object.keys(claims)) assert.ok(['id', 'role', 'iat', 'exp'].includes(name), `unexpected claim ${name}`);
    const me = await request(a(), 'GET', '/auth/me', { token });
    assert.equal(me.status, 200);
    assert.equal((me.body.data ?? me.body).id, userId);
  });

  test('authentication errors: no header or not Bearer, then a tampered token (the contract messages)', async () => {
    for (const headers of [{}, { authorization: `Basic ${token}` }, { authorization: token }] as Array<Record<string, string>>) {
      const res = await request(a(), 'GET', '/auth/me', { headers });
      assert.equal(res.status, 401);
      assert.equal(res.body.message, 'Access denied. No token provided.');
    }
    const tampered = `${token.slice(0, -4)}${token.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    const res = await request(a(), 'GET', '/auth/me', { token: tampered });
    assert.equal(res.status, 401);
    assert.equal(res.body.message, 'Invalid or expired token.');
  });

  test('/admin/users: token checked first (401), then the role (403), then the list (rule 6)', async () => {
    assert.equal((await request(a(), 'GET', '/admin/users')).status, 401);
    const forbidden = await request(a(), 'GET', '/admin/users', { token });
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.message, 'You do not have permission to access this resource.');
    const login = await request(a(), 'POST', '/auth/login', { body: ADMIN });
    assert.equal(login.status, 200, 'the admin created from ADMIN_EMAIL and ADMIN_PASSWORD signs in');
    const list = await request(a(), 'GET', '/admin/users', { token: login.body.data.token });
    assert.equal(list.status, 200);
    const users = Array.isArray(list.body) ? list.body : list.body.data;
    assert.ok(Array.isArray(users) && users.length > 0);
    assert.ok(!/password_hash|\$2[aby]\$/.test(JSON.stringify(users)));
  });

  test('an unmatched path is a JSON 404 (rule 7)', async () => {
    const res = await request(a(), 'GET', `/no/such/path/${run}`);
    assert.equal(res.status, 404);
    assert.equal(typeof res.body, 'object');
  });
});

describe('the shortener, as its contract describes it', () => {
  const s = () => url.shortener;
  let code = '';
  const target = `https://example.com/contract/${run}`;

  test('create: 201 with the envelope; a 7-character code; short_url is BASE_URL/code (rules 1, 3)', async () => {
    const res = await request(s(), 'POST', '/api/links', { body: { url: target } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.status, 201);
    assert.equal(res.body.response, 'Created');
    assert.equal(res.body.message, 'Short link created successfully');
    code = res.body.data.code;
    assert.match(code, /^[0-9a-zA-Z]{7}$/);
    assert.equal(res.body.data.original_url, target);
    assert.ok(res.body.data.short_url.endsWith(`/${code}`), res.body.data.short_url);
    assert.equal(res.headers.get('x-ratelimit-limit'), '10');
    assert.equal(res.headers.get('x-ratelimit-remaining'), '9');
  });

  test('create validation: missing, not a string, another protocol, not a URL, over 2048 characters: 400', async () => {
    for (const body of [
      {},
      { url: 42 },
      { url: 'javascript:alert(1)' },
      { url: 'ftp://example.com/x' },
      { url: 'not a url' },
      { url: `https://example.com/${'a'.repeat(2040)}` },
    ]) {
      const res = await request(s(), 'POST', '/api/links', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
    }
  });

  test('redirect: 302 to the original URL, every simultaneous click counted; stats count nothing (rules 5, 6)', async () => {
    const clicks = await Promise.all(Array.from({ length: 20 }, () => request(s(), 'GET', `/${code}`)));
    for (const res of clicks) {
      assert.equal(res.status, 302);
      assert.equal(res.headers.get('location'), target);
    }
    for (let i = 0; i < 2; i++) {
      const stats = await request(s(), 'GET', `/api/links/${code}`);
      assert.equal(stats.status, 200);
      const data = stats.body.data ?? stats.body;
      assert.equal(data.code, code);
      assert.equal(data.original_url, target);
      assert.equal(data.clicks, 20);
      assert.ok(!Number.isNaN(Date.parse(data.createdAt)));
    }
  });

  test('unknown and malformed codes: 404 on redirect and stats (rule 4)', async () => {
    for (const path of ['/zzzzzzz', '/abc', '/%2e%2e%2fetc', '/api/links/zzzzzzz', '/api/links/abc']) {
      assert.equal((await request(s(), 'GET', path)).status, 404, path);
    }
  });

  test('the 11th create in a window from one IP: 429 with Retry-After, X-RateLimit-* and the seconds in the message; rejected ones count too', async () => {
    // One create and six invalid ones so far in this window: three more pass.
    for (let i = 0; i < 3; i++) assert.equal((await request(s(), 'POST', '/api/links', { body: { url: `${target}/${i}` } })).status, 201);
    const res = await request(s(), 'POST', '/api/links', { body: { url: `${target}/over` } });
    assert.equal(res.status, 429);
    assert.deepEqual(Object.keys(res.body).sort(), ['message', 'response', 'status']);
    assert.equal(res.body.status, 429);
    assert.equal(res.body.response, 'Too Many Requests');
    const seconds = Number(res.headers.get('retry-after'));
    assert.ok(seconds >= 1 && seconds <= 60, String(seconds));
    assert.ok(res.body.message.includes(String(seconds)), res.body.message);
    assert.equal(res.headers.get('x-ratelimit-limit'), '10');
    assert.equal(res.headers.get('x-ratelimit-remaining'), '0');
  });
});

describe('notes, as its contract describes it (through the idp npm start runs)', () => {
  const n = () => url.notes;
  const password = 'correct horse battery';
  const login = async (email: string) => {
    const res = await request(n(), 'POST', '/auth/login', { body: { email, password } });
    assert.equal(res.status, 200, `${email}: ${JSON.stringify(res.body)}`);
    return res.body as { access_token: string; refresh_token: string; expires_at: number };
  };

  test('register without email or password: 400 with the contract message (rule 1)', async () => {
    for (const body of [{}, { email: `x.${run}@example.com` }, { password }]) {
      const res = await request(n(), 'POST', '/auth/register', { body });
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, { message: 'email and password are required' });
    }
  });

  test(`${MANY_USERS} registrations from one client within a minute: every one 201 {id, email}; each can log in`, async () => {
    const answers = await many(MANY_USERS, 8, (i) =>
      request(n(), 'POST', '/auth/register', { body: { email: `notes-many-${i}.${run}@example.com`, password } }),
    );
    assert.deepEqual(tally(answers), { 201: MANY_USERS });
    for (const res of answers) assert.deepEqual(Object.keys(res.body).sort(), ['email', 'id']);
    const sessions = await many(MANY_USERS, 8, (i) =>
      request(n(), 'POST', '/auth/login', { body: { email: `notes-many-${i}.${run}@example.com`, password } }),
    );
    assert.deepEqual(tally(sessions), { 200: MANY_USERS });
  });

  test(`${DUPLICATES} concurrent registrations of one address: one 201, the rest 400 with the provider's message`, async () => {
    const email = `notes-race.${run}@example.com`;
    const answers = await Promise.all(
      Array.from({ length: DUPLICATES }, () => request(n(), 'POST', '/auth/register', { body: { email, password } })),
    );
    assert.deepEqual(tally(answers), { 201: 1, 400: DUPLICATES - 1 });
    for (const res of answers.filter((r) => r.status === 400)) assert.equal(typeof res.body.message, 'string');
  });

  test('login: the session (rule 2); unknown email and wrong password the identical 401; repeated wrong passwords on several accounts, then the owners get in', async () => {
    const session = await login(`notes-many-0.${run}@example.com`);
    assert.deepEqual(Object.keys(session).sort(), ['access_token', 'expires_at', 'refresh_token']);
    const unknown = await request(n(), 'POST', '/auth/login', { body: { email: `nobody.${run}@example.com`, password } });
    const wrong = await request(n(), 'POST', '/auth/login', {
      body: { email: `notes-many-0.${run}@example.com`, password: 'not the password' },
    });
    assert.equal(unknown.status, 401);
    assert.deepEqual(unknown.body, { message: 'Invalid email or password' });
    assert.deepEqual(wrong.body, unknown.body);
    const owners = Array.from({ length: 5 }, (_, i) => `notes-many-${i + 1}.${run}@example.com`);
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        owners.map((email) => request(n(), 'POST', '/auth/login', { body: { email, password: `wrong password ${round}` } })),
      );
      assert.deepEqual(tally(answers), { 401: owners.length });
    }
    for (const email of owners) await login(email);
  });

  test('the bearer header: missing or malformed 401 "Missing bearer token"; invalid 401 "Invalid or expired token"', async () => {
    for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer' }] as Array<Record<string, string>>) {
      const res = await request(n(), 'GET', '/notes', { headers });
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, { message: 'Missing bearer token' });
    }
    const res = await request(n(), 'GET', '/notes', { token: 'not.a.token' });
    assert.equal(res.status, 401);
    assert.deepEqual(res.body, { message: 'Invalid or expired token' });
  });

  test("notes are private: create (201, all fields, user_id filled), list (own only, newest first), delete (own 200, another's 404) (rules 3-5)", async () => {
    const alice = await login(`notes-many-10.${run}@example.com`);
    const bob = await login(`notes-many-11.${run}@example.com`);
    const first = await request(n(), 'POST', '/notes', { token: alice.access_token, body: { title: 'first', body: 'one' } });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    for (const field of ['id', 'user_id', 'title', 'body', 'created_at']) assert.ok(field in first.body, field);
    const second = await request(n(), 'POST', '/notes', { token: alice.access_token, body: { title: 'second' } });
    assert.equal(second.status, 201);
    const bobs = await request(n(), 'POST', '/notes', { token: bob.access_token, body: { title: "bob's" } });
    assert.equal(bobs.status, 201);
    assert.notEqual(bobs.body.user_id, first.body.user_id);

    const list = await request(n(), 'GET', '/notes', { token: alice.access_token });
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.map((note: { title: string }) => note.title),
      ['second', 'first'],
    );
    const theirs = await request(n(), 'DELETE', `/notes/${bobs.body.id}`, { token: alice.access_token });
    assert.equal(theirs.status, 404);
    assert.deepEqual(theirs.body, { message: 'Note not found' });
    const mine = await request(n(), 'DELETE', `/notes/${first.body.id}`, { token: alice.access_token });
    assert.equal(mine.status, 200);
    assert.deepEqual(mine.body, { message: 'Note deleted' });
    assert.equal((await request(n(), 'DELETE', `/notes/${first.body.id}`, { token: alice.access_token })).status, 404);
    assert.equal((await request(n(), 'GET', '/notes', { token: bob.access_token })).body.length, 1);
  });

  test('a note the store refuses is a 400 with its message (rule 3)', async () => {
    const session = await login(`notes-many-12.${run}@example.com`);
    const res = await request(n(), 'POST', '/notes', { token: session.access_token, body: { body: 'no title' } });
    assert.equal(res.status, 400);
    assert.equal(typeof res.body.message, 'string');
  });
});
