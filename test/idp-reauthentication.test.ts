// GoTrue's reauthentication, through the real supabase-js: a password change from a session older
// than a day needs the six-digit nonce GET /reauthenticate mails (on by default here), so a stolen,
// old access token alone cannot take the password. A fresh session (a sign-in or a password
// reset's) needs nothing more. Sessions are aged by moving their start back in the database.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { uniqueEmail } from './helpers/emails.js';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { type ReceivedMail, startSmtp, type TestSmtp } from './helpers/smtp.js';
import { supabase } from './helpers/supabase.js';

let smtp: TestSmtp;
let idp: RunningIdp;
let db: pg.Client;

before(async () => {
  smtp = await startSmtp();
  idp = await startIdp({ env: { SMTP_URL: smtp.url } });
  db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();
});
after(async () => {
  await db?.end();
  await idp?.close();
  await smtp?.close();
});

/** A user signed in with supabase-js. */
async function signedIn(tag: string, target: RunningIdp = idp) {
  const email = uniqueEmail(tag);
  await createUser(target, email);
  const client = supabase(target);
  const { error } = await client.auth.signInWithPassword({ email, password: 'correct-horse-1' });
  assert.equal(error, null);
  return { client, email };
}

/** Every session of the user began 25 hours ago. */
async function ageSessions(email: string, client: pg.Client = db) {
  await client.query(
    `UPDATE auth.sessions SET created_at = created_at - interval '25 hours' WHERE user_id = (SELECT id FROM auth.users WHERE email = $1)`,
    [email],
  );
}

const signsIn = async (email: string, password: string, target: RunningIdp = idp) =>
  (await supabase(target).auth.signInWithPassword({ email, password })).error === null;

function nonceIn(mail: ReceivedMail): string {
  const code = /\b(\d{6})\b/.exec(mail.text)?.[1];
  assert.ok(code, mail.text);
  return code;
}

describe('reauthentication for a password change', () => {
  test('a session signed in within the day changes the password without a nonce', async () => {
    const { client, email } = await signedIn('reauth-fresh');
    const { error } = await client.auth.updateUser({ password: 'fresh-session-pass-1' });
    assert.equal(error, null);
    assert.equal(await signsIn(email, 'fresh-session-pass-1'), true);
  });

  test('an older session without a nonce: 400 reauthentication_needed, the password unchanged', async () => {
    const { client, email } = await signedIn('reauth-needed');
    await ageSessions(email);
    const { error } = await client.auth.updateUser({ password: 'stolen-token-pass-1' });
    assert.equal(error?.status, 400);
    assert.equal(error?.code, 'reauthentication_needed');
    assert.equal(error?.message, 'Password update requires reauthentication');
    assert.equal(await signsIn(email, 'correct-horse-1'), true);
    assert.equal(await signsIn(email, 'stolen-token-pass-1'), false);
  });

  test('reauthenticate() mails a nonce; with it the change succeeds, once', async () => {
    const { client, email } = await signedIn('reauth-nonce');
    await ageSessions(email);
    assert.equal((await client.auth.reauthenticate()).error, null);
    const mail = await smtp.waitForMail(email);
    assert.equal(mail.subject, 'Confirm reauthentication');
    const nonce = nonceIn(mail);
    assert.equal((await client.auth.updateUser({ password: 'after-nonce-pass-1', nonce })).error, null);
    assert.equal(await signsIn(email, 'after-nonce-pass-1'), true);
    // Used up: the same nonce again is refused and changes nothing.
    const again = await client.auth.updateUser({ password: 'after-nonce-pass-2', nonce });
    assert.equal(again.error?.status, 422);
    assert.equal(again.error?.code, 'reauthentication_not_valid');
    assert.equal(await signsIn(email, 'after-nonce-pass-1'), true);
  });

  test('five wrong nonces void the mailed one: its right value then fails too', async () => {
    const { client, email } = await signedIn('reauth-guess');
    await ageSessions(email);
    assert.equal((await client.auth.reauthenticate()).error, null);
    const nonce = nonceIn(await smtp.waitForMail(email));
    const wrong = nonce === '000000' ? '111111' : '000000';
    for (let i = 0; i < 5; i++) {
      const { error } = await client.auth.updateUser({ password: `guess-pass-${i}-x`, nonce: wrong });
      assert.equal(error?.code, 'reauthentication_not_valid', `try ${i}`);
    }
    const right = await client.auth.updateUser({ password: 'right-too-late-1', nonce });
    assert.equal(right.error?.code, 'reauthentication_not_valid');
    assert.equal(await signsIn(email, 'correct-horse-1'), true);
  });

  test('a nonce mailed to one user is no use to another', async () => {
    const alice = await signedIn('reauth-alice');
    const bob = await signedIn('reauth-bob');
    await ageSessions(bob.email);
    assert.equal((await alice.client.auth.reauthenticate()).error, null);
    const alicesNonce = nonceIn(await smtp.waitForMail(alice.email));
    const { error } = await bob.client.auth.updateUser({ password: 'borrowed-nonce-1', nonce: alicesNonce });
    assert.equal(error?.code, 'reauthentication_not_valid');
    assert.equal(await signsIn(bob.email, 'correct-horse-1'), true);
  });

  test('reauthenticate needs a signed-in user', async () => {
    const { error } = await supabase(idp).auth.reauthenticate();
    assert.ok(error, 'expected an error without a session');
  });
});

describe('IDP_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION=false', () => {
  let lax: RunningIdp;
  let laxDb: pg.Client;
  before(async () => {
    lax = await startIdp({ env: { IDP_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION: 'false' } });
    laxDb = new pg.Client({ connectionString: lax.databaseUrl });
    await laxDb.connect();
  });
  after(async () => {
    await laxDb?.end();
    await lax?.close();
  });

  test('an older session changes the password without a nonce, as GoTrue with the setting off', async () => {
    const { client, email } = await signedIn('reauth-off', lax);
    await ageSessions(email, laxDb);
    assert.equal((await client.auth.updateUser({ password: 'no-reauth-pass-1' })).error, null);
    assert.equal(await signsIn(email, 'no-reauth-pass-1', lax), true);
  });
});
