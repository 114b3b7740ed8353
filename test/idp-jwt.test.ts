// Tokens that must not be accepted, on GET /auth/v1/user and on /rest/v1 alike: algorithm tricks,
// foreign keys, key-carrying headers, time claims at their boundaries (injected clock), audience,
// and signature mangling. Each forged token starts from a real one, so only the attack differs.
import assert from 'node:assert/strict';
import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { decodeJwt, decodeProtectedHeader, exportJWK, SignJWT } from 'jose';
import pg from 'pg';
import { manualClock } from '../src/kit/clock.js';
import { withLowSSignature } from '../src/kit/jws.js';
import { createUser, type RunningIdp, startIdp, TEST_SIGNING_KEY } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { idpRequest } from './helpers/http.js';

const clock = manualClock(Date.now());
const EXPIRY = 3600;
let idp: RunningIdp;
let db: pg.Client;
let alice: Awaited<ReturnType<typeof createUser>>;
let realHeader: Record<string, unknown>;
let realClaims: Record<string, unknown>;
const ourKey: KeyObject = createPrivateKey(TEST_SIGNING_KEY);
const attackerKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;

before(async () => {
  idp = await startIdp({ env: { IDP_JWT_EXPIRY: String(EXPIRY) }, clock });
  db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();
  alice = await createUser(idp, 'alice-jwt@example.com');
  await db.query(`INSERT INTO public.notes (user_id, title) VALUES ($1, 'private')`, [alice.id]);
  realHeader = decodeProtectedHeader(alice.token);
  realClaims = decodeJwt(alice.token);
});
after(async () => {
  await db?.end();
  await idp?.close();
});

const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const nowSeconds = () => Math.floor(clock() / 1000);

async function sign(key: KeyObject, header: Record<string, unknown>, claims: Record<string, unknown>): Promise<string> {
  // Low s, as the idp signs: the high-s twin is refused (see jws-low-s.test.ts).
  return withLowSSignature(await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', ...header } as { alg: string }).sign(key));
}
/** The real token's claims, re-signed with our own key: only `changes` differ. */
const withOurKey = (changes: Record<string, unknown>, header: Record<string, unknown> = {}) =>
  sign(ourKey, { kid: realHeader.kid, typ: 'JWT', ...header }, { ...realClaims, ...changes });

/** Accepted: /user answers 200 and REST shows alice's note. */
async function assertAccepted(token: string) {
  const user = await idpRequest(idp, 'GET', '/auth/v1/user', { token });
  assert.equal(user.status, 200, user.text);
  const rows = await idpRequest(idp, 'GET', '/rest/v1/notes?select=title', { token });
  assert.equal(rows.status, 200, rows.text);
  assert.deepEqual(rows.body, [{ title: 'private' }]);
}

/** Refused by both APIs, with no data. */
async function assertRejected(
  token: string,
  expected: { user?: { status: number; code: string; message?: string }; rest?: { code: string; message?: string } } = {},
) {
  const user = await idpRequest(idp, 'GET', '/auth/v1/user', { token });
  const u = expected.user ?? { status: 403, code: 'bad_jwt' };
  assert.equal(user.status, u.status, user.text);
  assert.equal((user.body as { code: string }).code, u.code, user.text);
  if (u.message) assert.equal((user.body as { message: string }).message, u.message);
  assert.doesNotMatch(user.text, /alice-jwt/);

  const rows = await idpRequest(idp, 'GET', '/rest/v1/notes?select=title', { token });
  const r = expected.rest ?? { code: 'PGRST301' };
  assert.equal(rows.status, 401, rows.text);
  assert.equal((rows.body as { code: string }).code, r.code, rows.text);
  if (r.message) assert.equal((rows.body as { message: string }).message, r.message);
  assert.doesNotMatch(rows.text, /private/);
  const insert = await idpRequest(idp, 'POST', '/rest/v1/notes', { token, body: { title: 'forged' } });
  assert.equal(insert.status, 401);
}

test('the real token and one re-signed unchanged with the same key are accepted (the baseline)', async () => {
  await assertAccepted(alice.token);
  await assertAccepted(await withOurKey({}));
});

describe('algorithm and key confusion', () => {
  test('alg none (empty or copied signature)', async () => {
    const header = b64({ alg: 'none', typ: 'JWT' });
    await assertRejected(`${header}.${b64(realClaims)}.`);
    await assertRejected(`${header}.${b64(realClaims)}.${alice.token.split('.')[2]}`);
    await assertRejected(`${b64({ alg: 'NONE', kid: realHeader.kid })}.${b64(realClaims)}.`);
  });

  test('HS256 keyed with the public key (PEM, JWK text, raw coordinates)', async () => {
    const publicKey = createPublicKey(ourKey);
    const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const jwk = await exportJWK(publicKey);
    const secrets = [
      pem,
      JSON.stringify(jwk),
      JSON.stringify({ ...jwk, kid: realHeader.kid, alg: 'ES256', use: 'sig' }),
      Buffer.from(jwk.x!, 'base64url'),
    ];
    for (const secret of secrets) {
      const signingInput = `${b64({ alg: 'HS256', typ: 'JWT', kid: realHeader.kid })}.${b64(realClaims)}`;
      const signature = createHmac('sha256', secret).update(signingInput).digest('base64url');
      await assertRejected(`${signingInput}.${signature}`);
    }
  });

  test('RS256 and ES256 tokens from keys that are not ours, even with our kid', async () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    await assertRejected(await new SignJWT(realClaims).setProtectedHeader({ alg: 'RS256', kid: realHeader.kid as string }).sign(rsa));
    await assertRejected(await sign(attackerKey, { kid: realHeader.kid }, realClaims));
    await assertRejected(await sign(attackerKey, {}, realClaims));
  });

  test('our key under a wrong or missing kid', async () => {
    await assertRejected(await sign(ourKey, { kid: 'another-key' }, realClaims));
    await assertRejected(await sign(ourKey, {}, realClaims));
  });

  test('headers that bring their own key: jwk, jku, x5u, x5c', async () => {
    const attackerJwk = await exportJWK(createPublicKey(attackerKey));
    await assertRejected(await sign(attackerKey, { kid: realHeader.kid, jwk: attackerJwk }, realClaims));
    await assertRejected(await sign(attackerKey, { kid: realHeader.kid, jku: `${idp.url}/evil/jwks.json` }, realClaims));
    await assertRejected(await sign(attackerKey, { kid: realHeader.kid, x5u: 'http://127.0.0.1:1/cert.pem' }, realClaims));
    await assertRejected(await sign(attackerKey, { kid: realHeader.kid, x5c: ['MIIB'] }, realClaims));
    // Even with a valid signature by our key, a key-carrying header is refused outright.
    await assertRejected(await withOurKey({}, { jku: `${idp.url}/auth/v1/.well-known/jwks.json` }));
  });

  test('a role that is not an API role, even signed by us, never reaches the database', async () => {
    const rows = await idpRequest(idp, 'GET', '/rest/v1/notes', { token: await withOurKey({ role: 'postgres' }) });
    assert.equal(rows.status, 401);
    assert.deepEqual(rows.body, { code: '22023', details: null, hint: null, message: 'role "postgres" does not exist' });
    await assertRejected(await sign(attackerKey, { kid: realHeader.kid }, { ...realClaims, role: 'service_role' }));
  });
});

describe('time claims (injected clock)', () => {
  test('expired: rejected by Auth from exp on, by REST past 30 s of skew; one second before expiry: accepted', async () => {
    const start = clock();
    const fresh = await createUser(idp, `clock-${start}@example.com`);
    await db.query(`INSERT INTO public.notes (user_id, title) VALUES ($1, 'private')`, [fresh.id]);
    const exp = decodeJwt(fresh.token).exp as number;
    try {
      clock.set((exp - 1) * 1000);
      const user = await idpRequest(idp, 'GET', '/auth/v1/user', { token: fresh.token });
      assert.equal(user.status, 200);
      assert.equal((await idpRequest(idp, 'GET', '/rest/v1/notes?select=title', { token: fresh.token })).status, 200);

      // GoTrue allows no leeway on exp; PostgREST allows its 30 s of clock skew (exp + 30 still passes).
      clock.set((exp + 1) * 1000);
      assert.equal((await idpRequest(idp, 'GET', '/auth/v1/user', { token: fresh.token })).status, 403);
      assert.equal((await idpRequest(idp, 'GET', '/rest/v1/notes?select=title', { token: fresh.token })).status, 200);
      clock.set((exp + 30) * 1000);
      assert.equal((await idpRequest(idp, 'GET', '/rest/v1/notes?select=title', { token: fresh.token })).status, 200);

      clock.set((exp + 31) * 1000);
      await assertRejected(fresh.token, {
        user: {
          status: 403,
          code: 'bad_jwt',
          message: 'invalid JWT: unable to parse or verify signature, token has invalid claims: token is expired',
        },
        rest: { code: 'PGRST303', message: 'JWT expired' },
      });
      const { error } = await supabase(idp).auth.getUser(fresh.token);
      assert.equal(error?.status, 403);
      assert.equal(error?.code, 'bad_jwt');
      // The refresh token still works and yields a token valid at the new time.
      const refreshed = await supabase(idp).auth.refreshSession({ refresh_token: fresh.refreshToken });
      assert.equal(refreshed.error, null);
      assert.equal(refreshed.data.session!.expires_at, exp + 31 + EXPIRY);
      assert.equal((await idpRequest(idp, 'GET', '/auth/v1/user', { token: refreshed.data.session!.access_token })).status, 200);
    } finally {
      clock.set(start);
    }
  });

  test('not yet valid or issued in the future beyond the 30 s skew: rejected; within it: accepted', async () => {
    const now = nowSeconds();
    await assertRejected(await withOurKey({ nbf: now + 31 }), {
      user: {
        status: 403,
        code: 'bad_jwt',
        message: 'invalid JWT: unable to parse or verify signature, token has invalid claims: token is not valid yet',
      },
      rest: { code: 'PGRST303', message: 'JWT not yet valid' },
    });
    await assertRejected(await withOurKey({ iat: now + 31 }), {
      user: {
        status: 403,
        code: 'bad_jwt',
        message: 'invalid JWT: unable to parse or verify signature, token has invalid claims: token used before issued',
      },
      rest: { code: 'PGRST303', message: 'JWT issued at future' },
    });
    await assertAccepted(await withOurKey({ nbf: now + 20, iat: now + 20 }));
  });

  test('missing or non-numeric exp: rejected', async () => {
    await assertRejected(await withOurKey({ exp: undefined }));
    await assertRejected(await withOurKey({ exp: String(nowSeconds() + 600) }));
  });
});

describe('audience and subject', () => {
  test('wrong audience: /user 400 validation_failed, REST 401 PGRST303', async () => {
    await assertRejected(await withOurKey({ aud: 'service' }), {
      user: { status: 400, code: 'validation_failed', message: "Token audience doesn't match request audience" },
      rest: { code: 'PGRST303', message: 'JWT not in audience' },
    });
    const noAud = await withOurKey({ aud: undefined });
    assert.equal((await idpRequest(idp, 'GET', '/rest/v1/notes', { token: noAud })).status, 401);
  });

  test('subject and session checks on /user', async () => {
    const missing = await idpRequest(idp, 'GET', '/auth/v1/user', { token: await withOurKey({ sub: undefined }) });
    assert.deepEqual([missing.status, missing.body], [403, { code: 'bad_jwt', message: 'invalid claim: missing sub claim' }]);
    const notUuid = await idpRequest(idp, 'GET', '/auth/v1/user', { token: await withOurKey({ sub: 'alice' }) });
    assert.deepEqual([notUuid.status, notUuid.body], [400, { code: 'bad_jwt', message: 'invalid claim: sub claim must be a UUID' }]);
    const unknown = await idpRequest(idp, 'GET', '/auth/v1/user', {
      token: await withOurKey({ sub: '00000000-0000-4000-8000-000000000000' }),
    });
    assert.deepEqual(
      [unknown.status, unknown.body],
      [403, { code: 'user_not_found', message: 'User from sub claim in JWT does not exist' }],
    );
    const badSession = await idpRequest(idp, 'GET', '/auth/v1/user', { token: await withOurKey({ session_id: 'x' }) });
    assert.deepEqual(
      [badSession.status, badSession.body],
      [403, { code: 'bad_jwt', message: 'invalid claim: session_id claim must be a UUID' }],
    );
    const otherSession = await idpRequest(idp, 'GET', '/auth/v1/user', {
      token: await withOurKey({ session_id: '00000000-0000-4000-8000-000000000000' }),
    });
    assert.deepEqual(
      [otherSession.status, otherSession.body],
      [403, { code: 'session_not_found', message: 'Session from session_id claim in JWT does not exist' }],
    );
    // A live session that belongs to someone else is no session of alice's.
    const bob = await createUser(idp, 'bob-jwt@example.com');
    const bobsSession = await idpRequest(idp, 'GET', '/auth/v1/user', {
      token: await withOurKey({ session_id: decodeJwt(bob.token).session_id }),
    });
    assert.deepEqual(
      [bobsSession.status, bobsSession.body],
      [403, { code: 'session_not_found', message: 'Session from session_id claim in JWT does not exist' }],
    );
    // The user is checked before the session_id claim.
    const both = await idpRequest(idp, 'GET', '/auth/v1/user', {
      token: await withOurKey({ sub: '00000000-0000-4000-8000-000000000000', session_id: 'x' }),
    });
    assert.deepEqual([both.status, both.body], [403, { code: 'user_not_found', message: 'User from sub claim in JWT does not exist' }]);
  });
});

describe('signature and structure mangling', () => {
  test('truncated, re-padded, swapped, bit-flipped, tampered payload, wrong part count', async () => {
    const [h, p, s] = alice.token.split('.') as [string, string, string];
    const other = await createUser(idp, 'mallory-jwt@example.com');
    const otherSignature = other.token.split('.')[2]!;
    const flipped = Buffer.from(s, 'base64url');
    flipped[10] = flipped[10]! ^ 0x01;
    const tampered = b64({ ...realClaims, sub: other.id });
    const variants = [
      `${h}.${p}.${s.slice(0, -4)}`,
      `${h}.${p}.${s.slice(0, -2)}==`,
      `${h}.${p}.${s}=`,
      `${h}.${p}.${s}==`,
      `${h}.${p}.${Buffer.from(s, 'base64url').toString('base64')}`,
      `${h}.${p}.${otherSignature}`,
      `${h}.${p}.${flipped.toString('base64url')}`,
      `${h}.${tampered}.${s}`,
      `${h}.${p}`,
      `${h}.${p}.${s}.${s}`,
      `${h}..${s}`,
      'a.b.c',
      `${b64('not json')}.${p}.${s}`,
    ];
    for (const token of variants) await assertRejected(token);
    const twoParts = await idpRequest(idp, 'GET', '/rest/v1/notes', { token: `${h}.${p}` });
    assert.equal((twoParts.body as { message: string }).message, 'Expected 3 parts in JWT; got 2');
  });
});
