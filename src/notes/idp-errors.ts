import { isAuthRetryableFetchError, type AuthError, type PostgrestError } from '@supabase/supabase-js';
import { HttpError } from '../kit/http/errors.js';

/**
 * The provider could not be reached or failed on its side. Never answered as
 * 400/401: a client told "invalid token" during an outage would sign its user out.
 * `reason` is logged, never sent.
 */
export class IdpUnavailableError extends HttpError {
  constructor(readonly reason: string) {
    super(503, 'Identity provider unavailable, try again shortly', { 'retry-after': '1' });
    this.name = 'IdpUnavailableError';
  }
}

/** A failure the contract (docs/notes.md, rules 3-5) answers with the store's own message; kept apart so it is logged with its code. */
export class NoteStoreError extends HttpError {
  constructor(
    status: number,
    readonly storeError: { message: string; code?: string; details?: string | null; hint?: string | null },
    readonly storeStatus: number,
  ) {
    super(status, storeError.message);
    this.name = 'NoteStoreError';
  }
}

/** What notes says when the provider did not say how long to wait. */
const DEFAULT_RETRY_AFTER_SECONDS = 60;

/**
 * The provider refused for too many requests or attempts: a 429 for the caller too, with the
 * provider's Retry-After when it is a whole number of seconds (GoTrue itself sends none).
 */
export function authRateLimited(error: AuthError, retryAfter: string | null): HttpError | undefined {
  if (error.status !== 429) return undefined;
  const seconds = retryAfter !== null && /^\d{1,6}$/.test(retryAfter.trim()) ? Number(retryAfter.trim()) : DEFAULT_RETRY_AFTER_SECONDS;
  return new HttpError(429, `Too many attempts, try again in ${seconds} seconds`, { 'retry-after': String(seconds) });
}

// A gateway that does not know our key answers 401 "Invalid API key" (or
// "No API key found"); that is a misconfiguration of this service, not the caller's fault.
const API_KEY_REJECTED = /api key/i;

/** Maps a supabase-js auth error to "the provider is unavailable", or undefined when the provider answered. */
export function authUnavailability(error: AuthError): IdpUnavailableError | undefined {
  // Network failure or timeout (status 0), or a 5xx whose body supabase-js does not read.
  if (isAuthRetryableFetchError(error)) return new IdpUnavailableError(`auth request failed: status ${error.status}, ${error.message}`);
  if (error.status === 401 && API_KEY_REJECTED.test(error.message)) {
    return new IdpUnavailableError(`the identity provider rejected this service's API key: ${error.message}`);
  }
  return undefined;
}

// PostgREST's JWT errors (bad signature, expired, ...) all carry a PGRST30x code.
const JWT_REJECTED = /^PGRST30\d$/;

/**
 * Maps a failed REST call: transport failures and gateway/upstream 5xx become 503,
 * a rejected access token becomes 401, everything else is the store's own error
 * answered with `status` and its message, as the contract asks (docs/notes.md, rules 3-5).
 */
export function restFailure(error: PostgrestError, httpStatus: number, status: number): HttpError {
  // status 0: network failure or timeout; 502-504 and Cloudflare's 52x: nothing reached PostgreSQL.
  if (httpStatus === 0 || (httpStatus >= 502 && httpStatus <= 504) || (httpStatus >= 520 && httpStatus <= 530)) {
    return new IdpUnavailableError(`rest request failed: status ${httpStatus}, ${error.message}`);
  }
  if (httpStatus === 401 && typeof error.code === 'string' && JWT_REJECTED.test(error.code)) {
    // The token passed our check but expired (or was revoked) before the store saw it.
    return new HttpError(401, 'Invalid or expired token');
  }
  if (httpStatus === 401 && API_KEY_REJECTED.test(error.message)) {
    return new IdpUnavailableError(`the identity provider rejected this service's API key: ${error.message}`);
  }
  return new NoteStoreError(status, error, httpStatus);
}
