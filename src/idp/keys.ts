import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, compactVerify, exportJWK, SignJWT, type JWK } from 'jose';
import type { Clock } from '../kit/clock.js';
import { hasLowSSignature, withLowSSignature } from '../kit/jws.js';
import { loadOrCreateSecret } from '../kit/secrets.js';

// Access tokens are ES256 JWTs with a `kid`: supabase-js then verifies them locally against the
// published JWKS (getClaims) instead of calling /user each time. Verification accepts exactly
// this one algorithm and this one key; nothing in a token's header can choose another.

/** How far in the future `nbf` / `iat` may be (clocks of several instances drift). `exp` gets none. */
export const CLOCK_SKEW_SECONDS = 30;

export const ACCESS_TOKEN_AUDIENCE = 'authenticated';

export interface AccessTokenClaims {
  iss: string;
  sub: string;
  aud: string;
  exp: number;
  iat: number;
  email: string;
  phone: string;
  app_metadata: Record<string, unknown>;
  user_metadata: Record<string, unknown>;
  role: string;
  aal: string;
  amr: Array<{ method: string; timestamp: number }>;
  session_id: string;
  is_anonymous: boolean;
}

/** Claims as found in a verified token: only the signature and time claims were checked. */
export type VerifiedClaims = Record<string, unknown> & { exp: number };

/** Why a token was refused. `structure` and `signature` are about the token; the rest about its claims. */
export type TokenProblem =
  | { kind: 'malformed'; reason: string }
  | { kind: 'unverifiable'; reason: string }
  | { kind: 'signature'; reason: string }
  | { kind: 'expired' }
  | { kind: 'not_yet_valid' }
  | { kind: 'issued_in_future' };

export type VerifyResult = { ok: true; claims: VerifiedClaims } | { ok: false; problem: TokenProblem };

// Header parameters that point at other keys. Honouring any of them lets a token bring its own key;
// a token carrying one is refused outright rather than silently ignored.
const FORBIDDEN_HEADERS = ['jku', 'jwk', 'x5u', 'x5c', 'x5t', 'x5t#S256', 'crit'];

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

const isCanonicalBase64url = (part: string) => Buffer.from(part, 'base64url').toString('base64url') === part;

function decodeJson(part: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export class SigningKeys {
  private constructor(
    private readonly privateKey: KeyObject,
    private readonly publicKey: KeyObject,
    readonly kid: string,
    private readonly publicJwk: JWK,
    private readonly clock: Clock,
  ) {}

  /** `source`: PEM or JWK text of a P-256 private key (validated by the config). */
  static async fromPrivateKey(source: string, clock: Clock): Promise<SigningKeys> {
    const privateKey = source.startsWith('{')
      ? createPrivateKey({ key: JSON.parse(source) as JsonWebKey, format: 'jwk' })
      : createPrivateKey(source);
    const publicKey = createPublicKey(privateKey);
    const { kty, crv, x, y } = await exportJWK(publicKey);
    // The thumbprint depends only on the key, so every instance with the same key agrees on the kid.
    const kid = await calculateJwkThumbprint({ kty, crv, x, y });
    const publicJwk: JWK = { kty, crv, x, y, kid, alg: 'ES256', use: 'sig', key_ops: ['verify'] };
    return new SigningKeys(privateKey, publicKey, kid, publicJwk, clock);
  }

  /** The configured key, else one generated once and kept under DATA_DIR. */
  static async load(configured: string | undefined, dataDir: string, clock: Clock): Promise<SigningKeys> {
    const source =
      configured ??
      (await loadOrCreateSecret(dataDir, 'IDP_SIGNING_KEY', () =>
        generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      ));
    return SigningKeys.fromPrivateKey(source, clock);
  }

  /** The public half only: a copy, so callers cannot alter what is served. */
  jwks(): { keys: JWK[] } {
    return { keys: [{ ...this.publicJwk, key_ops: ['verify'] }] };
  }

  nowSeconds(): number {
    return Math.floor(this.clock() / 1000);
  }

  async sign(claims: AccessTokenClaims): Promise<string> {
    const token = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: this.kid, typ: 'JWT' })
      .sign(this.privateKey);
    // ECDSA signers pick s or n − s at random; verification accepts only low s (see verify).
    return withLowSSignature(token);
  }

  /**
   * Signature and time claims. The audience and subject are the caller's business, because
   * GoTrue and PostgREST report them differently.
   */
  async verify(token: string): Promise<VerifyResult> {
    const fail = (problem: TokenProblem): VerifyResult => ({ ok: false, problem });
    const parts = token.split('.');
    if (parts.length !== 3) return fail({ kind: 'malformed', reason: `token contains an invalid number of segments (${parts.length})` });
    // Strict base64url: padding or other characters would let several spellings of one signature through.
    if (!COMPACT_JWS.test(token)) return fail({ kind: 'malformed', reason: 'token is not in base64url format' });
    // Decoders ignore the spare low bits of a segment's last character, so one signature has
    // several spellings that all verify: only the canonical one is the token that was issued.
    if (!parts.every(isCanonicalBase64url)) return fail({ kind: 'malformed', reason: 'token is not in canonical base64url format' });
    const header = decodeJson(parts[0]!);
    if (header === null) return fail({ kind: 'malformed', reason: 'could not JSON decode header' });
    if (header.alg !== 'ES256') return fail({ kind: 'unverifiable', reason: `signing method ${String(header.alg)} is invalid` });
    if (FORBIDDEN_HEADERS.some((name) => Object.hasOwn(header, name))) {
      return fail({ kind: 'unverifiable', reason: 'token header references a key' });
    }
    if (header.kid !== this.kid) return fail({ kind: 'unverifiable', reason: 'no key found for the kid' });
    // (r, n − s) verifies as well as (r, s): without this, anyone could mint a second token
    // string with the same claims. Only the low-s one is the token that was issued.
    if (!hasLowSSignature(token)) return fail({ kind: 'signature', reason: 'crypto/ecdsa: verification error' });
    try {
      await compactVerify(token, this.publicKey, { algorithms: ['ES256'] });
    } catch {
      return fail({ kind: 'signature', reason: 'crypto/ecdsa: verification error' });
    }
    const claims = decodeJson(parts[1]!);
    if (claims === null) return fail({ kind: 'malformed', reason: 'could not JSON decode claim' });
    const { exp, nbf, iat } = claims;
    if (typeof exp !== 'number' || !Number.isFinite(exp)) return fail({ kind: 'malformed', reason: 'exp claim is required' });
    if ((nbf !== undefined && typeof nbf !== 'number') || (iat !== undefined && typeof iat !== 'number')) {
      return fail({ kind: 'malformed', reason: 'time claims must be numbers' });
    }
    const now = this.nowSeconds();
    if (now >= exp) return fail({ kind: 'expired' });
    if (typeof nbf === 'number' && nbf > now + CLOCK_SKEW_SECONDS) return fail({ kind: 'not_yet_valid' });
    if (typeof iat === 'number' && iat > now + CLOCK_SKEW_SECONDS) return fail({ kind: 'issued_in_future' });
    return { ok: true, claims: claims as VerifiedClaims };
  }
}
