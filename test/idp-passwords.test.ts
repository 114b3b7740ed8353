// The idp hashes on the kit's worker threads (off the libuv pool the database's SCRAM logins
// need), with a bounded queue: a full one is a 503 in GoTrue's error shape with Retry-After,
// never a 500. Real idp over real HTTP, real bcrypt; assertions on counts, never on time.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AuthRetryableFetchError } from '@supabase/supabase-js';
import pg from 'pg';
import { BCRYPT_COST, idpPasswordHasher } from '../src/idp/auth/passwords.js';
import { idpConfig } from '../src/idp/config.js';
import { loadConfig } from '../src/kit/config.js';
import type { PasswordHasher } from '../src/kit/password-hasher.js';
import { TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY, type RunningIdp, startIdp } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';
import { idpRequest } from './helpers/http.js';
import { startAll } from './helpers/services.js';

let idp: RunningIdp;
let hasher: PasswordHasher;
let busyIdp: RunningIdp;
let busyHasher: PasswordHasher;

before(async () => {
  hasher = idpPasswordHasher();
  // One worker and room for one waiting job of each kind: a handful of signups fills it.
  busyHasher = idpPasswordHasher({ workers: 1, maxQueued: 1 });
  [idp, busyIdp] = await startAll([startIdp({ deps: { passwordHasher: hasher } }), startIdp({ deps: { passwordHasher: busyHasher } })]);
});
after(async () => {
  await Promise.all([idp?.close(), busyIdp?.close()]);
  await Promise.all([hasher.close(), busyHasher.close()]);
});

test('signup, sign-in and admin createUser hash and compare on the kit hasher, at cost 10', async () => {
  const before = { ...hasher.started };
  const address = uniqueEmail('kit');
  const client = supabase(idp);
  const { error: signUpError } = await client.auth.signUp({ email: address, password: 'pw123456' });
  assert.equal(signUpError, null);
  const { error: signInError } = await client.auth.signInWithPassword({ email: address, password: 'pw123456' });
  assert.equal(signInError, null);
  const { error: wrongError } = await client.auth.signInWithPassword({ email: uniqueEmail('nobody'), password: 'pw123456' });
  assert.equal(wrongError?.code, 'invalid_credentials');
  const created = await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
    apikey: idp.secretKey,
    body: { email: uniqueEmail('admin'), password: 'pw123456' },
  });
  assert.equal(created.status, 200, created.text);
  assert.deepEqual({ hash: hasher.started.hash - before.hash, verify: hasher.started.verify - before.verify }, { hash: 2, verify: 2 });

  const db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query<{ encrypted_password: string }>('SELECT encrypted_password FROM auth.users WHERE email = $1', [
      address,
    ]);
    assert.match(rows[0]!.encrypted_password, new RegExp(`^\\$2[ab]\\$${BCRYPT_COST}\\$`));
  } finally {
    await db.end();
  }
});

test('a full hashing queue: signups answer 503 request_timeout with Retry-After, never 500', async () => {
  const responses = await Promise.all(
    Array.from({ length: 8 }, () =>
      idpRequest(busyIdp, 'POST', '/auth/v1/signup', { body: { email: uniqueEmail('flood'), password: 'pw123456' } }),
    ),
  );
  const statuses = responses.map((r) => r.status);
  assert.ok(
    statuses.every((s) => s === 200 || s === 503),
    statuses.join(','),
  );
  const refused = responses.filter((r) => r.status === 503);
  assert.ok(refused.length >= 1 && refused.length <= 6, statuses.join(','));
  for (const res of refused) {
    // The versioned envelope (the helper sends X-Supabase-Api-Version).
    assert.deepEqual(res.body, { code: 'request_timeout', message: 'Processing this request timed out, please retry after a moment' });
    assert.equal(res.headers.get('x-sb-error-code'), 'request_timeout');
    const retryAfter = Number(res.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `retry-after ${res.headers.get('retry-after')}`);
  }
  assert.ok(busyHasher.refused.hash >= 1);
});

test('an unversioned client gets the older {code, error_code, msg} shape; supabase-js sees a retryable error', async () => {
  const flood = Array.from({ length: 6 }, () =>
    idpRequest(busyIdp, 'POST', '/auth/v1/signup', {
      headers: { 'x-supabase-api-version': '' },
      body: { email: uniqueEmail('old'), password: 'pw123456' },
    }),
  );
  const viaClient = supabase(busyIdp).auth.signUp({ email: uniqueEmail('sdk'), password: 'pw123456' });
  const [responses, sdk] = await Promise.all([Promise.all(flood), viaClient]);
  const refused = responses.filter((r) => r.status === 503);
  assert.ok(refused.length >= 1, responses.map((r) => r.status).join(','));
  for (const res of refused) {
    assert.deepEqual(res.body, {
      code: 503,
      error_code: 'request_timeout',
      msg: 'Processing this request timed out, please retry after a moment',
    });
  }
  // supabase-js turns a 503 into AuthRetryableFetchError whatever the body; when this one was served, it is a session.
  if (sdk.error) assert.ok(sdk.error instanceof AuthRetryableFetchError, String(sdk.error));
  else assert.ok(sdk.data.session);
});

test('BCRYPT_QUEUE_MAX bounds each queue: 128 by default (about 5 s of cost-10 work for 2 cores)', () => {
  const keys = { IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY, IDP_SECRET_KEY: TEST_SECRET_KEY };
  assert.equal(loadConfig(idpConfig, keys).BCRYPT_QUEUE_MAX, 128);
  assert.equal(loadConfig(idpConfig, { ...keys, BCRYPT_QUEUE_MAX: '8' }).BCRYPT_QUEUE_MAX, 8);
  assert.throws(() => loadConfig(idpConfig, { ...keys, BCRYPT_QUEUE_MAX: '0' }), /BCRYPT_QUEUE_MAX must be at least 1/);
});
