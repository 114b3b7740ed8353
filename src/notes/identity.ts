import { HttpError } from '../kit/errors.js';
import type { IdpClients } from './idp-clients.js';
import { authUnavailability, IdpUnavailableError } from './idp-errors.js';

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
  register(credentials: Credentials): Promise<RegisteredUser>;
  login(credentials: Credentials): Promise<LoginSession>;
}

export function createIdentity(clients: IdpClients): Identity {
  return {
    async register({ email, password }) {
      const { data, error } = await clients.anonymous().auth.signUp({ email, password });
      if (error) throw authUnavailability(error) ?? new HttpError(400, error.message);
      // With email confirmation on, the provider returns the user without a session; the
      // same 201 is correct. For an already-confirmed address it returns a look-alike user
      // with a random id (its anti-enumeration), which is passed on unchanged.
      if (!data.user) throw new IdpUnavailableError('sign-up succeeded without a user');
      return { id: data.user.id, email: data.user.email ?? email };
    },
    async login({ email, password }) {
      const { data, error } = await clients.anonymous().auth.signInWithPassword({ email, password });
      // Unknown email, wrong password, unconfirmed, banned: one answer, so none can be told apart.
      if (error) throw authUnavailability(error) ?? new HttpError(401, 'Invalid email or password');
      const { session } = data;
      if (!session?.expires_at) throw new IdpUnavailableError('login succeeded without a complete session');
      return { access_token: session.access_token, refresh_token: session.refresh_token, expires_at: session.expires_at };
    },
  };
}
