// Forged and mangled JWTs. Each attack starts from a real token (its header and claims), so only
// the attack itself differs from what the service would accept. Signing is done with node:crypto
// directly: a JWT library would refuse to produce most of these.
import { createHmac, createPublicKey, generateKeyPairSync, type KeyObject, sign as cryptoSign } from 'node:crypto';
import { toLowSEs256Signature } from '../../../src/kit/jws.js';

export type Json = Record<string, unknown>;

export const b64url = (value: unknown): string =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

export function decodePart(token: string, index: 0 | 1): Json {
  return JSON.parse(Buffer.from(token.split('.')[index]!, 'base64url').toString('utf8')) as Json;
}

const HASH = { HS256: 'sha256', HS384: 'sha384', HS512: 'sha512' } as const;

export function hmacToken(alg: keyof typeof HASH, header: Json, claims: Json, key: string | Buffer): string {
  const input = `${b64url({ ...header, alg })}.${b64url(claims)}`;
  return `${input}.${createHmac(HASH[alg], key).update(input).digest('base64url')}`;
}

type AsymAlg = 'RS256' | 'PS256' | 'ES256' | 'ES384' | 'EdDSA';

/** Signs with a private key; ES* signatures in JOSE's raw r||s form unless `der` is asked for. */
export function asymToken(alg: AsymAlg, key: KeyObject, header: Json, claims: Json, opts: { der?: boolean } = {}): string {
  const input = Buffer.from(`${b64url({ ...header, alg })}.${b64url(claims)}`);
  let signature: Buffer;
  switch (alg) {
    case 'RS256':
      signature = cryptoSign('sha256', input, key);
      break;
    case 'PS256':
      signature = cryptoSign('sha256', input, { key, padding: 6 /* RSA_PKCS1_PSS_PADDING */, saltLength: 32 });
      break;
    case 'ES256':
      signature = cryptoSign('sha256', input, { key, dsaEncoding: opts.der ? 'der' : 'ieee-p1363' });
      // Low s, as the idp signs, so an attack signed with its key differs from a real token only
      // in the attack (the high-s twin is an attack of its own, `malleated`).
      if (!opts.der) signature = toLowSEs256Signature(signature);
      break;
    case 'ES384':
      signature = cryptoSign('sha384', input, { key, dsaEncoding: 'ieee-p1363' });
      break;
    case 'EdDSA':
      signature = cryptoSign(null, input, key);
      break;
  }
  return `${input.toString()}.${signature.toString('base64url')}`;
}

/** Keys an attacker controls. */
export function attackerKeys() {
  return {
    rsa: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
    p256: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
    p384: generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey,
    ed25519: generateKeyPairSync('ed25519').privateKey,
  };
}

const publicJwk = (key: KeyObject) => createPublicKey(key).export({ format: 'jwk' });

/**
 * The same signature bytes spelled differently: the last base64url character of a 32- or 64-byte
 * value carries spare bits that decoders ignore, so flipping one yields a non-canonical encoding.
 */
export function nonCanonical(segment: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const last = alphabet.indexOf(segment[segment.length - 1]!);
  return segment.slice(0, -1) + alphabet[last ^ 1]!;
}

/** The order n of the P-256 group. */
const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/**
 * The ECDSA twin of an ES256 token: s replaced by n − s. It verifies under the same key with the
 * same claims, without the key, so only a low-s rule tells the two apart.
 */
export function malleated(token: string): string {
  const [h, p, sig] = token.split('.') as [string, string, string];
  const raw = Buffer.from(sig, 'base64url');
  const s = BigInt(`0x${raw.subarray(32).toString('hex')}`);
  const twin = Buffer.from((P256_ORDER - s).toString(16).padStart(64, '0'), 'hex');
  return `${h}.${p}.${Buffer.concat([raw.subarray(0, 32), twin]).toString('base64url')}`;
}

export interface Attack {
  label: string;
  token: string;
  /** What the idp's /auth/v1/user says (GoTrue's documented statuses). */
  userApi: { status: number; code: string };
  /** PostgREST's code for it. */
  restCode: 'PGRST301' | 'PGRST303';
}

const BAD_JWT = { status: 403, code: 'bad_jwt' };

/** Signature-level mangling shared by both corpora. */
function mangled(real: string, other: string, claimsChange: (c: Json) => Json): Array<[string, string]> {
  const [h, p, s] = real.split('.') as [string, string, string];
  const otherPayload = other.split('.')[1]!;
  const std = s.replace(/-/g, '+').replace(/_/g, '/');
  return [
    ['signature truncated by one character', `${h}.${p}.${s.slice(0, -1)}`],
    ['signature truncated to half', `${h}.${p}.${s.slice(0, s.length >> 1)}`],
    ['signature re-padded with =', `${h}.${p}.${s}=`],
    ['signature re-padded with ==', `${h}.${p}.${s}==`],
    ['signature spelled non-canonically (spare bits set)', `${h}.${p}.${nonCanonical(s)}`],
    ['signature in standard base64 (+ and /)', `${h}.${p}.${std === s ? `${s.slice(0, -1)}+` : std}`],
    ['empty signature', `${h}.${p}.`],
    ['payload of another user, signature kept', `${h}.${otherPayload}.${s}`],
    ['payload tampered, signature kept', `${h}.${b64url(claimsChange(decodePart(real, 1)))}.${s}`],
    ['header re-padded with =', `${h}=.${p}.${s}`],
    ['two parts', `${h}.${p}`],
    ['four parts', `${h}.${p}.${s}.${s}`],
    ['five parts (JWE shape)', `${h}.${p}.${s}.${s}.${s}`],
    ['header is not JSON', `${b64url('not json')}.${p}.${s}`],
    ['header is a JSON array', `${b64url([1, 2])}.${p}.${s}`],
    ['payload is not JSON', `${h}.${b64url('{"sub":')}.${s}`],
  ];
}

/**
 * Tokens for the idp family (the idp's two APIs and notes, which accepts what the idp issues):
 * ES256 with the idp's key and kid. `signingKey` is the idp's private key, so time-claim and
 * audience cases carry a valid signature and only the claim is wrong.
 */
export function idpCorpus(ctx: {
  realToken: string;
  otherToken: string;
  signingKey: KeyObject;
  apiKeys: string[];
  nowSeconds: number;
}): Attack[] {
  const header = decodePart(ctx.realToken, 0);
  const claims = decodePart(ctx.realToken, 1);
  const kid = header.kid;
  const attacker = attackerKeys();
  const now = ctx.nowSeconds;
  const fresh = { ...claims, iat: now, exp: now + 3600 };
  const pub = createPublicKey(ctx.signingKey);
  const pem = pub.export({ type: 'spki', format: 'pem' }).toString();
  const der = pub.export({ type: 'spki', format: 'der' });
  const jwk = pub.export({ format: 'jwk' });
  const ours = (changes: Json, extraHeader: Json = {}) =>
    asymToken('ES256', ctx.signingKey, { typ: 'JWT', kid, ...extraHeader }, { ...fresh, ...changes });
  const bad = (label: string, token: string, restCode: Attack['restCode'] = 'PGRST301'): Attack => ({
    label,
    token,
    userApi: BAD_JWT,
    restCode,
  });

  const attacks: Attack[] = [
    bad('alg none, empty signature', `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(fresh)}.`),
    bad('alg none, original signature kept', `${b64url({ alg: 'none', typ: 'JWT', kid })}.${b64url(fresh)}.${ctx.realToken.split('.')[2]}`),
    bad('alg "None"', `${b64url({ alg: 'None', kid })}.${b64url(fresh)}.`),
    bad('alg "NONE"', `${b64url({ alg: 'NONE', kid })}.${b64url(fresh)}.`),
    bad('alg missing', `${b64url({ typ: 'JWT', kid })}.${b64url(fresh)}.${ctx.realToken.split('.')[2]}`),
    bad('HS256 keyed with the public key (PEM)', hmacToken('HS256', { typ: 'JWT', kid }, fresh, pem)),
    bad('HS256 keyed with the public key (PEM, no final newline)', hmacToken('HS256', { typ: 'JWT', kid }, fresh, pem.trimEnd())),
    bad('HS256 keyed with the public key (DER)', hmacToken('HS256', { typ: 'JWT', kid }, fresh, der)),
    bad('HS256 keyed with the public key (JWK text)', hmacToken('HS256', { typ: 'JWT', kid }, fresh, JSON.stringify(jwk))),
    bad('HS256 keyed with the public x coordinate', hmacToken('HS256', { typ: 'JWT', kid }, fresh, String(jwk.x))),
    ...ctx.apiKeys.flatMap((key, i) =>
      (['HS256', 'HS384', 'HS512'] as const).map((alg) =>
        bad(`${alg} keyed with API key #${i + 1}`, hmacToken(alg, { typ: 'JWT', kid }, fresh, key)),
      ),
    ),
    bad('RS256 from an attacker key under our kid', asymToken('RS256', attacker.rsa, { typ: 'JWT', kid }, fresh)),
    bad('PS256 from an attacker key under our kid', asymToken('PS256', attacker.rsa, { typ: 'JWT', kid }, fresh)),
    bad('ES256 from an attacker key under our kid', asymToken('ES256', attacker.p256, { typ: 'JWT', kid }, fresh)),
    bad('ES384 from an attacker key under our kid', asymToken('ES384', attacker.p384, { typ: 'JWT', kid }, fresh)),
    bad('EdDSA from an attacker key under our kid', asymToken('EdDSA', attacker.ed25519, { typ: 'JWT', kid }, fresh)),
    bad('ES256 from an attacker key, no kid', asymToken('ES256', attacker.p256, { typ: 'JWT' }, fresh)),
    bad('our key under a wrong kid', ours({}, { kid: 'attacker-kid' })),
    bad('our key under a path-traversal kid', ours({}, { kid: '../../../../dev/null' })),
    bad('our key under a SQL kid', ours({}, { kid: "x' OR '1'='1" })),
    bad(
      'jku pointing at an attacker key set (attacker-signed)',
      asymToken('ES256', attacker.p256, { typ: 'JWT', kid, jku: 'http://127.0.0.1:9/attacker/jwks.json' }, fresh),
    ),
    bad(
      'x5u pointing at an attacker certificate (attacker-signed)',
      asymToken('ES256', attacker.p256, { typ: 'JWT', kid, x5u: 'http://127.0.0.1:9/attacker.pem' }, fresh),
    ),
    bad(
      'jwk embedding the attacker key (attacker-signed)',
      asymToken('ES256', attacker.p256, { typ: 'JWT', kid, jwk: publicJwk(attacker.p256) }, fresh),
    ),
    bad(
      'jwk embedding an attacker RSA key (attacker-signed)',
      asymToken('RS256', attacker.rsa, { typ: 'JWT', jwk: publicJwk(attacker.rsa) }, fresh),
    ),
    bad('crit naming an unknown extension (our key)', ours({}, { crit: ['exp-v2'], 'exp-v2': true })),
    bad('ES256 signature DER-encoded (our key)', asymToken('ES256', ctx.signingKey, { typ: 'JWT', kid }, fresh, { der: true })),
    bad('signature malleated: s replaced by n − s (high s)', malleated(ctx.realToken)),
    // Auth refuses a token from exp on; REST allows PostgREST's 30 s of skew (idp-jwt.test.ts has
    // both boundaries), so the token both must refuse is 31 s past exp.
    bad('expired 31 seconds ago, past the REST skew (our key)', ours({ iat: now - 3631, exp: now - 31 }), 'PGRST303'),
    bad('exp missing (our key)', ours({ exp: undefined })),
    bad('exp as a string (our key)', ours({ exp: String(now + 3600) })),
    bad('not valid before two minutes from now (our key)', ours({ nbf: now + 120 }), 'PGRST303'),
    bad('issued two minutes in the future (our key)', ours({ iat: now + 120 }), 'PGRST303'),
    {
      label: 'audience "anon" (our key)',
      token: ours({ aud: 'anon' }),
      userApi: { status: 400, code: 'validation_failed' },
      restCode: 'PGRST303',
    },
    {
      label: 'audience missing (our key)',
      token: ours({ aud: undefined }),
      userApi: { status: 400, code: 'validation_failed' },
      restCode: 'PGRST303',
    },
    ...mangled(ctx.realToken, ctx.otherToken, (c) => ({ ...c, role: 'service_role' })).map(([label, token]) => bad(label, token)),
  ];
  return attacks;
}

/** Tokens for accounts: HS256 with JWT_SECRET, claims id and role. */
export function accountsCorpus(ctx: {
  realToken: string;
  otherToken: string;
  secret: string;
  nowSeconds: number;
}): Array<[string, string]> {
  const claims = decodePart(ctx.realToken, 1);
  const attacker = attackerKeys();
  const now = ctx.nowSeconds;
  const admin = { ...claims, role: 'admin', iat: now, exp: now + 3600 };
  const attackerSecret = 'attacker-secret-attacker-secret-attacker-secret';
  return [
    ['alg none, empty signature', `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(admin)}.`],
    ['alg none, original signature kept', `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(admin)}.${ctx.realToken.split('.')[2]}`],
    ['alg "None"', `${b64url({ alg: 'None' })}.${b64url(admin)}.`],
    ['alg missing', `${b64url({ typ: 'JWT' })}.${b64url(admin)}.${ctx.realToken.split('.')[2]}`],
    ['HS384 with the real secret', hmacToken('HS384', { typ: 'JWT' }, admin, ctx.secret)],
    ['HS512 with the real secret', hmacToken('HS512', { typ: 'JWT' }, admin, ctx.secret)],
    ['HS256 with another secret', hmacToken('HS256', { typ: 'JWT' }, admin, attackerSecret)],
    ['HS256 with an empty key', hmacToken('HS256', { typ: 'JWT' }, admin, '')],
    ['RS256 from an attacker key', asymToken('RS256', attacker.rsa, { typ: 'JWT' }, admin)],
    ['PS256 from an attacker key', asymToken('PS256', attacker.rsa, { typ: 'JWT' }, admin)],
    ['ES256 from an attacker key', asymToken('ES256', attacker.p256, { typ: 'JWT' }, admin)],
    ['EdDSA from an attacker key', asymToken('EdDSA', attacker.ed25519, { typ: 'JWT' }, admin)],
    ['wrong kid, attacker secret', hmacToken('HS256', { typ: 'JWT', kid: 'attacker' }, admin, attackerSecret)],
    [
      'jku pointing at an attacker key set (attacker-signed)',
      asymToken('RS256', attacker.rsa, { typ: 'JWT', jku: 'http://127.0.0.1:9/jwks.json', kid: 'a' }, admin),
    ],
    [
      'x5u pointing at an attacker certificate (attacker-signed)',
      asymToken('RS256', attacker.rsa, { typ: 'JWT', x5u: 'http://127.0.0.1:9/a.pem' }, admin),
    ],
    [
      'jwk embedding the attacker key (attacker-signed)',
      asymToken('ES256', attacker.p256, { typ: 'JWT', jwk: publicJwk(attacker.p256) }, admin),
    ],
    [
      'jwk embedding an attacker oct key',
      hmacToken('HS256', { typ: 'JWT', jwk: { kty: 'oct', k: Buffer.from(attackerSecret).toString('base64url') } }, admin, attackerSecret),
    ],
    [
      'crit naming an unknown extension (real secret)',
      hmacToken('HS256', { typ: 'JWT', crit: ['exp-v2'], 'exp-v2': true }, { ...claims, iat: now, exp: now + 3600 }, ctx.secret),
    ],
    ['expired by one second (real secret)', hmacToken('HS256', { typ: 'JWT' }, { ...claims, iat: now - 3601, exp: now - 1 }, ctx.secret)],
    [
      'not valid before two minutes from now (real secret)',
      hmacToken('HS256', { typ: 'JWT' }, { ...claims, iat: now, nbf: now + 120, exp: now + 3600 }, ctx.secret),
    ],
    [
      'issued two minutes in the future (real secret)',
      hmacToken('HS256', { typ: 'JWT' }, { ...claims, iat: now + 120, exp: now + 3600 }, ctx.secret),
    ],
    ...mangled(ctx.realToken, ctx.otherToken, (c) => ({ ...c, role: 'admin' })),
  ];
}
