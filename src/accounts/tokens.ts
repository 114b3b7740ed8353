import { SignJWT, jwtVerify } from 'jose';
import type { Clock } from '../kit/clock.js';
import { unauthorized } from '../kit/errors.js';
import type { Role } from './repository.js';

/** What an access token says about its holder (docs/accounts.md, rule 4: nothing else). */
export interface AccessClaims {
  id: string;
  role: Role;
}

export const INVALID_TOKEN = 'Invalid or expired token.';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** How far in the future `iat` may be: instances' clocks drift a little (the idp allows the same). */
export const CLOCK_SKEW_SECONDS = 30;

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * jose decodes leniently: a signature with `=` padding, or with the spare low bits of its last
 * character set, verifies like the issued one. Only the exact issued spelling is a token here, so a
 * token string cannot be varied to slip past anything keyed on it.
 */
function isCanonicalCompactJws(token: string): boolean {
  return COMPACT_JWS.test(token) && token.split('.').every((part) => Buffer.from(part, 'base64url').toString('base64url') === part);
}

/** HS256 access tokens: issued at login, verified on every protected route. */
export class AccessTokens {
  // Imported once: given raw bytes, jose would import the key again on every call.
  private readonly key: Promise<CryptoKey>;

  constructor(
    secret: string,
    private readonly lifetimeSeconds: number,
    private readonly clock: Clock,
  ) {
    this.key = crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
      'sign',
      'verify',
    ]);
  }

  async issueAccessToken(claims: AccessClaims): Promise<string> {
    const issuedAt = Math.floor(this.clock() / 1000);
    return new SignJWT({ id: claims.id, role: claims.role })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + this.lifetimeSeconds)
      .sign(await this.key);
  }

  /**
   * The algorithm is pinned: `none`, other HMAC sizes and public-key algorithms
   * are refused before any key is looked at, and header fields that name a key
   * (kid, jku, jwk) are never consulted. Every failure is the same 401.
   */
  async verifyAccessToken(token: string): Promise<AccessClaims> {
    if (!isCanonicalCompactJws(token)) throw unauthorized(INVALID_TOKEN);
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, await this.key, {
        algorithms: ['HS256'],
        requiredClaims: ['iat', 'exp'],
        currentDate: new Date(this.clock()),
      }));
    } catch {
      throw unauthorized(INVALID_TOKEN);
    }
    const { id, role, iat } = payload;
    if (typeof id !== 'string' || !UUID.test(id) || (role !== 'user' && role !== 'admin')) {
      throw unauthorized(INVALID_TOKEN);
    }
    // jose checks nbf but not a future iat; a token this service issued never has one beyond the skew.
    if (typeof iat !== 'number' || iat > Math.floor(this.clock() / 1000) + CLOCK_SKEW_SECONDS) throw unauthorized(INVALID_TOKEN);
    return { id, role };
  }
}
