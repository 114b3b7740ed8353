import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import bcrypt from 'bcrypt';
import { decodeJwt } from 'jose';
import { type SeedLog, seedAdmin } from '../src/accounts/admin-seed.js';
import { NO_PERMISSION, NO_TOKEN } from '../src/accounts/auth.js';
import { type PublicUser, UsersRepository } from '../src/accounts/repository.js';
import type { App } from '../src/kit/http/app.js';
import { LogCapture } from './helpers/logs.js';
import {
  type Response,
  TEST_SECRET,
  accountsDatabase,
  accountsSuite,
  assertError,
  bearer,
  json,
  loginToken,
  noSecretInAnyResponse,
  registerUser,
  responseBodies,
} from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { spawnEntry, startServiceProcess } from './helpers/process.js';

const suite = accountsSuite();
const ADMIN_PASSWORD = 'admin password 1';
const USER_PASSWORD = 'user password 1';
let app: App;
let logs: LogCapture;
let adminEmail: string;
let adminToken: string;
let user: PublicUser;
let userToken: string;

function recordingLog() {
  const entries: Array<{ level: 'info' | 'warn'; fields: object; msg: string }> = [];
  const log: SeedLog = {
    info: (fields, msg) => entries.push({ level: 'info', fields, msg }),
    warn: (fields, msg) => entries.push({ level: 'warn', fields, msg }),
  };
  return { log, entries };
}

const countAdmins = async () => (await suite.pool.query("SELECT count(*) AS n FROM users WHERE role = 'admin'")).rows[0].n as number;

before(async () => {
  await suite.ready();
  logs = new LogCapture();
  app = await suite.app({ LOG_LEVEL: 'info' }, { logs });
  adminEmail = uniqueEmail('admin');
  const { log } = recordingLog();
  assert.equal(await seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: adminEmail, ADMIN_PASSWORD }, log), 'created');
  adminToken = await loginToken(app, adminEmail, ADMIN_PASSWORD);
  user = await registerUser(app, { name: 'Plain User', email: uniqueEmail('plain'), password: USER_PASSWORD });
  userToken = await loginToken(app, user.email, USER_PASSWORD);
});

test('seed: with ADMIN_EMAIL and ADMIN_PASSWORD an admin exists and can log in; its token says role admin', async () => {
  const { rows } = await suite.pool.query('SELECT role, password_hash, email_verified_at FROM users WHERE email = $1', [adminEmail]);
  assert.equal(rows[0].role, 'admin');
  // The operator chose the address: the admin can log in under REQUIRE_EMAIL_VERIFICATION too.
  assert.ok(rows[0].email_verified_at instanceof Date);
  assert.match(rows[0].password_hash, /^\$2b\$12\$/);
  assert.equal(decodeJwt(adminToken).role, 'admin');
});

test('seed: two instances starting at once create exactly one admin', async () => {
  const email = uniqueEmail('twin-admin');
  const outcomes = await Promise.all(
    [1, 2].map(() => seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: email, ADMIN_PASSWORD }, recordingLog().log)),
  );
  assert.deepEqual(outcomes.sort(), ['created', 'exists']);
  const { rows } = await suite.pool.query('SELECT role FROM users WHERE email = $1', [email]);
  assert.deepEqual(rows, [{ role: 'admin' }]);
});

test('seed: an existing account with ADMIN_EMAIL is left as it is (role and password), and that is logged', async () => {
  const email = uniqueEmail('taken');
  const existing = await registerUser(app, { name: 'Early Bird', email, password: 'early bird pw' });
  const before = (await suite.pool.query('SELECT * FROM users WHERE id = $1', [existing.id])).rows[0];
  const { log, entries } = recordingLog();
  assert.equal(await seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: email.toUpperCase(), ADMIN_PASSWORD }, log), 'exists');
  const after = (await suite.pool.query('SELECT * FROM users WHERE id = $1', [existing.id])).rows[0];
  assert.deepEqual(after, before);
  assert.equal(after.role, 'user');
  assert.ok(await bcrypt.compare('early bird pw', after.password_hash));
  assert.ok(
    entries.some((e) => e.level === 'warn' && /already exists/.test(e.msg) && (e.fields as { userId?: string }).userId === existing.id),
  );
  // Started again with the admin's own address: left alone too, logged at info.
  const again = recordingLog();
  assert.equal(
    await seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: adminEmail, ADMIN_PASSWORD: 'another password' }, again.log),
    'exists',
  );
  assert.ok(again.entries.some((e) => e.level === 'info' && /already exists/.test(e.msg)));
  assert.equal((await json(app, 'POST', '/auth/login', { email: adminEmail, password: 'another password' })).statusCode, 401);
});

test('seed: with either variable missing no admin is created; a warning only when there is no admin at all; never a default password', async () => {
  const adminsBefore = await countAdmins();
  for (const config of [
    { ADMIN_EMAIL: uniqueEmail('half'), ADMIN_PASSWORD: undefined },
    { ADMIN_EMAIL: undefined, ADMIN_PASSWORD },
    { ADMIN_EMAIL: undefined, ADMIN_PASSWORD: undefined },
  ]) {
    const { log, entries } = recordingLog();
    assert.equal(await seedAdmin(new UsersRepository(suite.pool), config, log), 'skipped');
    assert.equal(entries.length, 1);
    // A restart without the variables after the admin exists is normal, and is not told that no admin exists.
    assert.equal(entries[0]!.level, adminsBefore > 0 ? 'info' : 'warn');
    assert.match(
      entries[0]!.msg,
      adminsBefore > 0
        ? new RegExp(`ADMIN_EMAIL and ADMIN_PASSWORD are not both set: no admin created; ${adminsBefore} admin`)
        : /there is no admin account/,
    );
  }
  assert.equal(await countAdmins(), adminsBefore);
});

test('the server process on a database without an admin warns that there is none; once one exists a restart does not', async () => {
  const db = await accountsDatabase();
  const start = (admin: Record<string, string>) =>
    startServiceProcess('src/accounts/server.ts', {
      DATABASE_URL: db.url,
      JWT_SECRET: TEST_SECRET,
      LOG_LEVEL: 'info',
      ADMIN_EMAIL: '',
      ADMIN_PASSWORD: '',
      ...admin,
    });
  const NONE = /ADMIN_EMAIL and ADMIN_PASSWORD are not both set, and there is no admin account/;
  try {
    const first = await start({});
    assert.equal(await first.stop(), 0);
    assert.match(first.output(), NONE);
    const seeding = await start({ ADMIN_EMAIL: uniqueEmail('restart-admin'), ADMIN_PASSWORD });
    assert.equal(await seeding.stop(), 0);
    assert.match(seeding.output(), /admin_created/);
    const restart = await start({});
    assert.equal(await restart.stop(), 0);
    assert.doesNotMatch(restart.output(), NONE);
    const skipped = restart
      .output()
      .split('\n')
      .find((line) => line.includes('admin_seed_skipped'));
    assert.ok(skipped, restart.output());
    const entry = JSON.parse(skipped) as { level: number; msg: string };
    assert.equal(entry.level, 30, 'info, not a warning');
    assert.match(entry.msg, /no admin created; 1 admin account\(s\) exist/);
  } finally {
    await db.drop();
  }
});

test('seed: an admin password that breaks the password rules refuses to start', async () => {
  const email = uniqueEmail('weak-admin');
  for (const password of ['short', 'p'.repeat(73), 'é'.repeat(40)]) {
    await assert.rejects(
      seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: email, ADMIN_PASSWORD: password }, recordingLog().log),
      /ADMIN_PASSWORD/,
    );
  }
  await assert.rejects(
    seedAdmin(new UsersRepository(suite.pool), { ADMIN_EMAIL: 'not-an-email', ADMIN_PASSWORD }, recordingLog().log),
    /ADMIN_EMAIL/,
  );
  assert.equal((await suite.pool.query('SELECT count(*) AS n FROM users WHERE email = $1', [email])).rows[0].n, 0);
});

test('the server process seeds the admin at start, serves it over real HTTP and exits 0 on SIGTERM', async () => {
  const email = uniqueEmail('process-admin');
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(REDIS_URL|ADMIN_|JWT_)/.test(k)) env[k] = v;
  Object.assign(env, {
    DATABASE_URL: suite.db.url,
    PORT: '0',
    HOST: '127.0.0.1',
    JWT_SECRET: TEST_SECRET,
    ADMIN_EMAIL: email,
    ADMIN_PASSWORD,
    LOG_LEVEL: 'info',
  });
  const server = spawnEntry('src/accounts/server.ts', env);
  const { child, exited, stdout } = server;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start: ${stdout()}`)), 30_000);
      child.stdout!.on('data', () => {
        const match = /listening on (http:\/\/[\d.:a-z]+)/.exec(stdout());
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      void exited.then(() => reject(new Error(`server exited: ${stdout()}`)));
    });
    assert.match(stdout(), /admin_created/);
    const res = await fetch(`${url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: ADMIN_PASSWORD }),
    });
    const text = await res.text();
    responseBodies.push(text);
    assert.equal(res.status, 200, text);
    assert.equal(JSON.parse(text).data.user.role, 'admin');
  } finally {
    child.kill('SIGTERM');
  }
  assert.equal(await exited, 0);
  assert.ok(!stdout().includes(ADMIN_PASSWORD), 'the admin password reached the log');
});

test('rule 6: /admin/users without a token is 401, with an invalid token 401, with a user token 403', async () => {
  assertError(await app.inject({ method: 'GET', url: '/admin/users' }), 401, NO_TOKEN);
  assertError(await app.inject({ method: 'GET', url: '/admin/users', headers: bearer(`${userToken}x`) }), 401, 'Invalid or expired token.');
  const denied = await app.inject({ method: 'GET', url: '/admin/users', headers: bearer(userToken) });
  assertError(denied, 403, NO_PERMISSION);
  assert.equal(denied.json().response, 'Forbidden');
  // Token first, role second, validation last: a user with a bad query still gets 403.
  assertError(await app.inject({ method: 'GET', url: '/admin/users?per_page=0', headers: bearer(userToken) }), 403, NO_PERMISSION);
});

test('every 403 is logged with the user id and the IP, never the token', async () => {
  await app.inject({ method: 'GET', url: '/admin/users', headers: bearer(userToken) });
  const denial = logs.lines().find((l) => l.event === 'access_denied');
  assert.ok(denial, logs.text());
  assert.equal(denial.userId, user.id);
  assert.equal(denial.ip, '127.0.0.1');
  assert.ok(!logs.text().includes(userToken));
});

test('rule 6: an admin gets 200 with a bare array of public users', async () => {
  const res = await app.inject({ method: 'GET', url: '/admin/users', headers: bearer(adminToken) });
  assert.equal(res.statusCode, 200, res.body);
  const list = res.json() as PublicUser[];
  assert.ok(Array.isArray(list));
  for (const entry of list)
    assert.deepEqual(Object.keys(entry).sort(), ['createdAt', 'email', 'emailVerified', 'id', 'name', 'role', 'updatedAt']);
  assert.deepEqual(
    list.find((u) => u.id === user.id),
    user,
  );
  assert.equal(list.find((u) => u.email === adminEmail)?.role, 'admin');
  assert.equal(res.headers['x-total-count'], String(list.length));
});

function parseLinks(header: unknown): Record<string, { page: number; perPage: number }> {
  assert.equal(typeof header, 'string');
  const links: Record<string, { page: number; perPage: number }> = {};
  for (const part of (header as string).split(', ')) {
    const match = /^<\/admin\/users\?page=(\d+)&per_page=(\d+)>; rel="(first|prev|next|last)"$/.exec(part);
    assert.ok(match, `unexpected link: ${part}`);
    links[match[3]!] = { page: Number(match[1]), perPage: Number(match[2]) };
  }
  return links;
}

test('pagination: default 50 per page, stable order (created_at then id), X-Total-Count and Link', async () => {
  // Three rows per minute: equal created_at values are ordered by id.
  await suite.pool.query(`
    INSERT INTO users (name, email, password_hash, created_at, updated_at)
    SELECT 'Seeded ' || i, 'seeded-' || i || '@example.com', 'not-a-hash',
           timestamptz '2020-01-01 00:00:00Z' + (i / 3) * interval '1 minute',
           timestamptz '2020-01-01 00:00:00Z' + (i / 3) * interval '1 minute'
    FROM generate_series(1, 60) AS i`);
  const all = await app.inject({ method: 'GET', url: '/admin/users?per_page=1000', headers: bearer(adminToken) });
  assert.equal(all.statusCode, 200, all.body);
  const everyone = all.json() as PublicUser[];
  const total = Number(all.headers['x-total-count']);
  assert.equal(everyone.length, total);
  assert.ok(total >= 62);
  const expected = [...everyone].sort((a, b) =>
    a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1,
  );
  assert.deepEqual(
    everyone.map((u) => u.id),
    expected.map((u) => u.id),
  );
  assert.deepEqual(parseLinks(all.headers.link), { first: { page: 1, perPage: 1000 }, last: { page: 1, perPage: 1000 } });

  const firstPage = await app.inject({ method: 'GET', url: '/admin/users', headers: bearer(adminToken) });
  assert.equal(firstPage.json().length, 50);
  assert.equal(firstPage.headers['x-total-count'], String(total));
  const lastPage = Math.ceil(total / 50);
  assert.deepEqual(parseLinks(firstPage.headers.link), {
    first: { page: 1, perPage: 50 },
    next: { page: 2, perPage: 50 },
    last: { page: lastPage, perPage: 50 },
  });

  // Walking the pages by their next links gives everyone once, in order.
  const walked: string[] = [];
  let next: string | undefined = '/admin/users?page=1&per_page=7';
  let pages = 0;
  while (next) {
    const page: Response = await app.inject({ method: 'GET', url: next, headers: bearer(adminToken) });
    assert.equal(page.statusCode, 200);
    const links = parseLinks(page.headers.link);
    pages += 1;
    if (pages > 1) assert.equal(links.prev?.page, pages - 1);
    else assert.equal(links.prev, undefined);
    assert.equal(links.last?.page, Math.ceil(total / 7));
    walked.push(...(page.json() as PublicUser[]).map((u) => u.id));
    next = links.next ? `/admin/users?page=${links.next.page}&per_page=${links.next.perPage}` : undefined;
  }
  assert.equal(pages, Math.ceil(total / 7));
  assert.deepEqual(
    walked,
    expected.map((u) => u.id),
  );

  const beyond = await app.inject({ method: 'GET', url: '/admin/users?page=99&per_page=50', headers: bearer(adminToken) });
  assert.equal(beyond.statusCode, 200);
  assert.deepEqual(beyond.json(), []);
  assert.deepEqual(parseLinks(beyond.headers.link), {
    first: { page: 1, perPage: 50 },
    prev: { page: lastPage, perPage: 50 },
    last: { page: lastPage, perPage: 50 },
  });
});

test('pagination parameters out of range are 400 in the envelope', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['page=0', /querystring\/page must be >= 1/],
    ['page=-3', /querystring\/page must be >= 1/],
    ['page=abc', /querystring\/page must be integer/],
    ['page=1.5', /querystring\/page must be integer/],
    ['page=1000001', /querystring\/page must be <= 1000000/],
    ['per_page=0', /querystring\/per_page must be >= 1/],
    ['per_page=1001', /querystring\/per_page must be <= 1000/],
    ['per_page=ten', /querystring\/per_page must be integer/],
    // Coerced to ±Infinity, which Ajv exempts from minimum/maximum: the kit's validator refuses it.
    ['page=1e400', /querystring\/page must be a finite number/],
    ['per_page=-1e400', /querystring\/per_page must be a finite number/],
  ];
  for (const [query, message] of cases) {
    await t.test(query, async () => {
      assertError(await app.inject({ method: 'GET', url: `/admin/users?${query}`, headers: bearer(adminToken) }), 400, message);
    });
  }
  assert.equal(
    (await app.inject({ method: 'GET', url: '/admin/users?per_page=1000&page=1', headers: bearer(adminToken) })).statusCode,
    200,
  );
});

/** The searched listing as the admin sees it: status 200, the users, the total and the links, each with its q. */
async function search(query: string) {
  const res = await app.inject({ method: 'GET', url: `/admin/users?${query}`, headers: bearer(adminToken) });
  assert.equal(res.statusCode, 200, res.body);
  const links: Record<string, { page: number; perPage: number; q: string }> = {};
  for (const part of String(res.headers.link).split(', ')) {
    const match = /^<\/admin\/users\?page=(\d+)&per_page=(\d+)&q=([^&>]*)>; rel="(first|prev|next|last)"$/.exec(part);
    assert.ok(match, `unexpected link: ${part}`);
    links[match[4]!] = { page: Number(match[1]), perPage: Number(match[2]), q: decodeURIComponent(match[3]!) };
  }
  return { users: res.json() as PublicUser[], total: Number(res.headers['x-total-count']), links };
}

test('search: q matches part of the email or of the name, in any case, and returns public users only', async () => {
  const tag = `srch${Date.now()}`;
  const byEmail = await registerUser(app, { name: 'Quiet Person', email: uniqueEmail(`${tag}-mail`), password: USER_PASSWORD });
  const byName = await registerUser(app, { name: `Zelda ${tag.toUpperCase()} Quux`, email: uniqueEmail('other'), password: USER_PASSWORD });

  const emailHit = await search(`q=${tag}-MAIL`);
  assert.deepEqual(emailHit.users, [byEmail]);
  assert.equal(emailHit.total, 1);

  const nameHit = await search(`q=zelda%20${tag}`);
  assert.deepEqual(nameHit.users, [byName]);

  // Both rows hold the tag (one in the email, one in the name), oldest first.
  const both = await search(`q=${tag.toUpperCase()}`);
  assert.deepEqual(
    both.users.map((u) => u.id),
    [byEmail.id, byName.id],
  );
  assert.equal(both.total, 2);
  for (const entry of both.users)
    assert.deepEqual(Object.keys(entry).sort(), ['createdAt', 'email', 'emailVerified', 'id', 'name', 'role', 'updatedAt']);

  // Surrounding spaces are trimmed; a text nobody holds is an empty page, not an error.
  assert.deepEqual((await search(`q=%20%20${tag}-mail%20`)).users, [byEmail]);
  const none = await search('q=nobody-holds-this-text');
  assert.deepEqual(none.users, []);
  assert.equal(none.total, 0);
});

test('search: %, _ and \\ in q match themselves, not as LIKE wildcards', async () => {
  const tag = `wild${Date.now()}`;
  const percent = await registerUser(app, { name: `${tag} 100% sure`, email: uniqueEmail(`${tag}-p`), password: USER_PASSWORD });
  const underscore = await registerUser(app, { name: `${tag} a_b`, email: uniqueEmail(`${tag}-u`), password: USER_PASSWORD });
  const backslash = await registerUser(app, { name: `${tag} c\\d`, email: uniqueEmail(`${tag}-b`), password: USER_PASSWORD });
  // Decoys a wildcard would match: "100x sure", "aXb", "cd".
  await registerUser(app, { name: `${tag} 100x sure`, email: uniqueEmail(`${tag}-dp`), password: USER_PASSWORD });
  await registerUser(app, { name: `${tag} aXb`, email: uniqueEmail(`${tag}-du`), password: USER_PASSWORD });
  await registerUser(app, { name: `${tag} cd`, email: uniqueEmail(`${tag}-db`), password: USER_PASSWORD });

  assert.deepEqual((await search(`q=${encodeURIComponent('100% sure')}`)).users, [percent]);
  assert.deepEqual((await search(`q=${encodeURIComponent(`${tag} a_b`)}`)).users, [underscore]);
  assert.deepEqual((await search(`q=${encodeURIComponent('c\\d')}`)).users, [backslash]);
  // A lone % or _ is a character to find, not "everything".
  const lonePercent = await search(`q=${encodeURIComponent('%')}`);
  assert.ok(
    lonePercent.users.every((u) => u.name.includes('%') || u.email.includes('%')),
    JSON.stringify(lonePercent.users),
  );
  assert.ok(lonePercent.users.some((u) => u.id === percent.id));
  assert.equal((await search(`q=${encodeURIComponent(tag)}`)).total, 6);
});

test('search: a filtered set is paged, X-Total-Count counts it and every Link keeps q, URL-encoded', async () => {
  const tag = `page${Date.now()}`;
  await suite.pool.query(
    `INSERT INTO users (name, email, password_hash, created_at, updated_at)
     SELECT 'Paged & ' || $1 || ' ' || i, $1 || '-' || i || '@example.com', 'not-a-hash',
            timestamptz '2021-01-01 00:00:00Z' + i * interval '1 minute', timestamptz '2021-01-01 00:00:00Z'
     FROM generate_series(1, 12) AS i`,
    [tag],
  );
  const q = `paged & ${tag}`;
  const first = await search(`q=${encodeURIComponent(q)}&per_page=5`);
  assert.equal(first.total, 12);
  assert.deepEqual(
    first.users.map((u) => u.name),
    [1, 2, 3, 4, 5].map((i) => `Paged & ${tag} ${i}`),
  );
  assert.deepEqual(first.links, {
    first: { page: 1, perPage: 5, q },
    next: { page: 2, perPage: 5, q },
    last: { page: 3, perPage: 5, q },
  });
  // The raw header holds q encoded: the & and the spaces cannot break the link apart.
  const raw = await app.inject({ method: 'GET', url: `/admin/users?q=${encodeURIComponent(q)}&per_page=5`, headers: bearer(adminToken) });
  assert.ok(String(raw.headers.link).includes(`&q=${encodeURIComponent(q)}>`), String(raw.headers.link));

  // Walking the next links gives the twelve once, in order.
  const walked: string[] = [];
  let next: string | undefined = `q=${encodeURIComponent(q)}&per_page=5&page=1`;
  while (next) {
    const page = await search(next);
    assert.equal(page.total, 12);
    walked.push(...page.users.map((u) => u.name));
    const link = page.links.next;
    next = link ? `q=${encodeURIComponent(link.q)}&per_page=${link.perPage}&page=${link.page}` : undefined;
  }
  assert.deepEqual(
    walked,
    Array.from({ length: 12 }, (_, i) => `Paged & ${tag} ${i + 1}`),
  );

  const last = await search(`q=${encodeURIComponent(q)}&per_page=5&page=3`);
  assert.equal(last.users.length, 2);
  assert.deepEqual(last.links.prev, { page: 2, perPage: 5, q });
  assert.equal(last.links.next, undefined);

  // Without q the links stay as they were: no q in them.
  const bare = await app.inject({ method: 'GET', url: '/admin/users?per_page=5', headers: bearer(adminToken) });
  assert.ok(!String(bare.headers.link).includes('q='));
});

test('search: a bad q is 400 in the envelope and changes nothing', async (t) => {
  const snapshot = async () => ({
    users: (await suite.pool.query('SELECT * FROM users ORDER BY id')).rows,
    audit: (await suite.pool.query('SELECT count(*)::int AS n FROM audit_log')).rows[0].n,
  });
  const before = await snapshot();
  const message = /querystring\/q must be 1 to 200 characters after trimming, without control characters/;
  const cases: Array<[string, string, RegExp]> = [
    ['empty', 'q=', message],
    ['only spaces', 'q=%20%20%20', message],
    ['201 characters', `q=${'a'.repeat(201)}`, message],
    ['a NUL', 'q=a%00b', message],
    ['a newline', 'q=a%0Ab', message],
    ['a DEL', 'q=a%7Fb', message],
    ['a C1 control', 'q=a%C2%85b', message],
    ['twice', 'q=a&q=b', /querystring\/q must be string/],
  ];
  for (const [name, query, expected] of cases) {
    await t.test(name, async () => {
      assertError(await app.inject({ method: 'GET', url: `/admin/users?${query}`, headers: bearer(adminToken) }), 400, expected);
    });
  }
  // 200 characters after trimming is the longest allowed, padding included.
  assert.equal(
    (await app.inject({ method: 'GET', url: `/admin/users?q=%20${'a'.repeat(200)}%20`, headers: bearer(adminToken) })).statusCode,
    200,
  );
  assert.deepEqual(await snapshot(), before);
});

test('search: token first, role second, q last — 401 and 403 come before a bad q', async () => {
  assertError(await app.inject({ method: 'GET', url: '/admin/users?q=' }), 401, NO_TOKEN);
  assertError(
    await app.inject({ method: 'GET', url: '/admin/users?q=%00', headers: bearer(`${userToken}x`) }),
    401,
    'Invalid or expired token.',
  );
  assertError(await app.inject({ method: 'GET', url: '/admin/users?q=', headers: bearer(userToken) }), 403, NO_PERMISSION);
  assertError(await app.inject({ method: 'GET', url: '/admin/users?q=plain', headers: bearer(userToken) }), 403, NO_PERMISSION);
});

test('an admin is still refused by /auth/register role games: a new registration with role admin is a user', async () => {
  const res = await json(app, 'POST', '/auth/register', {
    name: 'Sneaky',
    email: uniqueEmail('sneaky'),
    password: 'sneaky password',
    role: 'admin',
  });
  assert.equal(res.statusCode, 201);
  const token = await loginToken(app, res.json().data.email, 'sneaky password');
  assertError(await app.inject({ method: 'GET', url: '/admin/users', headers: bearer(token) }), 403, NO_PERMISSION);
});

noSecretInAnyResponse();
