import { createClient, type SupabaseClient, type SupabaseClientOptions } from '@supabase/supabase-js';
import WebSocket from 'ws';
import type { NotesConfig } from './config.js';

// Every conversation with the identity provider goes through the real
// supabase-js client, so the service runs unchanged against a hosted project.

export type IdpFetch = typeof fetch;

type Options = SupabaseClientOptions<'public'>;
// The `ws` class is what supabase-js documents for Node 20; its typings open with a
// `new (address: null)` overload that the structural transport type does not accept.
const webSocketTransport = WebSocket as unknown as NonNullable<Options['realtime']>['transport'];

export interface IdpClients {
  /** A new client with no session, for one sign-up or one login: nothing is shared between users. */
  anonymous(): SupabaseClient;
  /** The secret-key client; it checks access tokens and nothing else (it bypasses row-level security). */
  readonly privileged: SupabaseClient;
  /** A client that acts as the caller: the publishable key plus their access token, so RLS sees them. */
  asUser(accessToken: string): SupabaseClient;
}

/**
 * Wraps fetch so no request to the provider waits longer than `timeoutMs`.
 * supabase-js reports the abort like any network failure (status 0), which
 * the service answers with 503.
 */
export function boundedFetch(timeoutMs: number, base: IdpFetch = fetch): IdpFetch {
  return (input, init) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    return base(input, { ...init, signal });
  };
}

export function createIdpClients(
  config: Pick<NotesConfig, 'IDP_URL' | 'IDP_SECRET_KEY' | 'IDP_PUBLISHABLE_KEY' | 'IDP_TIMEOUT_MS'>,
  baseFetch?: IdpFetch,
): IdpClients {
  const fetchWithTimeout = boundedFetch(config.IDP_TIMEOUT_MS, baseFetch);
  const options = (headers?: Record<string, string>): Options => ({
    // No session is ever stored, refreshed in the background or read from a URL: the
    // service holds other people's tokens only for the length of one request.
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
    // supabase-js 2.x refuses to construct on Node 20 without a WebSocket class, even
    // though Realtime is never used; `ws` is harmless on Node 22+.
    realtime: { transport: webSocketTransport },
    global: { fetch: fetchWithTimeout, ...(headers ? { headers } : {}) },
  });

  return {
    anonymous: () => createClient(config.IDP_URL, config.IDP_PUBLISHABLE_KEY, options()),
    privileged: createClient(config.IDP_URL, config.IDP_SECRET_KEY, options()),
    asUser: (accessToken) =>
      createClient(config.IDP_URL, config.IDP_PUBLISHABLE_KEY, options({ Authorization: `Bearer ${accessToken}` })),
  };
}

/** The provider's public signing keys; also the cheapest request that proves it is up. */
export const jwksUrl = (idpUrl: string) => new URL(`${idpUrl}/auth/v1/.well-known/jwks.json`);
