// The cross-service JWT attack corpus: algorithm confusion, foreign keys, key-carrying headers,
// time claims one step past their bounds, wrong audience, and every way of mangling a real
// token's signature, sent over real HTTP to accounts, the idp (/auth/v1/user and /rest/v1) and
// notes in both verification modes. Each must be refused with the service's documented status
// and body, and none may reveal data. The per-service unit tests hold the finer cases.
import assert from 'node:assert/strict';
import { createPrivateKey } from 'node:crypto';
import { after, before, test } from 'node:test';
import { reportFigures } from './helpers/figures.js';
import { accountsCorpus, decodePart, idpCorpus } from './fuzz/jwt-forge.js';
import { startAccounts, type RunningAccounts, TEST_SECRET } from '../helpers/accounts.js';
import { uniqueEmail } from '../helpers/emails.js';
import { type RunningIdp, startIdp } from '../helpers/idp.js';
import { type RunningNotes, startNotes } from '../helpers/notes.js';
import { findLeaks } from './fuzz/secrets.js';
import { idpRequest, request } from '../helpers/http.js';
import { startAll } from '../helpers/services.js';

let accounts: RunningAccounts;
let idp: RunningIdp;
let notesRemote: RunningNotes;
let notesLocal: RunningNotes;

const ACCOUNT_PASSWORDS = ['hostile-jwt-alice-pw', 'hostile-jwt-bob-pw-2'];
const IDP_PASSWORD = 'hostile-jwt-idp-pw-9';
let accountTokens: string[] = [];
let idpSessions: Array<{ access_token: string; refresh_token: string; user: { id: string } }> = [];

before(async () => {
  // trace: the log streams are checked for the tokens at the end.
  [accounts, idp] = await startAll([
    startAccounts({ env: { LOG_LEVEL: 'trace' }, listen: true }),
    startIdp({ env: { LOG_LEVEL: 'trace' } }),
  ]);
  [notesRemote, notesLocal] = await startAll([
    startNotes({ idp, env: { IDP_VERIFY: 'remote', LOG_LEVEL: 'trace' } }),
    startNotes({ idp, env: { IDP_VERIFY: 'local', LOG_LEVEL: 'trace' } }),
  ]);

  accountTokens = await Promise.all(
    ['alice', 'bob'].map(async (name, i) => {
      const email = uniqueEmail(`${name}-jwt`);
      const reg = await request(accounts.url, 'POST', '/auth/register', { body: { name, email, password: ACCOUNT_PASSWORDS[i] } });
      assert.equal(reg.status, 201, reg.text);
      const login = await request(accounts.url, 'POST', '/auth/login', { body: { email, password: ACCOUNT_PASSWORDS[i] } });
      assert.equal(login.status, 200, login.text);
      return login.body.data.token as string;
    }),
  );

  idpSessions = [];
  for (const name of ['alice', 'bob']) {
    const email = uniqueEmail(`${name}-jwt`);
    const created = await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
      apikey: idp.secretKey,
      body: { email, password: IDP_PASSWORD, email_confirm: true },
    });
    assert.equal(created.status, 200, created.text);
    const session = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email, password: IDP_PASSWORD } });
    assert.equal(session.status, 200, session.text);
    idpSessions.push(session.body);
  }
  const note = await idpRequest(idp, 'POST', '/rest/v1/notes', {
    token: idpSessions[0]!.access_token,
    body: { title: 'alice-private-note' },
  });
  assert.equal(note.status, 201, note.text);
});

after(async () => {
  await notesRemote?.close();
  await notesLocal?.close();
  await accounts?.close();
  await idp?.close();
});

const nowSeconds = () => Math.floor(Date.now() / 1000);

test('baseline: the real tokens are accepted everywhere (so every refusal below is the attack)', async () => {
  const me = await request(accounts.url, 'GET', '/auth/me', { token: accountTokens[0] });
  assert.equal(me.status, 200, me.text);
  const token = idpSessions[0]!.access_token;
  assert.equal((await idpRequest(idp, 'GET', '/auth/v1/user', { token })).status, 200);
  const rows = await idpRequest(idp, 'GET', '/rest/v1/notes?select=title', { token });
  assert.deepEqual(rows.body, [{ title: 'alice-private-note' }]);
  for (const notes of [notesRemote, notesLocal]) {
    const list = await request(notes.url, 'GET', '/notes', { token });
    assert.equal(list.status, 200, list.text);
  }
});

test('accounts: every forged or mangled token is 401 "Invalid or expired token." on /auth/me and /admin/users', async (t) => {
  const corpus = accountsCorpus({
    realToken: accountTokens[0]!,
    otherToken: accountTokens[1]!,
    secret: TEST_SECRET,
    nowSeconds: nowSeconds(),
  });
  const failures: string[] = [];
  for (const [label, token] of corpus) {
    for (const path of ['/auth/me', '/admin/users']) {
      const res = await request(accounts.url, 'GET', path, { token });
      const body = res.body as Record<string, unknown> | undefined;
      const ok =
        res.status === 401 &&
        body !== undefined &&
        Object.keys(body).sort().join() === 'message,response,status' &&
        body.status === 401 &&
        body.message === 'Invalid or expired token.';
      if (!ok) failures.push(`${label} on ${path}: ${res.status} ${res.text.slice(0, 160)}`);
    }
  }
  reportFigures(t, 'JWT attack corpus: accounts', { tokens: corpus.length, requests: corpus.length * 2, accepted: failures.length });
  assert.deepEqual(failures, []);
});

function idpAttacks() {
  return idpCorpus({
    realToken: idpSessions[0]!.access_token,
    otherToken: idpSessions[1]!.access_token,
    signingKey: createPrivateKey(idp.signingKeyPem),
    apiKeys: [idp.secretKey, idp.publishableKey],
    nowSeconds: nowSeconds(),
  });
}

test('idp: every attack is refused by GET /auth/v1/user (GoTrue statuses) and by /rest/v1 (401 PGRST30x), with no data', async (t) => {
  const corpus = idpAttacks();
  const failures: string[] = [];
  for (const attack of corpus) {
    const user = await idpRequest(idp, 'GET', '/auth/v1/user', { token: attack.token });
    if (user.status !== attack.userApi.status || user.body?.code !== attack.userApi.code || /@example\.com/.test(user.text)) {
      failures.push(`${attack.label} on /auth/v1/user: ${user.status} ${user.text.slice(0, 160)}`);
    }
    for (const [method, path, body] of [
      ['GET', '/rest/v1/notes?select=*', undefined],
      ['POST', '/rest/v1/notes', { title: 'forged' }],
      ['DELETE', '/rest/v1/notes?id=gt.0', undefined],
    ] as const) {
      const rest = await idpRequest(idp, method, path, { token: attack.token, body });
      const keys = rest.body ? Object.keys(rest.body).sort().join() : '';
      if (
        rest.status !== 401 ||
        rest.body?.code !== attack.restCode ||
        keys !== 'code,details,hint,message' ||
        rest.text.includes('alice-private-note')
      ) {
        failures.push(`${attack.label} on ${method} ${path}: ${rest.status} ${rest.text.slice(0, 160)}`);
      }
    }
  }
  // A forged DELETE or insert that slipped through would show here even if its answer looked right.
  const rows = await idpRequest(idp, 'GET', '/rest/v1/notes?select=title', { token: idpSessions[0]!.access_token });
  if (JSON.stringify(rows.body) !== '[{"title":"alice-private-note"}]')
    failures.push(`the forged requests changed the notes table: ${rows.text}`);
  reportFigures(t, 'JWT attack corpus: idp', { tokens: corpus.length, requests: corpus.length * 4, accepted: failures.length });
  assert.deepEqual(failures, []);
});

for (const mode of ['remote', 'local'] as const) {
  test(`notes (${mode} verification): every attack is 401 "Invalid or expired token" on every /notes route`, async (t) => {
    const notes = mode === 'remote' ? notesRemote : notesLocal;
    const corpus = idpAttacks();
    const failures: string[] = [];
    for (const attack of corpus) {
      for (const [method, path, body] of [
        ['GET', '/notes', undefined],
        ['POST', '/notes', { title: 'forged' }],
        ['DELETE', '/notes/1', undefined],
      ] as const) {
        const res = await request(notes.url, method, path, { token: attack.token, body });
        const ok =
          res.status === 401 && res.body && Object.keys(res.body).join() === 'message' && res.body.message === 'Invalid or expired token';
        if (!ok) failures.push(`${attack.label} on ${method} ${path}: ${res.status} ${res.text.slice(0, 160)}`);
      }
    }
    reportFigures(t, `JWT attack corpus: notes (${mode})`, {
      tokens: corpus.length,
      requests: corpus.length * 3,
      accepted: failures.length,
    });
    assert.deepEqual(failures, []);
  });
}

test('the trace-level logs of all four apps hold none of the real tokens, passwords or keys', () => {
  const secrets = [
    { label: 'JWT_SECRET', value: TEST_SECRET },
    { label: 'idp secret key', value: idp.secretKey },
    { label: 'idp publishable key', value: idp.publishableKey },
    { label: 'idp signing key', value: idp.signingKeyPem.split('\n')[1]! },
    ...ACCOUNT_PASSWORDS.map((value, i) => ({ label: `accounts password ${i}`, value })),
    { label: 'idp password', value: IDP_PASSWORD },
    ...accountTokens.map((value, i) => ({ label: `accounts token ${i}`, value })),
    ...idpSessions.flatMap((s, i) => [
      { label: `idp access token ${i}`, value: s.access_token },
      { label: `idp refresh token ${i}`, value: s.refresh_token },
      { label: `idp access token signature ${i}`, value: s.access_token.split('.')[2]! },
    ]),
  ];
  const problems = [accounts, idp, notesRemote, notesLocal].flatMap((svc, i) =>
    findLeaks(svc.logs.text(), secrets).map((p) => `${['accounts', 'idp', 'notes remote', 'notes local'][i]}: ${p}`),
  );
  assert.ok(accounts.logs.text().length > 0 && idp.logs.text().length > 0, 'no log lines were captured');
  assert.deepEqual(problems, []);
  assert.ok(decodePart(accountTokens[0]!, 1).id, 'token sanity');
});
