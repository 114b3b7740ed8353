import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { before, test } from 'node:test';
import { SignJWT, decodeJwt, exportJWK, generateKeyPair } from 'jose';
import { NO_TOKEN } from '../src/accounts/auth.js';
import type { PublicUser } from '../src/accounts/repository.js';
import { USER_NOT_FOUND } from '../src/accounts/service.js';
import { INVALID_TOKEN } from '../src/accounts/tokens.js';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { TEST_SECRET, accountsSuite, assertError, bearer, loginToken, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
const PASSWORD = 'profile password';
const secret = new TextEncoder().encode(TEST_SECRET);
let app: App;
let user: PublicUser;
let token: string;

const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** A token assembled by hand, signed with HMAC-SHA256 under `key` (or unsigned). */
function handMade(header: Record<string, unknown>, payload: Record<string, unknown> | unknown[], key?: string | Buffer): string {
  const input = `${b64(header)}.${b64(payload)}`;
  const signature = key === undefined ? '' : createHmac('sha256', key).update(input).digest('base64url');
  return `${input}.${signature}`;
}

const me = (headers: Record<string, string>) => app.inject({ method: 'GET', url: '/auth/me', headers });

before(async () => {
  app = await suite.app({}, { clock });
  user = await registerUser(app, { name: 'Tokens', email: uniqueEmail('tokens'), password: PASSWORD });
  token = await loginToken(app, user.email, PASSWORD);
});

test('rule 5: /auth/me answers 200 with the caller in the envelope', async () => {
  const res = await me(bearer(token));
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(res.json(), { status: 200, response: 'OK', message: 'User profile retrieved successfully', data: user });
});

test('a missing header, or one not starting with "Bearer ", is 401 "Access denied. No token provided."', async (t) => {
  const cases: Array<[string, Record<string, string>]> = [
    ['no header', {}],
    ['empty header', { authorization: '' }],
    ['the token alone', { authorization: token }],
    ['lowercase scheme', { authorization: `bearer ${token}` }],
    ['Basic scheme', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
    ['Token scheme', { authorization: `Token ${token}` }],
    ['scheme without token', { authorization: 'Bearer' }],
    ['scheme glued to the token', { authorization: `Bearer${token}` }],
  ];
  for (const [label, headers] of cases) {
    await t.test(label, async () => {
      const res = await me(headers);
      assertError(res, 401, NO_TOKEN);
      assert.equal(res.json().response, 'Unauthorized');
    });
  }
});

test('the hand-made token builder is right: a correct HS256 token built by hand is accepted', async () => {
  const claims = decodeJwt(token);
  const res = await me(bearer(handMade({ alg: 'HS256', typ: 'JWT' }, claims, TEST_SECRET)));
  assert.equal(res.statusCode, 200, res.body);
});

test('forged, tampered, confused-algorithm and header-trick tokens are all 401 "Invalid or expired token."', async (t) => {
  const claims = decodeJwt(token);
  const asAdmin = { ...claims, role: 'admin' };
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const rsa = await generateKeyPair('RS256');
  const ec = await generateKeyPair('ES256');
  const attackerSecret = new TextEncoder().encode('attacker-secret-attacker-secret-attacker');
  const now = Math.floor(clock() / 1000);
  const fresh = { id: user.id, role: 'admin', iat: now, exp: now + 3600 };
  const withOurSecret = (alg: string) => new SignJWT(asAdmin).setProtectedHeader({ alg }).sign(secret);

  const cases: Array<[string, string | Promise<string>]> = [
    ['alg none, empty signature', handMade({ alg: 'none', typ: 'JWT' }, asAdmin)],
    ['alg none, original signature', `${b64({ alg: 'none' })}.${b64(asAdmin)}.${signature}`],
    ['alg "None"', handMade({ alg: 'None' }, asAdmin)],
    ['HS384 with the real secret', withOurSecret('HS384')],
    ['HS512 with the real secret', withOurSecret('HS512')],
    ['RS256 with an attacker key', new SignJWT(asAdmin).setProtectedHeader({ alg: 'RS256' }).sign(rsa.privateKey)],
    ['ES256 with an attacker key', new SignJWT(asAdmin).setProtectedHeader({ alg: 'ES256' }).sign(ec.privateKey)],
    [
      'RS256 with the attacker public key embedded as jwk',
      (async () => new SignJWT(asAdmin).setProtectedHeader({ alg: 'RS256', jwk: await exportJWK(rsa.publicKey) }).sign(rsa.privateKey))(),
    ],
    [
      'HS256 with an attacker oct key embedded as jwk',
      handMade(
        { alg: 'HS256', jwk: { kty: 'oct', k: Buffer.from(attackerSecret).toString('base64url') } },
        fresh,
        Buffer.from(attackerSecret),
      ),
    ],
    [
      'HS256 with jku pointing at an attacker key set',
      handMade({ alg: 'HS256', jku: 'https://attacker.example/jwks.json', kid: 'a' }, fresh, Buffer.from(attackerSecret)),
    ],
    ['HS256 with a path-traversal kid and an empty key', handMade({ alg: 'HS256', kid: '../../../../dev/null' }, fresh, '')],
    ['HS256 with a SQL kid and an empty key', handMade({ alg: 'HS256', kid: "x' UNION SELECT '" }, fresh, '')],
    ['HS256 with another secret', new SignJWT(fresh).setProtectedHeader({ alg: 'HS256' }).sign(attackerSecret)],
    ['payload changed to role admin, signature kept', `${header}.${b64(asAdmin)}.${signature}`],
    ['payload with a later exp, signature kept', `${header}.${b64({ ...claims, exp: claims.exp! + 86_400 })}.${signature}`],
    ['signature altered', `${header}.${payload}.${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`],
    ['signature removed', `${header}.${payload}.`],
    ['two parts only', `${header}.${payload}`],
    ['garbage', 'not.a.jwt'],
    ['extra space after the scheme', ` ${token}`],
    ['signed right but without exp', handMade({ alg: 'HS256' }, { id: user.id, role: 'user', iat: now }, TEST_SECRET)],
    ['signed right but with an unknown role', handMade({ alg: 'HS256' }, { ...fresh, role: 'superuser' }, TEST_SECRET)],
    ['signed right but with an id that is not a UUID', handMade({ alg: 'HS256' }, { ...fresh, id: "1' OR '1'='1" }, TEST_SECRET)],
    ['signed right but without an id', handMade({ alg: 'HS256' }, { role: 'user', iat: now, exp: now + 60 }, TEST_SECRET)],
    ['signed right but without iat', handMade({ alg: 'HS256' }, { id: user.id, role: 'user', exp: now + 60 }, TEST_SECRET)],
    ['signed right but with exp as a string', handMade({ alg: 'HS256' }, { ...fresh, exp: String(now + 60) }, TEST_SECRET)],
    ['signed right but not valid before a later nbf', handMade({ alg: 'HS256' }, { ...fresh, nbf: now + 60 }, TEST_SECRET)],
    ['signed right but with a crit header parameter', handMade({ alg: 'HS256', crit: ['b64'], b64: true }, fresh, TEST_SECRET)],
    ['signed right but the payload is a JSON array', handMade({ alg: 'HS256' }, [fresh], TEST_SECRET)],
  ];
  for (const [label, forged] of cases) {
    await t.test(label, async () => assertError(await me(bearer(await forged)), 401, INVALID_TOKEN));
  }
  // None of them reached admin either.
  assertError(await app.inject({ method: 'GET', url: '/admin/users', headers: bearer(await withOurSecret('HS512')) }), 401, INVALID_TOKEN);
});

test('expiry is exact: valid until exp, 401 at exp and one second after (injected clock)', async () => {
  const start = clock();
  const issued = await loginToken(app, user.email, PASSWORD);
  const { exp } = decodeJwt(issued);
  assert.equal(exp, Math.floor(start / 1000) + 3600);
  try {
    clock.set(exp! * 1000 - 1000);
    assert.equal((await me(bearer(issued))).statusCode, 200);
    clock.set(exp! * 1000);
    assertError(await me(bearer(issued)), 401, INVALID_TOKEN);
    clock.set(exp! * 1000 + 1000);
    assertError(await me(bearer(issued)), 401, INVALID_TOKEN);
  } finally {
    clock.set(start);
  }
});

test('a token signed with another service secret is refused', async () => {
  const other = await suite.app({ JWT_SECRET: 'another-secret-of-at-least-32-bytes!!' }, { clock });
  assertError(await other.inject({ method: 'GET', url: '/auth/me', headers: bearer(token) }), 401, INVALID_TOKEN);
});

test('rule 5: a valid token whose user was deleted since gets 404 "User not found" in the envelope', async () => {
  const doomed = await registerUser(app, { name: 'Doomed', email: uniqueEmail('doomed'), password: PASSWORD });
  const doomedToken = await loginToken(app, doomed.email, PASSWORD);
  assert.equal((await me(bearer(doomedToken))).statusCode, 200);
  await suite.pool.query('DELETE FROM users WHERE id = $1', [doomed.id]);
  const res = await me(bearer(doomedToken));
  assertError(res, 404, USER_NOT_FOUND);
  assert.equal(res.json().response, 'Not Found');
});

test('auth runs before validation and body parsing: no token on a protected route is 401 even with a bad query', async () => {
  assertError(await app.inject({ method: 'GET', url: '/admin/users?per_page=0' }), 401, NO_TOKEN);
  assertError(await app.inject({ method: 'GET', url: '/admin/users?per_page=0', headers: bearer('x.y.z') }), 401, INVALID_TOKEN);
});

noSecretInAnyResponse();
