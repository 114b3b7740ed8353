import { createRemoteJWKSet, customFetch, errors as joseErrors, type JWTPayload, jwtVerify } from 'jose';
import type { Clock } from '../kit/clock.js';
import { hasLowSSignature } from '../kit/jws.js';
import { HttpError } from '../kit/http/errors.js';
import type { TokenVerificationMode } from './config.js';
import { authUnavailability, IdpUnavailableError } from './idp-errors.js';
import { jwksUrl, type IdpClients, type IdpFetch } from './idp-clients.js';

/** Who is calling, as established by their access token. */
export interface Caller {
  id: string;
  email: string | undefined;
  /** The raw access token, forwarded to the store so row-level security sees this user. */
  accessToken: string;
}

/** Resolves a bearer token to its caller, or throws 401 (bad token) / 503 (provider unavailable). */
export type TokenVerifier = (accessToken: string) => Promise<Caller>;

const invalidToken = () => new HttpError(401, 'Invalid or expired token');

/**
 * remote: one GET /auth/v1/user per call. The provider checks signature and
 * expiry and that the user and session still exist, so a deleted, banned or
 * signed-out user is refused at once.
 */
export function remoteTokenVerifier(clients: IdpClients): TokenVerifier {
  return async (accessToken) => {
    const { data, error } = await clients.privileged.auth.getUser(accessToken);
    if (error) throw authUnavailability(error) ?? invalidToken();
    if (!data.user) throw invalidToken();
    return { id: data.user.id, email: data.user.email, accessToken };
  };
}

// Token problems; any other failure (JWKS unreachable, timed out, not JSON) is the provider's.
const TOKEN_REJECTIONS = new Set([
  'ERR_JWT_EXPIRED',
  'ERR_JWT_CLAIM_VALIDATION_FAILED',
  'ERR_JWT_INVALID',
  'ERR_JWS_INVALID',
  'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
  'ERR_JWKS_NO_MATCHING_KEY',
  'ERR_JWKS_MULTIPLE_MATCHING_KEYS',
  'ERR_JWK_INVALID',
]);

const VERIFIED_TOKENS_MAX = 10_000;
const VERIFIED_TOKEN_TTL_MS = 60_000;

/**
 * local: verifies the signature against the provider's published keys (fetched
 * once, cached 10 minutes, refetched at most every 30 s when an unknown `kid`
 * appears), with the algorithm pinned to the asymmetric ones the provider signs
 * with, `aud` = authenticated and `exp` checked. No request per call, but a
 * user deleted, banned or signed out after the token was issued still passes
 * until the token expires (and the store then sees no rows of theirs).
 *
 * A verified token is remembered for up to a minute (never past its `exp`):
 * clients send the same token for its whole life, and checking an ES256
 * signature is most of this mode's own CPU cost. The minute bounds how long a
 * token outlives a signing key the provider withdraws.
 */
export function localTokenVerifier(opts: {
  idpUrl: string;
  publishableKey: string;
  timeoutMs: number;
  clock: Clock;
  fetch?: IdpFetch;
}): TokenVerifier {
  const jwks = createRemoteJWKSet(jwksUrl(opts.idpUrl), {
    // A gateway in front of the provider may want a key even for public endpoints.
    headers: { apikey: opts.publishableKey },
    timeoutDuration: opts.timeoutMs,
    ...(opts.fetch ? { [customFetch]: opts.fetch } : {}),
  });
  const verified = new Map<string, { caller: Caller; validUntil: number }>();
  return async (accessToken) => {
    const now = opts.clock();
    const known = verified.get(accessToken);
    if (known && now < known.validUntil) return known.caller;
    if (known) verified.delete(accessToken);

    let payload: JWTPayload;
    let alg: string | undefined;
    try {
      ({
        payload,
        protectedHeader: { alg },
      } = await jwtVerify(accessToken, jwks, {
        algorithms: ['ES256', 'RS256'],
        audience: 'authenticated',
        requiredClaims: ['exp', 'sub'],
        currentDate: new Date(now),
      }));
    } catch (err) {
      if (err instanceof joseErrors.JOSEError && TOKEN_REJECTIONS.has(err.code)) throw invalidToken();
      throw new IdpUnavailableError(`signing keys unavailable: ${(err as Error).message}`);
    }
    if (typeof payload.sub !== 'string' || payload.sub === '') throw invalidToken();
    // jose accepts both ECDSA twins (r, s) and (r, n − s); the provider issues only low s, so
    // the other is a token string nobody was given.
    if (alg === 'ES256' && !hasLowSSignature(accessToken)) throw invalidToken();
    const caller = { id: payload.sub, email: typeof payload.email === 'string' ? payload.email : undefined, accessToken };
    // Map order is insertion order: the oldest entry goes first when full.
    if (verified.size >= VERIFIED_TOKENS_MAX) verified.delete(verified.keys().next().value as string);
    verified.set(accessToken, { caller, validUntil: Math.min((payload.exp as number) * 1000, now + VERIFIED_TOKEN_TTL_MS) });
    return caller;
  };
}

export function createTokenVerifier(
  mode: TokenVerificationMode,
  deps: { clients: IdpClients; idpUrl: string; publishableKey: string; timeoutMs: number; clock: Clock; fetch?: IdpFetch },
): TokenVerifier {
  return mode === 'local' ? localTokenVerifier(deps) : remoteTokenVerifier(deps.clients);
}
