// ES256 access tokens and GET /.well-known/jwks.json, checked the way another service checks
// them: jose's createRemoteJWKSet + jwtVerify over real HTTP against a listening accounts app.
import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import {
  SignJWT,
  calculateJwkThumbprint,
  compactVerify,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  exportJWK,
  importJWK,
  jwtVerify,
} from 'jose';
import { NO_PUBLIC_KEYS } from '../src/accounts/routes/jwks.js';
import { INVALID_TOKEN } from '../src/accounts/tokens.js';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { TEST_SECRET, accountsSuite, assertError, bearer, loginToken, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';

const suite = accountsSuite();
const PASSWORD = 'jwks password';

const newKeyPem = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const es256 = (privateKey: string, env: Record<string, string> = {}) => ({ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: privateKey, ...env });

async function userToken(app: App, label: string): Promise<string> {
  const user = await registerUser(app, { name: label, email: uniqueEmail(label), password: PASSWORD });
  return loginToken(app, user.email, PASSWORD);
}

/** The app on a real port of the loopback interface; its JWKS address. */
async function listening(app: App): Promise<URL> {
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return new URL('/.well-known/jwks.json', address);
}

const me = (app: App, token: string) => app.inject({ method: 'GET', url: '/auth/me', headers: bearer(token) });

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

// P-256 group order: (r, n − s) is the twin of a signature (r, s).
const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
function withOtherS(token: string): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const bytes = Buffer.from(signature, 'base64url');
  const s = BigInt(`0x${bytes.subarray(32).toString('hex')}`);
  const twin = Buffer.from((P256_ORDER - s).toString(16).padStart(64, '0'), 'hex');
  return `${header}.${payload}.${Buffer.concat([bytes.subarray(0, 32), twin]).toString('base64url')}`;
}

test('another service verifies a login token with createRemoteJWKSet + jwtVerify (algorithms: ES256) over real HTTP', async () => {
  const app = await suite.app(es256(newKeyPem()));
  const jwksUrl = await listening(app);
  const token = await userToken(app, 'remote');

  const JWKS = createRemoteJWKSet(jwksUrl);
  const { payload, protectedHeader } = await jwtVerify(token, JWKS, { algorithms: ['ES256'] });
  // The contract's claims and nothing else; the key is named in the header.
  assert.deepEqual(Object.keys(payload).sort(), ['exp', 'iat', 'id', 'role']);
  assert.equal(payload.role, 'user');
  assert.equal(protectedHeader.alg, 'ES256');
  assert.equal(protectedHeader.typ, 'JWT');

  const res = await fetch(jwksUrl);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('cache-control'), 'public, max-age=300');
  const body = (await res.json()) as { keys: Array<Record<string, unknown>> };
  assert.equal(body.keys.length, 1);
  const [jwk] = body.keys as [Record<string, string>];
  assert.deepEqual(Object.keys(jwk).sort(), ['alg', 'crv', 'key_ops', 'kid', 'kty', 'use', 'x', 'y'], 'the public half only, no "d"');
  // kid is the RFC 7638 thumbprint of the key, and the tokens name it.
  assert.equal(jwk.kid, await calculateJwkThumbprint({ kty: jwk.kty!, crv: jwk.crv!, x: jwk.x!, y: jwk.y! }));
  assert.equal(protectedHeader.kid, jwk.kid);
  // The service itself accepts the token too.
  assert.equal((await me(app, token)).statusCode, 200);
});

test('ES256 verification is pinned: HS256, none, unknown kid, another key, embedded key, tampering and high-s are 401', async (t) => {
  const app = await suite.app(es256(newKeyPem()));
  const token = await userToken(app, 'pinned');
  const claims = decodeJwt(token);
  const { kid } = decodeProtectedHeader(token);
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const attackerJwk = await exportJWK(attacker.publicKey);
  const attackerKid = await calculateJwkThumbprint(attackerJwk);
  const hs256 = (head: Record<string, unknown>) => {
    const input = `${b64(head)}.${b64(claims)}`;
    return `${input}.${createHmac('sha256', TEST_SECRET).update(input).digest('base64url')}`;
  };
  const signedBy = (key: typeof attacker.privateKey, head: Record<string, unknown>, body: Record<string, unknown> = claims) =>
    new SignJWT(body).setProtectedHeader({ alg: 'ES256', ...head }).sign(key);

  const highS = withOtherS(token);
  // Only meaningful if jose alone would take the twin: it does, so the refusal is ours.
  const publicKey = await importJWK((await app.inject({ url: '/.well-known/jwks.json' }).then((r) => r.json())).keys[0], 'ES256');
  await compactVerify(highS, publicKey);
  assert.notEqual(highS, token);

  const cases: Array<[string, string]> = [
    ['HS256 signed with JWT_SECRET', hs256({ alg: 'HS256', typ: 'JWT' })],
    ['HS256 signed with JWT_SECRET, our kid', hs256({ alg: 'HS256', typ: 'JWT', kid })],
    ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${payload}.${signature}`],
    ['alg none, our kid', `${b64({ alg: 'none', kid })}.${payload}.${signature}`],
    ['unknown kid', await signedBy(attacker.privateKey, { kid: attackerKid })],
    ['no kid', `${b64({ alg: 'ES256', typ: 'JWT' })}.${payload}.${signature}`],
    ['our kid, another key', await signedBy(attacker.privateKey, { kid })],
    ['the key embedded in the header', await signedBy(attacker.privateKey, { kid: attackerKid, jwk: attackerJwk })],
    ['our header, role changed to admin', `${header}.${b64({ ...claims, role: 'admin' })}.${signature}`],
    ['high-s twin of the issued signature', highS],
    ['ES384 header on our signature', `${b64({ alg: 'ES384', kid })}.${payload}.${signature}`],
  ];
  for (const [label, forged] of cases) {
    await t.test(label, async () => assertError(await me(app, forged), 401, INVALID_TOKEN));
  }
  assert.equal((await me(app, token)).statusCode, 200, 'the issued token still works');
});

test('rotation: a token of the previous key and one of the new key both verify through the remote JWKS; the old one fails once expired', async () => {
  const clock = manualClock(Date.now());
  const before = await suite.app(es256(newKeyPem(), { JWT_EXPIRES_IN: '1h' }), { clock });
  const tokenA = await userToken(before, 'rotation-a');
  // Step 2 of the procedure in docs/accounts.md: the key set served before becomes JWT_PREVIOUS_PUBLIC_KEYS.
  const servedBefore = (await before.inject({ url: '/.well-known/jwks.json' })).body;
  await before.close();

  clock.advance(30 * 60_000);
  const after = await suite.app(es256(newKeyPem(), { JWT_EXPIRES_IN: '1h', JWT_PREVIOUS_PUBLIC_KEYS: servedBefore }), { clock });
  const jwksUrl = await listening(after);
  const tokenB = await userToken(after, 'rotation-b');
  const kidA = decodeProtectedHeader(tokenA).kid;
  const kidB = decodeProtectedHeader(tokenB).kid;
  assert.notEqual(kidA, kidB);

  const served = (await (await fetch(jwksUrl)).json()) as { keys: Array<{ kid: string }> };
  assert.deepEqual(
    served.keys.map((k) => k.kid),
    [kidB, kidA],
    'the current key first, then the previous one',
  );

  const JWKS = createRemoteJWKSet(jwksUrl);
  const verify = (token: string) => jwtVerify(token, JWKS, { algorithms: ['ES256'], currentDate: new Date(clock()) });
  assert.equal((await verify(tokenA)).protectedHeader.kid, kidA);
  assert.equal((await verify(tokenB)).protectedHeader.kid, kidB);
  assert.equal((await me(after, tokenA)).statusCode, 200);
  assert.equal((await me(after, tokenB)).statusCode, 200);

  // Token A's last second: it expires at its exp, token B lives on.
  clock.set((decodeJwt(tokenA).exp as number) * 1000);
  await assert.rejects(verify(tokenA), errors.JWTExpired);
  assertError(await me(after, tokenA), 401, INVALID_TOKEN);
  assert.equal((await verify(tokenB)).payload.role, 'user');
  assert.equal((await me(after, tokenB)).statusCode, 200);
});

test('rotation with several instances: the new key, published ahead, is accepted before anything signs with it, and listed once after the switch', async () => {
  const oldKey = newKeyPem();
  const newKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const newPrivatePem = newKey.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const newPublicPem = newKey.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  // Before the switch: an instance still signing with the old key, the new one published beside it.
  const ahead = await suite.app(es256(oldKey, { JWT_PREVIOUS_PUBLIC_KEYS: newPublicPem }));
  const servedAhead = (await ahead.inject({ url: '/.well-known/jwks.json' })).body;
  const kidsAhead = (JSON.parse(servedAhead) as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid);
  assert.equal(kidsAhead.length, 2);
  // After the switch, on another instance: its tokens already verify on the one not yet restarted.
  const switched = await suite.app(es256(newPrivatePem, { JWT_PREVIOUS_PUBLIC_KEYS: servedAhead }));
  const tokenNew = await userToken(switched, 'switched');
  const tokenOld = await userToken(ahead, 'ahead');
  assert.equal(decodeProtectedHeader(tokenNew).kid, kidsAhead[1]);
  assert.equal((await me(ahead, tokenNew)).statusCode, 200);
  assert.equal((await me(switched, tokenOld)).statusCode, 200);
  const kidsSwitched = ((await switched.inject({ url: '/.well-known/jwks.json' })).json() as { keys: Array<{ kid: string }> }).keys.map(
    (k) => k.kid,
  );
  assert.deepEqual(kidsSwitched, [kidsAhead[1], kidsAhead[0]], 'the current key once, first; then the old one');
});

test('without JWT_PRIVATE_KEY the key is generated once under DATA_DIR (mode 0600) and kept across restarts', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'accounts-keys-'));
  try {
    const first = await suite.app({ JWT_ALGORITHM: 'ES256', DATA_DIR: dir });
    const token = await userToken(first, 'generated');
    const file = path.join(dir, 'secrets.json');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match((JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>).JWT_PRIVATE_KEY!, /^-----BEGIN PRIVATE KEY-----/);
    await first.close();
    const second = await suite.app({ JWT_ALGORITHM: 'ES256', DATA_DIR: dir });
    assert.equal((await me(second, token)).statusCode, 200, 'a token from before the restart still verifies');
    const kids = async (app: App) =>
      ((await app.inject({ url: '/.well-known/jwks.json' })).json() as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid);
    assert.deepEqual(await kids(second), [decodeProtectedHeader(token).kid]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('PEM and JWK forms of JWT_PRIVATE_KEY give the same kid', async () => {
  const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const fromPem = await suite.app(es256(key.export({ type: 'pkcs8', format: 'pem' }).toString()));
  const fromJwk = await suite.app(es256(JSON.stringify(key.export({ format: 'jwk' }))));
  const kid = async (app: App) => (await app.inject({ url: '/.well-known/jwks.json' })).json().keys[0].kid as string;
  assert.equal(await kid(fromPem), await kid(fromJwk));
});

test('with HS256 (the default) the JWKS is 404 in the envelope and tokens carry no kid', async () => {
  const app = await suite.app();
  const res = await app.inject({ url: '/.well-known/jwks.json' });
  assertError(res, 404, NO_PUBLIC_KEYS);
  const token = await userToken(app, 'hs256');
  assert.deepEqual(decodeProtectedHeader(token), { alg: 'HS256', typ: 'JWT' });
});

noSecretInAnyResponse();
