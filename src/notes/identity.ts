import { isAuthSessionMissingError } from '@supabase/supabase-js';
import { HttpError } from '../kit/http/errors.js';
import type { IdpClients } from './idp-clients.js';
import { authRateLimited, authUnavailability, IdpUnavailableError } from './idp-errors.js';

// Sign-up and login are forwarded to the provider, each with a fresh client,
// and only a reduced result goes back.

export interface Credentials {
  email: string;
  password: string;
}

export interface RegisteredUser {
  id: string;
  email: string;
}

export interface LoginSession {
  access_token: string;
  refresh_token: string;
  /** Unix time in seconds, as the provider gives it (the access token's `exp`). */
  expires_at: number;
}

export interface Identity {
  /** `clientIp`: the end user's address, which the provider's rate limits count against. */
  /** `confirmUrl`: where the provider's confirmation mail leads, when it sends one. */
  register(credentials: Credentials, clientIp: string, confirmUrl?: string): Promise<RegisteredUser>;
  login(credentials: Credentials, clientIp: string): Promise<LoginSession>;
  /** A new session for a refresh token (which the provider rotates). */
  refresh(refreshToken: string, clientIp: string): Promise<LoginSession>;
  /** Ends the session the access token belongs to (only that one) at the provider. */
  logout(accessToken: string, clientIp: string): Promise<void>;
  /**
   * Asks the provider to mail a recovery link to the address, leading to `redirectTo`. Resolves
   * the same way whether or not the address belongs to anyone.
   */
  requestPasswordReset(email: string, redirectTo: string, clientIp: string): Promise<void>;
  /**
   * Spends a mailed link's token (its hash and kind) at the provider: the session it starts, for
   * the one step the link is for. Called when the person confirms, never when the link is opened.
   */
  verifyLink(tokenHash: string, type: 'recovery' | 'signup', clientIp: string): Promise<LoginSession>;
  /** Sets a new password for the user of the access token (the recovery link's session). */
  setPassword(accessToken: string, password: string, clientIp: string): Promise<void>;
}

/** The answer to a token the provider refuses, as on every other route. */
export const TOKEN_REFUSED = 'Invalid or expired token';
export const PASSWORD_TOO_WEAK = 'Password is too weak: use at least 6 characters, longer is better';
export const PASSWORD_COMMON = 'Password is too common: it is on the list of the most used passwords, choose one harder to guess';
export const PASSWORD_UNCHANGED = 'The new password must be different from the current one';
export const PASSWORD_REFUSED = 'The identity provider refused this password';
export const EMAIL_INVALID = 'email must be a valid email address';
/** A mailed link the provider refuses: used, expired, replaced by a newer one, or never issued. */
export const LINK_REFUSED = 'This link has expired or was already used';

// supabase-js's session needs a refresh token, which the recovery link's caller does not send to
// this route. It is never used: the client neither refreshes in the background nor lives past the
// call, and a token close enough to its expiry for supabase-js to want a refresh is refused (401).
const UNUSED_REFRESH_TOKEN = 'not-used';

/** Every refusal of a refresh token (unknown, revoked, reused, malformed): one answer. */
export const REFRESH_REFUSED = 'Invalid or expired refresh token';

function sessionOf(session: { access_token: string; refresh_token: string; expires_at?: number } | null): LoginSession {
  if (!session?.expires_at) throw new IdpUnavailableError('the provider answered without a complete session');
  return { access_token: session.access_token, refresh_token: session.refresh_token, expires_at: session.expires_at };
}

export function createIdentity(clients: IdpClients): Identity {
  return {
    async register({ email, password }, clientIp, confirmUrl) {
      const call = clients.anonymous(clientIp);
      const { data, error } = await call.client.auth.signUp({ email, password, options: { emailRedirectTo: confirmUrl } });
      if (error) throw authUnavailability(error) ?? authRateLimited(error, call.retryAfter()) ?? new HttpError(400, error.message);
      // With email confirmation on, the provider returns the user without a session; the
      // same 201 is correct. For an already-confirmed address it returns a look-alike user
      // with a random id (its anti-enumeration), which is passed on unchanged.
      if (!data.user) throw new IdpUnavailableError('sign-up succeeded without a user');
      return { id: data.user.id, email: data.user.email ?? email };
    },
    async login({ email, password }, clientIp) {
      const call = clients.anonymous(clientIp);
      const { data, error } = await call.client.auth.signInWithPassword({ email, password });
      // Unknown email, wrong password, unconfirmed, banned: one answer, so none can be told apart.
      // Too many attempts is its own answer: a client told 401 would not know that waiting helps.
      if (error)
        throw authUnavailability(error) ?? authRateLimited(error, call.retryAfter()) ?? new HttpError(401, 'Invalid email or password');
      return sessionOf(data.session);
    },
    async refresh(refreshToken, clientIp) {
      const call = clients.anonymous(clientIp);
      // supabase-js retries a refresh that met an outage for up to 30 s; the caller gets 503 at once.
      const { data, error } = await Promise.race([call.client.auth.refreshSession({ refresh_token: refreshToken }), call.firstOutage]);
      // As for login: an outage is 503 and too many attempts 429; every other refusal is one 401.
      if (error) throw authUnavailability(error) ?? authRateLimited(error, call.retryAfter()) ?? new HttpError(401, REFRESH_REFUSED);
      return sessionOf(data.session);
    },
    async logout(accessToken, clientIp) {
      // The admin namespace's signOut is supabase-js's call that takes a given access token; it
      // needs only that token (no secret key). Scope local: this session, not the user's others.
      const { error } = await clients.anonymous(clientIp).client.auth.admin.signOut(accessToken, 'local');
      if (!error) return;
      const unavailable = authUnavailability(error);
      if (unavailable) throw unavailable;
      // Any other refusal means the provider holds no such session any more: it is ended either way.
    },
    async requestPasswordReset(email, redirectTo, clientIp) {
      const call = clients.anonymous(clientIp);
      const { error } = await call.client.auth.resetPasswordForEmail(email, { redirectTo });
      if (!error) return;
      const unavailable = authUnavailability(error);
      if (unavailable) throw unavailable;
      // A mail went to this address moments ago and its link still works: the same answer as a
      // new mail (the provider counts every address alike, so this says nothing about who exists).
      if (error.code === 'over_email_send_rate_limit') return;
      const limited = authRateLimited(error, call.retryAfter());
      if (limited) throw limited;
      if (error.status === 400 || error.status === 422) throw new HttpError(400, EMAIL_INVALID);
      throw new IdpUnavailableError(`password recovery refused: status ${error.status}, ${error.code ?? ''} ${error.message}`);
    },
    async verifyLink(tokenHash, type, clientIp) {
      const call = clients.anonymous(clientIp);
      const { data, error } = await call.client.auth.verifyOtp({ token_hash: tokenHash, type });
      if (error) throw authUnavailability(error) ?? authRateLimited(error, call.retryAfter()) ?? new HttpError(401, LINK_REFUSED);
      return sessionOf(data.session);
    },
    async setPassword(accessToken, password, clientIp) {
      const call = clients.anonymous(clientIp);
      const session = await call.client.auth.setSession({ access_token: accessToken, refresh_token: UNUSED_REFRESH_TOKEN });
      if (session.error) {
        throw authUnavailability(session.error) ?? authRateLimited(session.error, call.retryAfter()) ?? new HttpError(401, TOKEN_REFUSED);
      }
      const { error } = await call.client.auth.updateUser({ password });
      if (!error) return;
      const unavailable = authUnavailability(error);
      if (unavailable) throw unavailable;
      const limited = authRateLimited(error, call.retryAfter());
      if (limited) throw limited;
      // supabase-js wanted to refresh a token about to expire, or found no session: the token's fault.
      if (isAuthSessionMissingError(error) || error.code === 'refresh_token_not_found') throw new HttpError(401, TOKEN_REFUSED);
      if (error.code === 'weak_password') {
        const reasons = (error as { reasons?: unknown }).reasons;
        throw new HttpError(400, Array.isArray(reasons) && reasons.includes('pwned') ? PASSWORD_COMMON : PASSWORD_TOO_WEAK);
      }
      if (error.code === 'same_password') throw new HttpError(400, PASSWORD_UNCHANGED);
      if (error.status === 400 || error.status === 422) throw new HttpError(400, PASSWORD_REFUSED);
      // The token stopped working between the two calls (session ended, user banned or deleted).
      throw new HttpError(401, TOKEN_REFUSED);
    },
  };
}
