// What the notes service relies on in supabase-js's behaviour against the idp,
// checked with the real client: the error shapes it maps, session fields, the
// Node 20 transport requirement, and RLS errors as the wire reference gives them.
import assert from 'node:assert/strict';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { after, before, test } from 'node:test';
import { createClient, isAuthApiError, isAuthRetryableFetchError } from '@supabase/supabase-js';
import { startIdp, type RunningIdp } from './helpers/idp.js';
import { PASSWORD } from './helpers/notes.js';
import { SUPABASE_CLIENT_OPTIONS, serviceClient, userClient } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';
import { closedPort } from './helpers/ports.js';

let idp: RunningIdp;
before(async () => {
  idp = await startIdp();
});
after(async () => {
  await idp?.close();
});

async function newSession() {
  const email = uniqueEmail('wire');
  const signUp = await userClient(idp).auth.signUp({ email, password: PASSWORD });
  assert.equal(signUp.error, null);
  const { data, error } = await userClient(idp).auth.signInWithPassword({ email, password: PASSWORD });
  assert.equal(error, null);
  return { email, session: data.session!, user: data.user! };
}

test('createClient needs a WebSocket class on Node 20 only; with ws it constructs everywhere', () => {
  // The project's client options without the ws transport: what supabase-js does on its own.
  const build = () => createClient(idp.url, idp.publishableKey, { auth: SUPABASE_CLIENT_OPTIONS.auth });
  if (Number(process.versions.node.split('.')[0]) < 22 && typeof globalThis.WebSocket === 'undefined') {
    assert.throws(build, /WebSocket/);
  } else {
    assert.doesNotThrow(build);
  }
  assert.doesNotThrow(() => userClient(idp));
});

test('signInWithPassword: expires_at is Unix seconds, equal to the access token exp', async () => {
  const { session, user } = await newSession();
  const payload = decodeJwt(session.access_token);
  const header = decodeProtectedHeader(session.access_token);
  assert.equal(session.expires_at, payload.exp);
  assert.ok(session.expires_at! < 10_000_000_000, 'seconds, not milliseconds');
  assert.equal(payload.sub, user.id);
  assert.equal(payload.aud, 'authenticated');
  assert.equal(payload.role, 'authenticated');
  // Local verification depends on these: an asymmetric algorithm and a kid published in the JWKS.
  assert.equal(header.alg, 'ES256');
  const jwks = (await (await fetch(`${idp.url}/auth/v1/.well-known/jwks.json`, { headers: { apikey: idp.publishableKey } })).json()) as {
    keys: Array<{ kid: string; d?: string }>;
  };
  assert.ok(jwks.keys.some((k) => k.kid === header.kid));
  assert.ok(
    jwks.keys.every((k) => k.d === undefined),
    'no private part published',
  );
});

test('login errors are AuthApiError with a 4xx status (notes maps all of them to 401)', async () => {
  const { email } = await newSession();
  const wrong = await userClient(idp).auth.signInWithPassword({ email, password: 'wrong-password' });
  assert.ok(isAuthApiError(wrong.error));
  assert.equal(wrong.error.status, 400);
  assert.equal(wrong.error.code, 'invalid_credentials');
  assert.equal(isAuthRetryableFetchError(wrong.error), false);
});

test('signUp errors carry a message notes passes on', async () => {
  const { email } = await newSession();
  const duplicate = await userClient(idp).auth.signUp({ email, password: PASSWORD });
  assert.equal(duplicate.error?.status, 422);
  assert.equal(duplicate.error?.code, 'user_already_exists');
  assert.equal(duplicate.error?.message, 'User already registered');
  const weak = await userClient(idp).auth.signUp({ email: uniqueEmail(), password: 'abc' });
  assert.equal(weak.error?.code, 'weak_password');
  assert.equal(weak.error?.status, 422);
});

test('getUser(token) with the secret key: 200 with the user; bad or deleted-user tokens are 4xx AuthApiError, not retryable', async () => {
  const { session, user } = await newSession();
  const admin = serviceClient(idp);
  const ok = await admin.auth.getUser(session.access_token);
  assert.equal(ok.error, null);
  assert.equal(ok.data.user?.id, user.id);

  const bad = await admin.auth.getUser('a.b.c');
  assert.ok(isAuthApiError(bad.error));
  assert.equal(bad.error.status, 403);
  assert.equal(bad.error.code, 'bad_jwt');

  assert.equal((await admin.auth.admin.deleteUser(user.id)).error, null);
  const gone = await admin.auth.getUser(session.access_token);
  assert.ok(isAuthApiError(gone.error));
  assert.equal(gone.error.status, 403);
  assert.equal(gone.error.code, 'user_not_found');
});

test('an unreachable provider: auth calls give AuthRetryableFetchError status 0; REST gives status 0 with no code', async () => {
  const url = `http://127.0.0.1:${await closedPort()}`;
  const client = userClient({ ...idp, url });
  const auth = await client.auth.signInWithPassword({ email: uniqueEmail(), password: PASSWORD });
  assert.ok(isAuthRetryableFetchError(auth.error));
  assert.equal(auth.error.status, 0);
  const rest = await client.from('notes').insert({ title: 'x' }).select().single();
  assert.equal(rest.status, 0);
  assert.equal(rest.error?.code, '');
});

test('RLS through supabase-js: inserting as another user is 403 42501; deleting another user’s note is 200 [] with no error', async () => {
  const a = await newSession();
  const b = await newSession();
  const asA = userClient(idp, a.session.access_token);
  const asB = userClient(idp, b.session.access_token);

  const forged = await asB.from('notes').insert({ title: 'as A', user_id: a.user.id }).select().single();
  assert.equal(forged.status, 403);
  assert.equal(forged.error?.code, '42501');
  // user_id is not a column users may write: the column grant refuses it before RLS is asked.
  assert.equal(forged.error?.message, 'permission denied for table notes');
  assert.equal(forged.data, null);

  const created = await asA.from('notes').insert({ title: 'A only' }).select().single();
  assert.equal(created.status, 201);
  assert.equal(Array.isArray(created.data), false, '.single() gives one object');
  assert.equal(created.data.user_id, a.user.id);

  const stolen = await asB.from('notes').delete().eq('id', created.data.id).select();
  assert.equal(stolen.error, null);
  assert.equal(stolen.status, 200);
  assert.deepEqual(stolen.data, []);

  const own = await asA.from('notes').delete().eq('id', created.data.id).select();
  assert.equal(own.status, 200);
  assert.deepEqual(own.data, [created.data]);
});

test('the secret key bypasses RLS, and default auth.uid() is NULL for it (so it could never create notes by accident)', async () => {
  const a = await newSession();
  await userClient(idp, a.session.access_token).from('notes').insert({ title: 'seen by service' });
  const all = await serviceClient(idp).from('notes').select('*').eq('user_id', a.user.id);
  assert.equal(all.error, null);
  assert.equal(all.data?.length, 1);
  const noOwner = await serviceClient(idp).from('notes').insert({ title: 'nobody' }).select().single();
  assert.equal(noOwner.error?.code, '23502');
});
