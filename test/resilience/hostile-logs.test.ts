// Log hygiene: each service runs as a process at LOG_LEVEL=trace, a complete flow goes through it
// (successes, failed logins, bad tokens, admin work, REST calls), and then every line it printed on
// stdout and stderr, start-up and shutdown included, is searched for every secret the flow used
// (passwords, tokens, refresh tokens, JWT secret, API keys, signing key, the REST login role's
// password) and for anything shaped like one (bcrypt hashes, JWTs, sb_ keys, PEM private keys).
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { authenticatorPassword, authenticatorRoleName } from '../../src/idp/authenticator.js';
import type { TestDatabase } from '../helpers/database.js';
import { RELAXED_RATE_LIMITS, idpDatabase } from '../helpers/idp.js';
import { type ServiceProcess, startServiceProcess } from '../helpers/process.js';
import { reportFigures } from './helpers/figures.js';
import { ensureStopped, serviceDatabase } from './helpers/services.js';
import { hmacToken } from './fuzz/jwt-forge.js';
import { findLeaks, type Secret } from './fuzz/secrets.js';
import { idpRequest, request } from '../helpers/http.js';

// Only what the test sets: nothing CI exports for the runner leaks into the services.
const BLANK = { DATABASE_URL: '', REDIS_URL: '', TRUST_PROXY: '', BASE_URL: '', NODE_OPTIONS: '', LOG_LEVEL: 'trace' };
const KEEP_ALL_OUTPUT = 50_000_000;

const suffix = randomBytes(4).toString('hex');
const SECRETS = {
  jwtSecret: `log-hygiene-jwt-secret-${randomBytes(24).toString('hex')}`,
  adminPassword: `admin-pw-${suffix}-Zx9`,
  userPassword: `user-pw-${suffix}-Qw3`,
  wrongPassword: `wrong-pw-${suffix}-Lk7`,
  idpPassword: `idp-pw-${suffix}-Mn5`,
  notesPassword: `notes-pw-${suffix}-Bv2`,
  urlPassword: `url-pw-${suffix}-Hj8`,
  publishable: `sb_publishable_loghygiene${suffix}`,
  secret: `sb_secret_loghygiene${suffix}`,
  signingKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
};

const dbs: TestDatabase[] = [];
const procs: ServiceProcess[] = [];
let dataDir = '';
let shortener: ServiceProcess;
let accounts: ServiceProcess;
let idp: ServiceProcess;
let notes: ServiceProcess;
let idpDbName = '';
/** Every token and refresh token the flows received. */
const issued: Secret[] = [];

before(async () => {
  const [shortenerDb, accountsDb, idpDb] = await Promise.all([serviceDatabase('shortener'), serviceDatabase('accounts'), idpDatabase()]);
  dbs.push(shortenerDb, accountsDb, idpDb);
  idpDbName = idpDb.name;
  dataDir = mkdtempSync(path.join(tmpdir(), 'svc-hostile-logs-'));
  const keep = { keepOutput: KEEP_ALL_OUTPUT };
  [shortener, accounts, idp] = await Promise.all([
    startServiceProcess('src/shortener/server.ts', { ...BLANK, DATABASE_URL: shortenerDb.url, BASE_URL: 'https://sho.rt' }, keep),
    startServiceProcess(
      'src/accounts/server.ts',
      { ...BLANK, DATABASE_URL: accountsDb.url, JWT_SECRET: SECRETS.jwtSecret, ADMIN_EMAIL: 'log-admin@example.com', ADMIN_PASSWORD: SECRETS.adminPassword },
      keep,
    ),
    startServiceProcess(
      'src/idp/server.ts',
      {
        ...BLANK,
        DATABASE_URL: idpDb.url,
        DATA_DIR: dataDir,
        IDP_PUBLISHABLE_KEY: SECRETS.publishable,
        IDP_SECRET_KEY: SECRETS.secret,
        IDP_SIGNING_KEY: SECRETS.signingKey,
        ...RELAXED_RATE_LIMITS,
      },
      keep,
    ),
  ]);
  procs.push(shortener, accounts, idp);
  notes = await startServiceProcess(
    'src/notes/server.ts',
    { ...BLANK, IDP_URL: idp.url, IDP_PUBLISHABLE_KEY: SECRETS.publishable, IDP_SECRET_KEY: SECRETS.secret },
    keep,
  );
  procs.push(notes);
});

after(async () => {
  for (const proc of procs) await ensureStopped(proc);
  for (const db of dbs) await db.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const ok = (res: { status: number; text: string }, status: number, what: string) => assert.equal(res.status, status, `${what}: ${res.text}`);

test('the flows complete (so the logs hold a full run of each service)', async () => {
  // accounts: register, login, profile, admin listing, failed logins, bad and tampered tokens.
  const email = `log-user-${suffix}@example.com`;
  ok(await request(accounts.url, 'POST', '/auth/register', { body: { name: 'Log User', email, password: SECRETS.userPassword } }), 201, 'register');
  const login = await request(accounts.url, 'POST', '/auth/login', { body: { email, password: SECRETS.userPassword } });
  ok(login, 200, 'login');
  const token = login.body.data.token as string;
  issued.push({ label: 'accounts user token', value: token });
  ok(await request(accounts.url, 'GET', '/auth/me', { token }), 200, 'me');
  const adminLogin = await request(accounts.url, 'POST', '/auth/login', { body: { email: 'log-admin@example.com', password: SECRETS.adminPassword } });
  ok(adminLogin, 200, 'admin login');
  issued.push({ label: 'accounts admin token', value: adminLogin.body.data.token });
  ok(await request(accounts.url, 'GET', '/admin/users', { token: adminLogin.body.data.token }), 200, 'admin list');
  ok(await request(accounts.url, 'GET', '/admin/users', { token }), 403, 'admin list as user');
  ok(await request(accounts.url, 'POST', '/auth/login', { body: { email, password: SECRETS.wrongPassword } }), 401, 'wrong password');
  ok(await request(accounts.url, 'POST', '/auth/login', { body: { email: `nobody-${suffix}@example.com`, password: SECRETS.wrongPassword } }), 401, 'unknown email');
  ok(await request(accounts.url, 'POST', '/auth/register', { body: { name: 'x', email, password: SECRETS.wrongPassword } }), 400, 'invalid register');
  const tampered = `${token.slice(0, -3)}${token.slice(-3) === 'AAA' ? 'BBB' : 'AAA'}`;
  ok(await request(accounts.url, 'GET', '/auth/me', { token: tampered }), 401, 'tampered token');
  const forged = hmacToken('HS256', { typ: 'JWT' }, { id: '00000000-0000-0000-0000-000000000000', role: 'admin', iat: 1, exp: 4_000_000_000 }, SECRETS.jwtSecret);
  issued.push({ label: 'a token signed with JWT_SECRET', value: forged });
  ok(await request(accounts.url, 'GET', '/auth/me', { token: forged }), 404, 'deleted-user token');
  ok(await request(accounts.url, 'GET', '/auth/me', { headers: { authorization: `Basic ${Buffer.from(`a:${SECRETS.userPassword}`).toString('base64')}` } }), 401, 'basic auth');

  // idp: sign-up, password login, refresh, getUser, admin create and delete, REST, a failed login.
  const idpEndpoint = { url: idp.url, publishableKey: SECRETS.publishable };
  const idpEmail = `log-idp-${suffix}@example.com`;
  const signup = await idpRequest(idpEndpoint, 'POST', '/auth/v1/signup', { body: { email: idpEmail, password: SECRETS.idpPassword } });
  ok(signup, 200, 'signup');
  const session = await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=password', { body: { email: idpEmail, password: SECRETS.idpPassword } });
  ok(session, 200, 'password login');
  const refreshed = await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=refresh_token', { body: { refresh_token: session.body.refresh_token } });
  ok(refreshed, 200, 'refresh');
  for (const [label, s] of [['signup', signup.body], ['login', session.body], ['refresh', refreshed.body]] as const) {
    issued.push({ label: `idp ${label} access token`, value: s.access_token }, { label: `idp ${label} refresh token`, value: s.refresh_token });
  }
  const access = refreshed.body.access_token as string;
  ok(await idpRequest(idpEndpoint, 'GET', '/auth/v1/user', { token: access }), 200, 'getUser');
  ok(await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=password', { body: { email: idpEmail, password: SECRETS.wrongPassword } }), 400, 'failed idp login');
  ok(await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=refresh_token', { body: { refresh_token: session.body.refresh_token } }), 200, 'refresh of the previous token');
  const created = await idpRequest(idpEndpoint, 'POST', '/auth/v1/admin/users', { apikey: SECRETS.secret, body: { email: `log-admin-made-${suffix}@example.com`, password: SECRETS.idpPassword, email_confirm: true } });
  ok(created, 200, 'admin create');
  ok(await idpRequest(idpEndpoint, 'DELETE', `/auth/v1/admin/users/${created.body.id}`, { apikey: SECRETS.secret, body: { should_soft_delete: false } }), 200, 'admin delete');
  const note = await idpRequest(idpEndpoint, 'POST', '/rest/v1/notes', { token: access, body: { title: 'log hygiene' }, headers: { prefer: 'return=representation' } });
  ok(note, 201, 'REST insert');
  ok(await idpRequest(idpEndpoint, 'GET', '/rest/v1/notes?select=*&order=created_at.desc', { token: access }), 200, 'REST select');
  ok(await idpRequest(idpEndpoint, 'DELETE', `/rest/v1/notes?id=eq.${note.body[0].id}`, { token: access }), 204, 'REST delete');
  ok(await idpRequest(idpEndpoint, 'GET', '/rest/v1/notes', { token: `${access}x` }), 401, 'REST with a bad token');
  ok(await idpRequest(idpEndpoint, 'GET', '/rest/v1/notes', { apikey: `${SECRETS.secret}x` }), 401, 'wrong API key');

  // notes: register, login, create, list, delete, a failed login, a bad token.
  const notesEmail = `log-notes-${suffix}@example.com`;
  ok(await request(notes.url, 'POST', '/auth/register', { body: { email: notesEmail, password: SECRETS.notesPassword } }), 201, 'notes register');
  const notesLogin = await request(notes.url, 'POST', '/auth/login', { body: { email: notesEmail, password: SECRETS.notesPassword } });
  ok(notesLogin, 200, 'notes login');
  issued.push({ label: 'notes access token', value: notesLogin.body.access_token }, { label: 'notes refresh token', value: notesLogin.body.refresh_token });
  const notesToken = notesLogin.body.access_token as string;
  const created2 = await request(notes.url, 'POST', '/notes', { token: notesToken, body: { title: 'hygiene', body: 'text' } });
  ok(created2, 201, 'notes create');
  ok(await request(notes.url, 'GET', '/notes', { token: notesToken }), 200, 'notes list');
  ok(await request(notes.url, 'DELETE', `/notes/${created2.body.id}`, { token: notesToken }), 200, 'notes delete');
  ok(await request(notes.url, 'POST', '/auth/login', { body: { email: notesEmail, password: SECRETS.wrongPassword } }), 401, 'notes failed login');
  ok(await request(notes.url, 'GET', '/notes', { token: `${notesToken.slice(0, -2)}xx` }), 401, 'notes bad token');

  // shortener: a URL with credentials (refused by the URL rule, the body still reaches the
  // service), then one carrying the secret in its query, redirected (Location) and shown in stats.
  ok(await request(shortener.url, 'POST', '/api/links', { body: { url: `https://alice:${SECRETS.urlPassword}@example.com/private` } }), 400, 'create with credentials');
  const link = await request(shortener.url, 'POST', '/api/links', { body: { url: `https://example.com/private?token=${SECRETS.urlPassword}` } });
  ok(link, 201, 'create');
  const redirect = await request(shortener.url, 'GET', `/${link.body.data.code}`);
  ok(redirect, 302, 'redirect');
  ok(await request(shortener.url, 'GET', `/api/links/${link.body.data.code}`), 200, 'stats');
});

test('no line any service printed (stdout and stderr, trace level, start to shutdown) holds a secret', async (t) => {
  // Shutdown lines too: stop each process (SIGTERM) so everything it wrote is flushed.
  for (const proc of [notes, shortener, accounts, idp]) assert.equal(await proc.stop(), 0);
  const roleName = authenticatorRoleName(idpDbName);
  const secrets: Secret[] = [
    { label: 'JWT_SECRET', value: SECRETS.jwtSecret },
    { label: 'ADMIN_PASSWORD', value: SECRETS.adminPassword },
    { label: 'a user password', value: SECRETS.userPassword },
    { label: 'a wrong password', value: SECRETS.wrongPassword },
    { label: 'an idp password', value: SECRETS.idpPassword },
    { label: 'a notes password', value: SECRETS.notesPassword },
    { label: 'a password inside a shortened URL (its credentials, then its query)', value: SECRETS.urlPassword },
    { label: 'IDP_PUBLISHABLE_KEY', value: SECRETS.publishable },
    { label: 'IDP_SECRET_KEY', value: SECRETS.secret },
    { label: 'IDP_SIGNING_KEY', value: SECRETS.signingKey.split('\n')[1]! },
    { label: 'the REST login role password', value: authenticatorPassword(SECRETS.secret, roleName) },
    ...issued,
    ...issued.filter((s) => s.value.split('.').length === 3).map((s) => ({ label: `${s.label} (signature)`, value: s.value.split('.')[2]! })),
  ];
  const lines: Record<string, number> = {};
  const problems: string[] = [];
  for (const [name, proc] of Object.entries({ shortener, accounts, idp, notes })) {
    const output = proc.output();
    lines[name] = output.split('\n').filter(Boolean).length;
    assert.ok(output.length < KEEP_ALL_OUTPUT, `${name}: output was truncated, the scan would be incomplete`);
    assert.ok(/"level":30.*"msg":"incoming request"/.test(output), `${name} did not log its requests`);
    problems.push(...findLeaks(output, secrets).map((p) => `${name}: ${p}`));
  }
  // The scanner itself finds what it is asked to find (a scan that cannot fail proves nothing).
  assert.equal(findLeaks(`{"msg":"x ${SECRETS.userPassword}"}`, secrets).length, 1);
  assert.equal(findLeaks(`{"msg":"${issued[0]!.value}"}`, []).length, 1);
  reportFigures(t, 'log hygiene at trace level', { linesScanned: lines, secretsSearched: secrets.length, leaks: problems.length });
  assert.deepEqual(problems, []);
});
