import assert from 'node:assert/strict';
import { test } from 'node:test';
import bcrypt from 'bcrypt';
import { accountsPasswordHasher } from '../src/accounts/passwords.js';
import { DUPLICATE_EMAIL } from '../src/accounts/service.js';
import { accountsSuite, assertError, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const PUBLIC_KEYS = ['createdAt', 'email', 'emailVerified', 'id', 'name', 'role', 'updatedAt'];

test('register answers 201 with the envelope and the public user, name trimmed, email trimmed and lowercased', async () => {
  // The production hasher, so the stored hash shows the production cost.
  const hasher = accountsPasswordHasher();
  const app = await suite.app({}, { deps: { passwordHasher: hasher } });
  app.addHook('onClose', () => hasher.close());
  const email = uniqueEmail('Alice');
  const res = await json(app, 'POST', '/auth/register', {
    name: '  Alice Liddell ',
    email: `  ${email.toUpperCase()}  `,
    password: 'correct horse',
  });
  assert.equal(res.statusCode, 201, res.body);
  const body = res.json();
  assert.deepEqual(Object.keys(body).sort(), ['data', 'message', 'response', 'status']);
  assert.equal(body.status, 201);
  assert.equal(body.response, 'Created');
  assert.equal(typeof body.message, 'string');
  const user = body.data;
  assert.deepEqual(Object.keys(user).sort(), PUBLIC_KEYS);
  assert.match(user.id, UUID);
  assert.equal(user.name, 'Alice Liddell');
  assert.equal(user.email, email.toLowerCase());
  assert.equal(user.role, 'user');
  assert.equal(user.emailVerified, false);
  assert.match(user.createdAt, ISO);
  assert.match(user.updatedAt, ISO);
  assert.ok(Math.abs(Date.parse(user.createdAt) - Date.now()) < 60_000);

  // Stored lowercased, hashed with bcrypt cost 12, never in clear.
  const { rows } = await suite.pool.query('SELECT email, role, password_hash FROM users WHERE id = $1', [user.id]);
  assert.equal(rows[0].email, email.toLowerCase());
  assert.match(rows[0].password_hash, /^\$2b\$12\$/);
  assert.ok(await bcrypt.compare('correct horse', rows[0].password_hash));
});

test('rule 1: role and every other unknown field are ignored; the user gets role user', async () => {
  const app = await suite.app();
  const res = await json(app, 'POST', '/auth/register', {
    name: 'Mallory',
    email: uniqueEmail('mallory'),
    password: 'let me be admin',
    role: 'admin',
    id: '00000000-0000-4000-8000-000000000000',
    createdAt: '2000-01-01T00:00:00.000Z',
    password_hash: '$2b$04$abcdefghijklmnopqrstuuJ0Q0Hq3K7nQYJ5m3x8QeU0vFQn4Xb2e',
  });
  assert.equal(res.statusCode, 201, res.body);
  const user = res.json().data;
  assert.equal(user.role, 'user');
  assert.notEqual(user.id, '00000000-0000-4000-8000-000000000000');
  assert.notEqual(user.createdAt, '2000-01-01T00:00:00.000Z');
  const { rows } = await suite.pool.query('SELECT role, password_hash FROM users WHERE id = $1', [user.id]);
  assert.equal(rows[0].role, 'user');
  assert.ok(await bcrypt.compare('let me be admin', rows[0].password_hash));
});

test('names are counted in characters (code points) after trimming, not UTF-16 units', async () => {
  const app = await suite.app();
  // 60 characters but 120 UTF-16 units: accepted.
  const sixty = await registerUser(app, { name: '😀'.repeat(60), email: uniqueEmail('emoji'), password: 'password-1' });
  assert.equal(sixty.name, '😀'.repeat(60));
  // 2 characters once trimmed: accepted, stored trimmed.
  const two = await registerUser(app, { name: ' 😀é ', email: uniqueEmail('short'), password: 'password-2' });
  assert.equal(two.name, '😀é');
});

const validationCases: Array<[string, unknown, string | RegExp]> = [
  ['missing name', { email: 'a@example.com', password: 'fine-passphrase' }, "body must have required property 'name'"],
  ['missing email', { name: 'Al', password: 'fine-passphrase' }, "body must have required property 'email'"],
  ['missing password', { name: 'Al', email: 'a@example.com' }, "body must have required property 'password'"],
  ['name not a string', { name: 42, email: 'a@example.com', password: 'fine-passphrase' }, 'body/name must be string'],
  ['password not a string', { name: 'Al', email: 'a@example.com', password: 12345678 }, 'body/password must be string'],
  [
    'name of one character',
    { name: 'A', email: 'a@example.com', password: 'fine-passphrase' },
    'body/name must be between 2 and 60 characters',
  ],
  [
    'name of one character once trimmed',
    { name: '   A   ', email: 'a@example.com', password: 'fine-passphrase' },
    'body/name must be between 2 and 60 characters',
  ],
  [
    'name of one emoji (two UTF-16 units)',
    { name: '😀', email: 'a@example.com', password: 'fine-passphrase' },
    'body/name must be between 2 and 60 characters',
  ],
  [
    'name of 61 characters',
    { name: 'x'.repeat(61), email: 'a@example.com', password: 'fine-passphrase' },
    'body/name must be between 2 and 60 characters',
  ],
  [
    'name of 61 emoji',
    { name: '😀'.repeat(61), email: 'a@example.com', password: 'fine-passphrase' },
    'body/name must be between 2 and 60 characters',
  ],
  ['email without @', { name: 'Al', email: 'not-an-email', password: 'fine-passphrase' }, 'body/email must be a valid email address'],
  ['email without domain dot', { name: 'Al', email: 'a@b', password: 'fine-passphrase' }, 'body/email must be a valid email address'],
  [
    'email with a space inside',
    { name: 'Al', email: 'a b@example.com', password: 'fine-passphrase' },
    'body/email must be a valid email address',
  ],
  ['empty email', { name: 'Al', email: '   ', password: 'fine-passphrase' }, 'body/email must be a valid email address'],
  [
    'email too long',
    {
      name: 'Al',
      email: `${'a'.repeat(60)}@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.${'e'.repeat(60)}.com`,
      password: 'fine-passphrase',
    },
    'body/email must be a valid email address',
  ],
  [
    'password of 7 characters',
    { name: 'Al', email: 'a@example.com', password: 'short12' },
    'body/password must be between 8 and 72 characters',
  ],
  [
    'password of 7 emoji (14 UTF-16 units)',
    { name: 'Al', email: 'a@example.com', password: '😀'.repeat(7) },
    'body/password must be between 8 and 72 characters',
  ],
  [
    'password of 73 characters',
    { name: 'Al', email: 'a@example.com', password: 'p'.repeat(73) },
    'body/password must be between 8 and 72 characters',
  ],
  [
    'password of 40 characters but 80 bytes',
    { name: 'Al', email: 'a@example.com', password: 'é'.repeat(40) },
    'body/password must be at most 72 bytes in UTF-8',
  ],
  [
    'password of 72 characters but 73 bytes',
    { name: 'Al', email: 'a@example.com', password: `${'p'.repeat(71)}é` },
    'body/password must be at most 72 bytes in UTF-8',
  ],
  [
    'password with a lone surrogate',
    { name: 'Al', email: 'a@example.com', password: 'abcdefgh\ud800' },
    'body/password must be valid Unicode text',
  ],
  ['body that is an array', [], 'body must be object'],
  // NIST SP 800-63B: a password on the list of the most common ones is refused, in any case.
  [
    'a common password',
    { name: 'Al', email: 'a@example.com', password: 'password' },
    'body/password is one of the most commonly used passwords: choose one that is harder to guess',
  ],
  [
    'a common password in other capitals',
    { name: 'Al', email: 'a@example.com', password: 'Password1' },
    'body/password is one of the most commonly used passwords: choose one that is harder to guess',
  ],
  // Every field's problem in the one answer, in field order, so a form can show them all at once.
  [
    'every field wrong',
    { name: 'A', email: 'nope', password: 'qwertyuiop' },
    'body/name must be between 2 and 60 characters; body/email must be a valid email address; body/password is one of the most commonly used passwords: choose one that is harder to guess',
  ],
];

test('validation failures are 400 in the envelope with a message naming the field', async (t) => {
  const app = await suite.app();
  for (const [label, body, message] of validationCases) {
    await t.test(label, async () => {
      assertError(await json(app, 'POST', '/auth/register', body), 400, message);
    });
  }
  const { rows } = await suite.pool.query("SELECT count(*) AS n FROM users WHERE email = 'a@example.com'");
  assert.equal(rows[0].n, 0);
});

test('a password of exactly 72 bytes is accepted', async () => {
  const app = await suite.app();
  const password = `${'p'.repeat(70)}é`; // 71 characters, 72 bytes
  const user = await registerUser(app, { name: 'Boundary', email: uniqueEmail('bytes'), password });
  const { rows } = await suite.pool.query('SELECT password_hash FROM users WHERE id = $1', [user.id]);
  assert.ok(await bcrypt.compare(password, rows[0].password_hash));
});

test('rule 2: a duplicate email in any case or padding is 400 with the duplicate message', async () => {
  const app = await suite.app();
  const email = uniqueEmail('dup');
  await registerUser(app, { name: 'First', email, password: 'password-first' });
  assertError(
    await json(app, 'POST', '/auth/register', { name: 'Second', email: `  ${email.toUpperCase()} `, password: 'password-second' }),
    400,
    DUPLICATE_EMAIL,
  );
  // Validation comes first: an invalid duplicate gets the validation message.
  assertError(
    await json(app, 'POST', '/auth/register', { name: 'Second', email, password: 'short' }),
    400,
    'body/password must be between 8 and 72 characters',
  );
  const { rows } = await suite.pool.query('SELECT name FROM users WHERE lower(email) = $1', [email]);
  assert.deepEqual(rows, [{ name: 'First' }]);
});

test('20 concurrent registrations of one address in mixed case: one 201, nineteen duplicate 400s', async () => {
  const app = await suite.app();
  const local = `race-${Date.now().toString(36)}`;
  const variants = Array.from({ length: 20 }, (_, i) =>
    `${local}@example.com`
      .split('')
      .map((c, j) => ((i >> (j % 5)) & 1 ? c.toUpperCase() : c))
      .join(''),
  );
  const responses = await Promise.all(
    variants.map((email, i) => json(app, 'POST', '/auth/register', { name: `Racer ${i}`, email, password: `password-${i}` })),
  );
  const created = responses.filter((r) => r.statusCode === 201);
  const duplicates = responses.filter((r) => r.statusCode === 400);
  assert.equal(created.length, 1, responses.map((r) => r.statusCode).join(','));
  assert.equal(duplicates.length, 19, responses.map((r) => r.body).join('\n'));
  for (const res of duplicates) assertError(res, 400, DUPLICATE_EMAIL);
  const { rows } = await suite.pool.query('SELECT count(*) AS n FROM users WHERE lower(email) = $1', [`${local}@example.com`]);
  assert.equal(rows[0].n, 1);
});

test('the unique index on lower(email) refuses a second spelling even when written directly', async () => {
  const email = uniqueEmail('index');
  await suite.pool.query("INSERT INTO users (name, email, password_hash) VALUES ('One', $1, 'x')", [email]);
  await assert.rejects(
    suite.pool.query("INSERT INTO users (name, email, password_hash) VALUES ('Two', $1, 'x')", [email]),
    (err: { code?: string; constraint?: string }) => err.code === '23505' && err.constraint === 'users_email_lower_key',
  );
});

test('malformed JSON is 400, a non-JSON content type is 415, an empty JSON body is 400, all in the envelope', async () => {
  const app = await suite.app();
  const malformed = await app.inject({
    method: 'POST',
    url: '/auth/register',
    headers: { 'content-type': 'application/json' },
    payload: '{"name": "Al",',
  });
  assertError(malformed, 400, /JSON/);
  const text = await app.inject({ method: 'POST', url: '/auth/register', headers: { 'content-type': 'text/plain' }, payload: 'name=Al' });
  assertError(text, 415, /content-type|Content-Type|media type/i);
  const form = await app.inject({
    method: 'POST',
    url: '/auth/register',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'name=Al&email=a%40example.com&password=password1',
  });
  assertError(form, 415, /.+/);
  const empty = await app.inject({ method: 'POST', url: '/auth/register', headers: { 'content-type': 'application/json' }, payload: '' });
  assertError(empty, 400, /.+/);
  const none = await app.inject({ method: 'POST', url: '/auth/register' });
  assertError(none, 400, 'body must be object');
});

test('rule 7: unmatched paths and methods get the 404 envelope from the catch-all', async () => {
  const app = await suite.app();
  assertError(await app.inject({ method: 'GET', url: '/nope' }), 404, 'Route GET /nope not found');
  assertError(await app.inject({ method: 'GET', url: '/auth/register' }), 404, /not found/);
  assertError(await app.inject({ method: 'DELETE', url: '/auth/me' }), 404, /not found/);
});

noSecretInAnyResponse();
