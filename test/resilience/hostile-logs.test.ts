// Log hygiene: each service runs as a process at LOG_LEVEL=trace, a complete flow goes through it
// (successes, failed logins, bad tokens, admin work, REST calls), and then every line it printed on
// stdout and stderr, start-up and shutdown included, is searched for every secret the flow used
// (passwords, tokens, refresh tokens, JWT secret, API keys, signing key, the REST login role's
// password) and for anything shaped like one (bcrypt hashes, JWTs, sb_ keys, PEM private keys).
// Accounts and the idp send mail to a real SMTP server, so the mail flows (reset, verification,
// recovery, invitation, generated links, address change) run too, and every mailed token and link
// is searched for as well.
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
import { ensureStopped } from './helpers/services.js';
import { hmacToken } from './fuzz/jwt-forge.js';
import { findLeaks, type Secret } from './fuzz/secrets.js';
import { idpRequest, request } from '../helpers/http.js';
import { shortenerDatabase } from '../helpers/shortener.js';
import { accountsDatabase } from '../helpers/accounts.js';
import { linkIn, type ReceivedMail, startSmtp, type TestSmtp } from '../helpers/smtp.js';

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
  resetPassword: `reset-pw-${suffix}-Tg4`,
  notesNewPassword: `notes-new-pw-${suffix}-Rd6`,
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
let smtp: TestSmtp;
/** Every token and refresh token the flows received. */
const issued: Secret[] = [];

before(async () => {
  const [shortenerDb, accountsDb, idpDb] = await Promise.all([shortenerDatabase(), accountsDatabase(), idpDatabase()]);
  dbs.push(shortenerDb, accountsDb, idpDb);
  idpDbName = idpDb.name;
  dataDir = mkdtempSync(path.join(tmpdir(), 'svc-hostile-logs-'));
  const keep = { keepOutput: KEEP_ALL_OUTPUT };
  smtp = await startSmtp();
  [shortener, accounts, idp] = await Promise.all([
    startServiceProcess('src/shortener/server.ts', { ...BLANK, DATABASE_URL: shortenerDb.url, BASE_URL: 'https://sho.rt' }, keep),
    startServiceProcess(
      'src/accounts/server.ts',
      {
        ...BLANK,
        DATABASE_URL: accountsDb.url,
        JWT_SECRET: SECRETS.jwtSecret,
        ADMIN_EMAIL: 'log-admin@example.com',
        ADMIN_PASSWORD: SECRETS.adminPassword,
        SMTP_URL: smtp.url,
      },
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
        // Sign-up then password sign-in, as under npm start (the idp's own default confirms by mail).
        IDP_AUTOCONFIRM: 'true',
        SMTP_URL: smtp.url,
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
  await smtp?.close();
});

const ok = (res: { status: number; text: string }, status: number, what: string) =>
  assert.equal(res.status, status, `${what}: ${res.text}`);

test('the flows complete (so the logs hold a full run of each service)', async () => {
  // accounts: register, login, profile, admin listing, failed logins, bad and tampered tokens.
  const email = `log-user-${suffix}@example.com`;
  ok(
    await request(accounts.url, 'POST', '/auth/register', { body: { name: 'Log User', email, password: SECRETS.userPassword } }),
    201,
    'register',
  );
  const login = await request(accounts.url, 'POST', '/auth/login', { body: { email, password: SECRETS.userPassword } });
  ok(login, 200, 'login');
  const token = login.body.data.token as string;
  issued.push({ label: 'accounts user token', value: token });
  ok(await request(accounts.url, 'GET', '/auth/me', { token }), 200, 'me');
  const adminLogin = await request(accounts.url, 'POST', '/auth/login', {
    body: { email: 'log-admin@example.com', password: SECRETS.adminPassword },
  });
  ok(adminLogin, 200, 'admin login');
  issued.push({ label: 'accounts admin token', value: adminLogin.body.data.token });
  ok(await request(accounts.url, 'GET', '/admin/users', { token: adminLogin.body.data.token }), 200, 'admin list');
  ok(await request(accounts.url, 'GET', '/admin/users', { token }), 403, 'admin list as user');
  ok(await request(accounts.url, 'POST', '/auth/login', { body: { email, password: SECRETS.wrongPassword } }), 401, 'wrong password');
  ok(
    await request(accounts.url, 'POST', '/auth/login', {
      body: { email: `nobody-${suffix}@example.com`, password: SECRETS.wrongPassword },
    }),
    401,
    'unknown email',
  );
  ok(
    await request(accounts.url, 'POST', '/auth/register', { body: { name: 'x', email, password: SECRETS.wrongPassword } }),
    400,
    'invalid register',
  );
  const tampered = `${token.slice(0, -3)}${token.slice(-3) === 'AAA' ? 'BBB' : 'AAA'}`;
  ok(await request(accounts.url, 'GET', '/auth/me', { token: tampered }), 401, 'tampered token');
  const forged = hmacToken(
    'HS256',
    { typ: 'JWT' },
    { id: '00000000-0000-0000-0000-000000000000', role: 'admin', iat: 1, exp: 4_000_000_000 },
    SECRETS.jwtSecret,
  );
  issued.push({ label: 'a token signed with JWT_SECRET', value: forged });
  ok(await request(accounts.url, 'GET', '/auth/me', { token: forged }), 404, 'deleted-user token');
  ok(
    await request(accounts.url, 'GET', '/auth/me', {
      headers: { authorization: `Basic ${Buffer.from(`a:${SECRETS.userPassword}`).toString('base64')}` },
    }),
    401,
    'basic auth',
  );

  // idp: sign-up, password login, refresh, getUser, admin create and delete, REST, a failed login.
  const idpEndpoint = { url: idp.url, publishableKey: SECRETS.publishable };
  const idpEmail = `log-idp-${suffix}@example.com`;
  const signup = await idpRequest(idpEndpoint, 'POST', '/auth/v1/signup', { body: { email: idpEmail, password: SECRETS.idpPassword } });
  ok(signup, 200, 'signup');
  const session = await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=password', {
    body: { email: idpEmail, password: SECRETS.idpPassword },
  });
  ok(session, 200, 'password login');
  const refreshed = await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=refresh_token', {
    body: { refresh_token: session.body.refresh_token },
  });
  ok(refreshed, 200, 'refresh');
  for (const [label, s] of [
    ['signup', signup.body],
    ['login', session.body],
    ['refresh', refreshed.body],
  ] as const) {
    issued.push(
      { label: `idp ${label} access token`, value: s.access_token },
      { label: `idp ${label} refresh token`, value: s.refresh_token },
    );
  }
  const access = refreshed.body.access_token as string;
  ok(await idpRequest(idpEndpoint, 'GET', '/auth/v1/user', { token: access }), 200, 'getUser');
  ok(
    await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=password', {
      body: { email: idpEmail, password: SECRETS.wrongPassword },
    }),
    400,
    'failed idp login',
  );
  ok(
    await idpRequest(idpEndpoint, 'POST', '/auth/v1/token?grant_type=refresh_token', {
      body: { refresh_token: session.body.refresh_token },
    }),
    200,
    'refresh of the previous token',
  );
  const created = await idpRequest(idpEndpoint, 'POST', '/auth/v1/admin/users', {
    apikey: SECRETS.secret,
    body: { email: `log-admin-made-${suffix}@example.com`, password: SECRETS.idpPassword, email_confirm: true },
  });
  ok(created, 200, 'admin create');
  ok(
    await idpRequest(idpEndpoint, 'DELETE', `/auth/v1/admin/users/${created.body.id}`, {
      apikey: SECRETS.secret,
      body: { should_soft_delete: false },
    }),
    200,
    'admin delete',
  );
  const note = await idpRequest(idpEndpoint, 'POST', '/rest/v1/notes', {
    token: access,
    body: { title: 'log hygiene' },
    headers: { prefer: 'return=representation' },
  });
  ok(note, 201, 'REST insert');
  ok(await idpRequest(idpEndpoint, 'GET', '/rest/v1/notes?select=*&order=created_at.desc', { token: access }), 200, 'REST select');
  ok(await idpRequest(idpEndpoint, 'DELETE', `/rest/v1/notes?id=eq.${note.body[0].id}`, { token: access }), 204, 'REST delete');
  ok(await idpRequest(idpEndpoint, 'GET', '/rest/v1/notes', { token: `${access}x` }), 401, 'REST with a bad token');
  ok(await idpRequest(idpEndpoint, 'GET', '/rest/v1/notes', { apikey: `${SECRETS.secret}x` }), 401, 'wrong API key');

  // notes: register, login, create, list, delete, a failed login, a bad token.
  const notesEmail = `log-notes-${suffix}@example.com`;
  ok(
    await request(notes.url, 'POST', '/auth/register', { body: { email: notesEmail, password: SECRETS.notesPassword } }),
    201,
    'notes register',
  );
  const notesLogin = await request(notes.url, 'POST', '/auth/login', { body: { email: notesEmail, password: SECRETS.notesPassword } });
  ok(notesLogin, 200, 'notes login');
  issued.push(
    { label: 'notes access token', value: notesLogin.body.access_token },
    { label: 'notes refresh token', value: notesLogin.body.refresh_token },
  );
  const notesToken = notesLogin.body.access_token as string;
  const created2 = await request(notes.url, 'POST', '/notes', { token: notesToken, body: { title: 'hygiene', body: 'text' } });
  ok(created2, 201, 'notes create');
  ok(await request(notes.url, 'GET', '/notes', { token: notesToken }), 200, 'notes list');
  ok(await request(notes.url, 'DELETE', `/notes/${created2.body.id}`, { token: notesToken }), 200, 'notes delete');
  ok(
    await request(notes.url, 'POST', '/auth/login', { body: { email: notesEmail, password: SECRETS.wrongPassword } }),
    401,
    'notes failed login',
  );
  ok(await request(notes.url, 'GET', '/notes', { token: `${notesToken.slice(0, -2)}xx` }), 401, 'notes bad token');

  // Mail, accounts: a password reset followed through its mailed link, a verification sent again
  // and followed, and a made-up token. The outbox sends after the answer, so the mail is awaited.
  ok(await request(accounts.url, 'POST', '/auth/password-reset', { body: { email } }), 202, 'password reset request');
  const resetToken = mailedToken(await smtp.waitForMail(email, { timeout: 15_000 }), '/reset-password#token=');
  ok(
    await request(accounts.url, 'POST', '/auth/password-reset/confirm', {
      body: { token: resetToken, new_password: SECRETS.resetPassword },
    }),
    200,
    'password reset confirm',
  );
  ok(
    await request(accounts.url, 'POST', '/auth/password-reset/confirm', {
      body: { token: resetToken, new_password: SECRETS.resetPassword },
    }),
    400,
    'password reset with a used token',
  );
  const verifyEmail = `log-verify-${suffix}@example.com`;
  ok(
    await request(accounts.url, 'POST', '/auth/register', {
      body: { name: 'Log Verify', email: verifyEmail, password: SECRETS.userPassword },
    }),
    201,
    'register to verify',
  );
  ok(await request(accounts.url, 'POST', '/auth/verify-email/resend', { body: { email: verifyEmail } }), 202, 'verification resend');
  const verifyToken = mailedToken(await smtp.waitForMail(verifyEmail, { timeout: 15_000 }), '/verify-email#token=');
  ok(await request(accounts.url, 'POST', '/auth/verify-email', { body: { token: verifyToken } }), 200, 'verify email');
  ok(
    await request(accounts.url, 'POST', '/auth/verify-email', { body: { token: `${verifyToken.slice(0, -2)}xx` } }),
    400,
    'verify with a wrong token',
  );
  issued.push(
    { label: 'an accounts password reset token', value: resetToken },
    { label: 'an accounts verification token', value: verifyToken },
  );

  // Mail, idp: recovery followed by its link (the session lands in the redirect's fragment), an
  // invitation followed by its token hash, a generated link (answered, not sent), an address
  // change, a resend. The six-digit codes are not searched for: six digits also occur in
  // timestamps and durations, so a match would say nothing.
  const recoverEmail = `log-recover-${suffix}@example.com`;
  ok(
    await idpRequest(idpEndpoint, 'POST', '/auth/v1/admin/users', {
      apikey: SECRETS.secret,
      body: { email: recoverEmail, password: SECRETS.idpPassword, email_confirm: true },
    }),
    200,
    'user to recover',
  );
  ok(await idpRequest(idpEndpoint, 'POST', '/auth/v1/recover', { body: { email: recoverEmail } }), 200, 'recover');
  const recovered = await followIdpLink(await smtp.waitForMail(recoverEmail, { timeout: 15_000 }), 'recovery');
  const inviteEmail = `log-invite-${suffix}@example.com`;
  ok(await idpRequest(idpEndpoint, 'POST', '/auth/v1/invite', { apikey: SECRETS.secret, body: { email: inviteEmail } }), 200, 'invite');
  const inviteHash = idpLinkToken(await smtp.waitForMail(inviteEmail, { timeout: 15_000 }));
  const invited = await idpRequest(idpEndpoint, 'POST', '/auth/v1/verify', { body: { type: 'invite', token_hash: inviteHash } });
  ok(invited, 200, 'verify the invitation');
  ok(
    await idpRequest(idpEndpoint, 'POST', '/auth/v1/verify', { body: { type: 'invite', token_hash: inviteHash } }),
    403,
    'verify a used invitation',
  );
  const generated = await idpRequest(idpEndpoint, 'POST', '/auth/v1/admin/generate_link', {
    apikey: SECRETS.secret,
    body: { type: 'magiclink', email: recoverEmail },
  });
  ok(generated, 200, 'generate_link');
  const changedEmail = `log-changed-${suffix}@example.com`;
  // The change waits for both addresses to confirm by mail.
  ok(await idpRequest(idpEndpoint, 'PUT', '/auth/v1/user', { token: access, body: { email: changedEmail } }), 200, 'address change');
  ok(
    await idpRequest(idpEndpoint, 'POST', '/auth/v1/resend', { body: { type: 'signup', email: `log-resend-${suffix}@example.com` } }),
    200,
    'resend',
  );
  issued.push(
    ...recovered,
    { label: 'an idp invitation token hash', value: inviteHash },
    { label: 'an idp invitation access token', value: invited.body.access_token },
    { label: 'an idp invitation refresh token', value: invited.body.refresh_token },
    { label: 'a generated link', value: generated.body.action_link },
    { label: 'a generated token hash', value: generated.body.hashed_token },
  );

  // Mail, notes: a reset through the provider, its link, the new password set with the recovery session.
  ok(await request(notes.url, 'POST', '/auth/password-reset', { body: { email: notesEmail } }), 202, 'notes password reset');
  const notesRecovered = await followIdpLink(await smtp.waitForMail(notesEmail, { timeout: 15_000 }), 'notes recovery');
  const recoveryToken = notesRecovered.find((s) => s.label === 'notes recovery access token')!.value;
  ok(
    await request(notes.url, 'POST', '/auth/password', { token: recoveryToken, body: { password: SECRETS.notesNewPassword } }),
    204,
    'notes new password',
  );
  ok(
    await request(notes.url, 'POST', '/auth/password', {
      token: `${recoveryToken.slice(0, -2)}xx`,
      body: { password: SECRETS.notesNewPassword },
    }),
    401,
    'notes new password, bad token',
  );
  issued.push(...notesRecovered);

  // shortener: a URL with credentials (refused by the URL rule, the body still reaches the
  // service), then one carrying the secret in its query, redirected (Location) and shown in stats.
  ok(
    await request(shortener.url, 'POST', '/api/links', { body: { url: `https://alice:${SECRETS.urlPassword}@example.com/private` } }),
    400,
    'create with credentials',
  );
  const link = await request(shortener.url, 'POST', '/api/links', {
    body: { url: `https://example.com/private?token=${SECRETS.urlPassword}` },
  });
  ok(link, 201, 'create');
  const redirect = await request(shortener.url, 'GET', `/${link.body.data.code}`);
  ok(redirect, 302, 'redirect');
  ok(await request(shortener.url, 'GET', `/api/links/${link.body.data.code}`), 200, 'stats');
});

/** The token of an accounts mail's link (`…<page>#token=<token>`). */
function mailedToken(mail: ReceivedMail, marker: string): string {
  const link = mail.text.split(/\s+/).find((word) => word.includes(marker));
  assert.ok(link, `no ${marker} link in the mail "${mail.subject}"`);
  return link.slice(link.indexOf(marker) + marker.length);
}

/** The token (hash) of an idp mail's link. */
function idpLinkToken(mail: ReceivedMail): string {
  return new URL(linkIn(mail, `${idp.url}/auth/v1/verify?token=`)).searchParams.get('token')!;
}

/** Opens an idp mail's link as a browser would; the link, its token and the session it hands over. */
async function followIdpLink(mail: ReceivedMail, label: string): Promise<Secret[]> {
  const link = linkIn(mail, `${idp.url}/auth/v1/verify?token=`);
  const res = await fetch(link, { redirect: 'manual' });
  await res.arrayBuffer();
  assert.equal(res.status, 303, `${label}: the link answered ${res.status}`);
  const fragment = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1));
  assert.ok(fragment.get('access_token'), `${label}: no session in ${res.headers.get('location')}`);
  return [
    { label: `${label} link`, value: link },
    { label: `${label} token hash`, value: new URL(link).searchParams.get('token')! },
    { label: `${label} access token`, value: fragment.get('access_token')! },
    { label: `${label} refresh token`, value: fragment.get('refresh_token')! },
  ];
}

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
    { label: 'a password set through a reset link', value: SECRETS.resetPassword },
    { label: 'a notes password set with a recovery session', value: SECRETS.notesNewPassword },
    { label: 'IDP_PUBLISHABLE_KEY', value: SECRETS.publishable },
    { label: 'IDP_SECRET_KEY', value: SECRETS.secret },
    { label: 'IDP_SIGNING_KEY', value: SECRETS.signingKey.split('\n')[1]! },
    { label: 'the REST login role password', value: authenticatorPassword(SECRETS.secret, roleName) },
    ...issued,
    ...issued
      .filter((s) => s.value.split('.').length === 3)
      .map((s) => ({ label: `${s.label} (signature)`, value: s.value.split('.')[2]! })),
  ];
  const lines: Record<string, number> = {};
  const problems: string[] = [];
  for (const [name, proc] of Object.entries({ shortener, accounts, idp, notes })) {
    const output = proc.output();
    lines[name] = output.split('\n').filter(Boolean).length;
    assert.ok(output.length < KEEP_ALL_OUTPUT, `${name}: output was truncated, the scan would be incomplete`);
    assert.ok(/"level":30.*"msg":"request completed"/.test(output), `${name} did not log its requests`);
    problems.push(...findLeaks(output, secrets).map((p) => `${name}: ${p}`));
  }
  // The scanner itself finds what it is asked to find (a scan that cannot fail proves nothing).
  assert.equal(findLeaks(`{"msg":"x ${SECRETS.userPassword}"}`, secrets).length, 1);
  assert.equal(findLeaks(`{"msg":"${issued[0]!.value}"}`, []).length, 1);
  reportFigures(t, 'log hygiene at trace level', { linesScanned: lines, secretsSearched: secrets.length, leaks: problems.length });
  assert.deepEqual(problems, []);
});
