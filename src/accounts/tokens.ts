import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { SignJWT, decodeProtectedHeader, jwtVerify } from 'jose';
import type { Clock } from '../kit/clock.js';
import { unauthorized } from '../kit/http/errors.js';
import { CLOCK_SKEW_SECONDS, decodeJsonSegment, hasLowSSignature, isCanonicalCompactJws, withLowSSignature } from '../kit/jws.js';
import type { Role } from './repository.js';
import type { Es256Keys } from './signing-keys.js';

/** What an access token says about its holder (docs/accounts.md, rule 4: nothing else). */
export interface AccessClaims {
  id: string;
  role: Role;
}

/**
 * How the token's session was authenticated: when (seconds since the epoch) and with
 * which methods (RFC 8176 names: pwd, otp). A token issued at a password-only login
 * leaves both out (rule 4): its iat is its auth_time and its method is pwd.
 */
export interface Authentication {
  authTime: number;
  amr: string[];
}

export const PASSWORD_ONLY = ['pwd'];

/** Whether an authentication used a second factor (NIST SP 800-63B level 2): amr names mfa. */
export function usedSecondFactor(authentication: Authentication): boolean {
  return authentication.amr.includes('mfa');
}

/** What a verified token says, with its issue time (whole seconds), which the per-user cut-off is compared with. */
export interface VerifiedClaims extends AccessClaims {
  iat: number;
  /** The token's auth_time and amr claims, or for a token without them its iat and pwd. */
  authentication: Authentication;
}

export const INVALID_TOKEN = 'Invalid or expired token.';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** How tokens are signed (JWT_ALGORITHM): with the shared secret, or with a P-256 key named by kid. */
export type TokenSigning = { algorithm: 'HS256'; secret: string } | { algorithm: 'ES256'; keys: Es256Keys };

/** Access tokens: issued at login, verified on every protected route. */
export class AccessTokens {
  // Imported once: given raw bytes, jose would import the key again on every call.
  private readonly hmacKey: Promise<CryptoKey> | undefined;
  // Verification of HS256 tokens uses node:crypto's HMAC (synchronous, about 3 µs) rather than
  // jose's WebCrypto one (about 20 µs of CPU a request); the checks are jose's, spelled out below.
  private readonly hmacVerifyKey: KeyObject | undefined;
  private readonly es256: Es256Keys | undefined;

  constructor(
    signing: TokenSigning,
    private readonly lifetimeSeconds: number,
    private readonly clock: Clock,
    /** REQUIRE_ADMIN_MFA: admins' tokens say their assurance level (aal1, aal2) for whoever reads them. */
    private readonly adminAssurance = false,
  ) {
    if (signing.algorithm === 'HS256') {
      this.hmacKey = crypto.subtle.importKey('raw', new TextEncoder().encode(signing.secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
        'sign',
        'verify',
      ]);
      this.hmacVerifyKey = createSecretKey(Buffer.from(signing.secret));
    } else {
      this.es256 = signing.keys;
    }
  }

  /**
   * Issued now (or at `at`, in ms), or at `notBefore` (seconds) when that is later:
   * a cut-off set within the current second must not catch a token issued after it.
   */
  async issueAccessToken(
    claims: AccessClaims,
    { notBefore = 0, at = this.clock(), authentication }: { notBefore?: number; at?: number; authentication?: Authentication } = {},
  ): Promise<string> {
    const issuedAt = Math.max(Math.floor(at / 1000), notBefore);
    const payload: Record<string, unknown> = { id: claims.id, role: claims.role };
    // The contract's token (id and role only) whenever iat and pwd say it all.
    // Each claim only when it says more than the contract's token: auth_time when it is not
    // the iat (a refreshed token), amr when more than a password was used.
    const passwordOnly = !authentication || authentication.amr.join(' ') === PASSWORD_ONLY.join(' ');
    if (authentication && (authentication.authTime !== issuedAt || !passwordOnly)) payload.auth_time = authentication.authTime;
    if (authentication && !passwordOnly) payload.amr = authentication.amr;
    if (this.adminAssurance && claims.role === 'admin') {
      payload.aal = authentication && usedSecondFactor(authentication) ? 'aal2' : 'aal1';
    }
    const jwt = new SignJWT(payload).setIssuedAt(issuedAt).setExpirationTime(issuedAt + this.lifetimeSeconds);
    if (!this.es256) return jwt.setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(await this.hmacKey!);
    const token = await jwt.setProtectedHeader({ alg: 'ES256', kid: this.es256.kid, typ: 'JWT' }).sign(this.es256.privateKey);
    // ECDSA signers pick s or n − s at random; verification accepts only low s (see verifyAccessToken).
    return withLowSSignature(token);
  }

  /**
   * The algorithm is pinned to JWT_ALGORITHM: `none`, the other algorithm and any
   * other are refused before any key is looked at, and header fields that bring a
   * key (jku, jwk, x5c) are never consulted. With ES256 the kid only picks among
   * our own public keys, and only the low-s spelling of a signature is accepted.
   * Every failure is the same 401.
   */
  async verifyAccessToken(token: string): Promise<VerifiedClaims> {
    if (!isCanonicalCompactJws(token)) throw unauthorized(INVALID_TOKEN);
    let payload: Record<string, unknown>;
    if (this.hmacVerifyKey) {
      const claims = this.verifyHs256(token, this.hmacVerifyKey);
      if (!claims) throw unauthorized(INVALID_TOKEN);
      payload = claims;
    } else {
      try {
        ({ payload } = await jwtVerify(token, await this.verificationKey(token), {
          algorithms: ['ES256'],
          requiredClaims: ['iat', 'exp'],
          currentDate: new Date(this.clock()),
        }));
      } catch {
        throw unauthorized(INVALID_TOKEN);
      }
    }
    const { id, role, iat } = payload;
    if (typeof id !== 'string' || !UUID.test(id) || (role !== 'user' && role !== 'admin')) {
      throw unauthorized(INVALID_TOKEN);
    }
    // jose checks nbf but not a future iat; a token this service issued never has one beyond the skew.
    if (typeof iat !== 'number' || iat > Math.floor(this.clock() / 1000) + CLOCK_SKEW_SECONDS) throw unauthorized(INVALID_TOKEN);
    const { auth_time: authTime = iat, amr = PASSWORD_ONLY } = payload;
    if (
      typeof authTime !== 'number' ||
      !Number.isInteger(authTime) ||
      authTime > iat ||
      !Array.isArray(amr) ||
      amr.length === 0 ||
      !amr.every((m) => typeof m === 'string')
    ) {
      throw unauthorized(INVALID_TOKEN);
    }
    return { id, role, iat, authentication: { authTime, amr: amr as string[] } };
  }

  /**
   * What jose's jwtVerify checks for HS256 with `algorithms: ['HS256']` and `requiredClaims: ['iat', 'exp']`:
   * the header's alg is exactly HS256 (looked at before the key), no `crit` header parameter (this
   * service never sets one), the MAC compared in constant time, the payload a JSON object, `exp` a
   * number not yet reached, `iat` a number, `nbf` (if any) a number already reached. The claims, or
   * undefined for any failure.
   */
  private verifyHs256(token: string, key: KeyObject): Record<string, unknown> | undefined {
    const [encodedHeader, encodedPayload, encodedSignature] = token.split('.') as [string, string, string];
    const header = decodeJsonSegment(encodedHeader);
    if (header?.alg !== 'HS256' || Object.hasOwn(header, 'crit')) return undefined;
    const expected = createHmac('sha256', key).update(`${encodedHeader}.${encodedPayload}`).digest();
    const given = Buffer.from(encodedSignature, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const payload = decodeJsonSegment(encodedPayload);
    if (!payload) return undefined;
    const { exp, iat, nbf } = payload;
    const now = Math.floor(this.clock() / 1000);
    if (typeof exp !== 'number' || !Number.isFinite(exp) || exp <= now) return undefined;
    if (typeof iat !== 'number' || !Number.isFinite(iat)) return undefined;
    if (nbf !== undefined && (typeof nbf !== 'number' || !Number.isFinite(nbf) || nbf > now)) return undefined;
    return payload;
  }

  /** The key a token may be checked with; throws (a 401 for the caller) when none fits. */
  private async verificationKey(token: string): Promise<KeyObject> {
    if (!this.es256) throw unauthorized(INVALID_TOKEN);
    const { alg, kid } = decodeProtectedHeader(token);
    // (r, n − s) verifies as well as (r, s): without this anyone could mint a second token string.
    const key = alg === 'ES256' && hasLowSSignature(token) ? this.es256.verificationKey(kid) : undefined;
    if (!key) throw unauthorized(INVALID_TOKEN);
    return key;
  }

  /** Seconds an access token lives (JWT_EXPIRES_IN). */
  get lifetime(): number {
    return this.lifetimeSeconds;
  }
}
