import { HttpError } from '../kit/errors.js';
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
  register(credentials: Credentials, clientIp: string): Promise<RegisteredUser>;
  login(credentials: Credentials, clientIp: string): Promise<LoginSession>;
}

export function createIdentity(clients: IdpClients): Identity {
  return {
    async register({ email, password }, clientIp) {
      const call = clients.anonymous(clientIp);
      const { data, error } = await call.client.auth.signUp({ email, password });
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
      if (error) throw authUnavailability(error) ?? authRateLimited(error, call.retryAfter()) ?? new HttpError(401, 'Invalid email or password');
      const { session } = data;
      if (!session?.expires_at) throw new IdpUnavailableError('login succeeded without a complete session');
      return { access_token: session.access_token, refresh_token: session.refresh_token, expires_at: session.expires_at };
    },
  };
}
