// ES256 signatures are accepted only in their low-s form (s ≤ n/2): replacing s by n − s yields a
// second token string with the same claims that verifies under the same key, minted without it.
// The idp signs only low-s, and the idp (/auth/v1/user and /rest/v1) and notes (remote and local
// verification) refuse the high-s twin while the original keeps working. Real idp, real notes,
// real HTTP, supabase-js where a client would use it.
import assert from 'node:assert/strict';
import { createPublicKey, verify as cryptoVerify } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ACCESS_TOKEN_AUDIENCE, SigningKeys } from '../src/idp/keys.js';
import { systemClock } from '../src/kit/clock.js';
import { hasLowSSignature, isLowSEs256Signature, toLowSEs256Signature, withLowSSignature } from '../src/kit/jws.js';
import { createUser, type RunningIdp, startIdp, TEST_SIGNING_KEY } from './helpers/idp.js';
import { HttpError } from '../src/kit/http/errors.js';
import { localTokenVerifier } from '../src/notes/token-verifier.js';
import { type RunningNotes, startNotes } from './helpers/notes.js';
import { malleated } from './resilience/fuzz/jwt-forge.js';
import { supabase } from './helpers/supabase.js';
import { request, idpRequest } from './helpers/http.js';
import { startAll } from './helpers/services.js';

const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const sOf = (token: string) => BigInt(`0x${Buffer.from(token.split('.')[2]!, 'base64url').subarray(32).toString('hex')}`);

function claims(now: number) {
  return {
    iss: 'http://127.0.0.1/auth/v1',
    sub: '00000000-0000-4000-8000-000000000001',
    aud: ACCESS_TOKEN_AUDIENCE,
    exp: now + 3600,
    iat: now,
    email: 'low-s@example.com',
    phone: '',
    app_metadata: {},
    user_metadata: {},
    role: 'authenticated',
    aal: 'aal1',
    amr: [{ method: 'password', timestamp: now }],
    session_id: '00000000-0000-4000-8000-000000000002',
    is_anonymous: false,
  };
}

describe('kit/jws: the low-s rule', () => {
  test('both twins verify under the key (the malleability itself); only the low one passes the rule', async () => {
    const keys = await SigningKeys.fromPrivateKey(TEST_SIGNING_KEY, systemClock);
    const token = await keys.sign(claims(Math.floor(Date.now() / 1000)));
    const twin = malleated(token);
    assert.notEqual(twin, token);
    assert.equal(sOf(token) + sOf(twin), P256_ORDER);
    const publicKey = createPublicKey(TEST_SIGNING_KEY);
    for (const t of [token, twin]) {
      const [h, p, sig] = t.split('.') as [string, string, string];
      assert.equal(
        cryptoVerify('sha256', Buffer.from(`${h}.${p}`), { key: publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(sig, 'base64url')),
        true,
      );
    }
    assert.equal(hasLowSSignature(token), true);
    assert.equal(hasLowSSignature(twin), false);
    assert.equal(withLowSSignature(twin), token);
    assert.equal(withLowSSignature(token), token);
  });

  test('edges: s = n/2 is low, n/2 + 1 is high, 0 and other lengths are refused', () => {
    const half = P256_ORDER >> 1n;
    const sig = (s: bigint) => Buffer.concat([Buffer.alloc(32, 1), Buffer.from(s.toString(16).padStart(64, '0'), 'hex')]);
    assert.equal(isLowSEs256Signature(sig(half)), true);
    assert.equal(isLowSEs256Signature(sig(half + 1n)), false);
    assert.equal(isLowSEs256Signature(sig(0n)), false);
    assert.equal(isLowSEs256Signature(sig(1n)), true);
    assert.equal(isLowSEs256Signature(Buffer.alloc(63, 1)), false);
    assert.equal(isLowSEs256Signature(Buffer.alloc(65, 1)), false);
    assert.deepEqual(toLowSEs256Signature(sig(half + 1n)), sig(P256_ORDER - half - 1n));
  });

  test('the idp signs only low-s: 200 tokens, none high', async () => {
    // ECDSA's s is uniform: without normalising, about half would be high (all 200 low by
    // chance: 2^-200).
    const keys = await SigningKeys.fromPrivateKey(TEST_SIGNING_KEY, systemClock);
    const now = Math.floor(Date.now() / 1000);
    let high = 0;
    for (let i = 0; i < 200; i++) {
      const token = await keys.sign({ ...claims(now), email: `low-s-${i}@example.com` });
      if (!hasLowSSignature(token)) high++;
      assert.equal((await keys.verify(token)).ok, true);
    }
    assert.equal(high, 0);
  });
});

describe('the high-s twin of a real token is refused everywhere; the original works', () => {
  let idp: RunningIdp;
  let notesRemote: RunningNotes;
  let notesLocal: RunningNotes;
  let token: string;
  let twin: string;

  before(async () => {
    idp = await startIdp();
    [notesRemote, notesLocal] = await startAll([
      startNotes({ idp, env: { IDP_VERIFY: 'remote' } }),
      startNotes({ idp, env: { IDP_VERIFY: 'local' } }),
    ]);
    token = (await createUser(idp, `low-s-${Date.now()}@example.com`)).token;
    twin = malleated(token);
  });
  after(async () => {
    await notesRemote?.close();
    await notesLocal?.close();
    await idp?.close();
  });

  test('idp /auth/v1/user (supabase-js getUser): 403 bad_jwt for the twin', async () => {
    const refused = await supabase(idp).auth.getUser(twin);
    assert.ok(refused.error, 'the twin must be refused');
    assert.equal(refused.error.status, 403);
    assert.equal(refused.error.code, 'bad_jwt');
    assert.equal(refused.data.user, null);
    const accepted = await supabase(idp).auth.getUser(token);
    assert.equal(accepted.error, null);
  });

  test('idp /rest/v1: 401 PGRST301 for the twin', async () => {
    const refused = await idpRequest(idp, 'GET', '/rest/v1/notes?select=*', { token: twin });
    assert.equal(refused.status, 401);
    // What PostgREST answers for a signature none of its keys verifies.
    assert.deepEqual(refused.body, {
      code: 'PGRST301',
      details: 'None of the keys was able to decode the JWT',
      hint: null,
      message: 'No suitable key or wrong key type',
    });
    const accepted = await idpRequest(idp, 'GET', '/rest/v1/notes?select=*', { token });
    assert.equal(accepted.status, 200);
  });

  for (const mode of ['remote', 'local'] as const) {
    test(`notes (${mode} verification): 401 for the twin, also after the original was seen`, async () => {
      const notes = mode === 'remote' ? notesRemote : notesLocal;
      const accepted = await request(notes.url, 'GET', '/notes', { token });
      assert.equal(accepted.status, 200);
      // The original is now cached by the local verifier; the twin is another string.
      const refused = await request(notes.url, 'GET', '/notes', { token: twin });
      assert.equal(refused.status, 401);
      assert.deepEqual(refused.body, { message: 'Invalid or expired token' });
      assert.equal((await request(notes.url, 'GET', '/notes', { token })).status, 200);
    });
  }

  test('notes local verifier on its own (every notes route also asks the idp REST API, which refuses too): the twin is 401', async () => {
    const verify = localTokenVerifier({ idpUrl: idp.url, publishableKey: idp.publishableKey, timeoutMs: 5000, clock: systemClock });
    assert.equal((await verify(token)).accessToken, token);
    await assert.rejects(verify(twin), (err: unknown) => err instanceof HttpError && err.statusCode === 401);
  });
});
