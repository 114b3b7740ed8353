import { createPublicKey, type KeyObject, verify as verifySignature } from 'node:crypto';
import { SignJWT, type JWK } from 'jose';
import { es256PublicJwk, generateEs256PrivateKeyPem, parseEs256PrivateKey } from '../kit/es256-keys.js';
import type { Clock } from '../kit/clock.js';
import {
  CLOCK_SKEW_SECONDS,
  COMPACT_JWS,
  decodeJsonSegment,
  hasLowSSignature,
  isCanonicalBase64url,
  withLowSSignature,
} from '../kit/jws.js';
import { loadOrCreateSecret } from '../dev/secrets.js';

// Access tokens are ES256 JWTs with a `kid`: supabase-js then verifies them locally against the
// published JWKS (getClaims) instead of calling /user each time. Verification accepts exactly
// this one algorithm and this one key; nothing in a token's header can choose another.

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

/**
 * How many tokens whose signature was checked are remembered. A client sends one access token for
 * its whole life (an hour), so remembering it spares a P-256 verification (about 50 µs of CPU) on
 * each of its later requests. Only tokens that verified enter, so an attacker cannot fill it with
 * forgeries; at most this many entries (about 1 kB each), the oldest dropped first.
 */
export const VERIFIED_TOKENS_REMEMBERED = 10_000;

export class SigningKeys {
  /** Token string -> its claims, for tokens whose signature verified (see VERIFIED_TOKENS_REMEMBERED). */
  private readonly verifiedSignatures = new Map<string, VerifiedClaims>();

  private constructor(
    private readonly privateKey: KeyObject,
    private readonly publicKey: KeyObject,
    readonly kid: string,
    private readonly publicJwk: JWK,
    private readonly clock: Clock,
  ) {}

  /** `source`: PEM or JWK text of a P-256 private key (validated by the config). */
  static async fromPrivateKey(source: string, clock: Clock): Promise<SigningKeys> {
    const privateKey = parseEs256PrivateKey(source);
    const publicJwk = await es256PublicJwk(privateKey);
    return new SigningKeys(privateKey, createPublicKey(privateKey), publicJwk.kid!, publicJwk, clock);
  }

  /** The configured key, else one generated once and kept under DATA_DIR. */
  static async load(configured: string | undefined, dataDir: string, clock: Clock): Promise<SigningKeys> {
    const source = configured ?? (await loadOrCreateSecret(dataDir, 'IDP_SIGNING_KEY', generateEs256PrivateKeyPem));
    return SigningKeys.fromPrivateKey(source, clock);
  }

  /** The public half only: a copy, so callers cannot alter what is served. */
  jwks(): { keys: JWK[] } {
    return { keys: [{ ...this.publicJwk, key_ops: ['verify'] }] };
  }

  /** How many verified tokens are remembered now (at most VERIFIED_TOKENS_REMEMBERED). */
  get rememberedTokens(): number {
    return this.verifiedSignatures.size;
  }

  nowSeconds(): number {
    return Math.floor(this.clock() / 1000);
  }

  async sign(claims: AccessTokenClaims): Promise<string> {
    const token = await new SignJWT({ ...claims }).setProtectedHeader({ alg: 'ES256', kid: this.kid, typ: 'JWT' }).sign(this.privateKey);
    // ECDSA signers pick s or n − s at random; verification accepts only low s (see verify).
    return withLowSSignature(token);
  }

  /**
   * Signature and time claims. The audience and subject are the caller's business, because
   * GoTrue and PostgREST report them differently; so is the leeway on exp.
   */
  async verify(token: string, opts: { expLeewaySeconds?: number } = {}): Promise<VerifyResult> {
    // The exact string verified before: its header, structure and signature were all checked
    // then (tokens are canonical, so no other spelling of it exists). Its time claims are not
    // remembered: they are checked below on every request.
    const fail = (problem: TokenProblem): VerifyResult => ({ ok: false, problem });
    let claims = this.verifiedSignatures.get(token);
    if (!claims) {
      const checked = this.verifySignature(token);
      if (!checked.ok) return checked;
      claims = checked.claims;
      if (this.verifiedSignatures.size >= VERIFIED_TOKENS_REMEMBERED)
        this.verifiedSignatures.delete(this.verifiedSignatures.keys().next().value!);
      this.verifiedSignatures.set(token, claims);
    }
    const { exp, nbf, iat } = claims;
    if (typeof exp !== 'number' || !Number.isFinite(exp)) return fail({ kind: 'malformed', reason: 'exp claim is required' });
    if ((nbf !== undefined && typeof nbf !== 'number') || (iat !== undefined && typeof iat !== 'number')) {
      return fail({ kind: 'malformed', reason: 'time claims must be numbers' });
    }
    const now = this.nowSeconds();
    // GoTrue allows no leeway on exp (expired at exp); PostgREST expires a token only once
    // now - leeway > exp.
    const leeway = opts.expLeewaySeconds ?? 0;
    if (leeway === 0 ? now >= exp : now - leeway > exp) return fail({ kind: 'expired' });
    if (typeof nbf === 'number' && nbf > now + CLOCK_SKEW_SECONDS) return fail({ kind: 'not_yet_valid' });
    if (typeof iat === 'number' && iat > now + CLOCK_SKEW_SECONDS) return fail({ kind: 'issued_in_future' });
    // A copy: what a caller does with it never reaches the remembered claims.
    return { ok: true, claims: { ...claims } };
  }

  /** Structure, header and signature; the claims when all hold (time claims not checked here). */
  private verifySignature(token: string): VerifyResult {
    const fail = (problem: TokenProblem): VerifyResult => ({ ok: false, problem });
    const parts = token.split('.');
    if (parts.length !== 3) return fail({ kind: 'malformed', reason: `token contains an invalid number of segments (${parts.length})` });
    // Strict base64url: padding or other characters would let several spellings of one signature through.
    if (!COMPACT_JWS.test(token)) return fail({ kind: 'malformed', reason: 'token is not in base64url format' });
    // Decoders ignore the spare low bits of a segment's last character, so one signature has
    // several spellings that all verify: only the canonical one is the token that was issued.
    if (!parts.every(isCanonicalBase64url)) return fail({ kind: 'malformed', reason: 'token is not in canonical base64url format' });
    const header = decodeJsonSegment(parts[0]!);
    if (header === undefined) return fail({ kind: 'malformed', reason: 'could not JSON decode header' });
    if (header.alg !== 'ES256') return fail({ kind: 'unverifiable', reason: `signing method ${String(header.alg)} is invalid` });
    if (FORBIDDEN_HEADERS.some((name) => Object.hasOwn(header, name))) {
      return fail({ kind: 'unverifiable', reason: 'token header references a key' });
    }
    if (header.kid !== this.kid) return fail({ kind: 'unverifiable', reason: 'no key found for the kid' });
    // (r, n − s) verifies as well as (r, s): without this, anyone could mint a second token
    // string with the same claims. Only the low-s one is the token that was issued.
    if (!hasLowSSignature(token)) return fail({ kind: 'signature', reason: 'crypto/ecdsa: verification error' });
    // The header checks above are what jose's compactVerify would add; node:crypto's synchronous
    // verify costs about 48 µs of CPU against jose's WebCrypto job at about 76 µs.
    const signed = Buffer.from(`${parts[0]}.${parts[1]}`);
    const signature = Buffer.from(parts[2]!, 'base64url');
    if (!verifySignature('sha256', signed, { key: this.publicKey, dsaEncoding: 'ieee-p1363' }, signature)) {
      return fail({ kind: 'signature', reason: 'crypto/ecdsa: verification error' });
    }
    const claims = decodeJsonSegment(parts[1]!);
    if (claims === undefined) return fail({ kind: 'malformed', reason: 'could not JSON decode claim' });
    return { ok: true, claims: claims as VerifiedClaims };
  }
}
