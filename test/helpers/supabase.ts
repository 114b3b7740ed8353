// supabase-js against the real idp, built the way the notes service (and any client on Node 20)
// builds it: no stored session, no background refresh, and the ws package for realtime, which
// Node 20 lacks.
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import WebSocket from 'ws';

/** Where an idp listens and its two keys (a running test idp has these). */
export interface IdpEndpoint {
  url: string;
  publishableKey: string;
  secretKey: string;
}

export const SUPABASE_CLIENT_OPTIONS = {
  auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
  realtime: { transport: WebSocket as unknown as never },
};

/** supabase-js on `key` (the publishable one unless told), with extra headers on every request. */
export function supabase(idp: IdpEndpoint, key: string = idp.publishableKey, headers?: Record<string, string>): SupabaseClient {
  return createClient(idp.url, key, { ...SUPABASE_CLIENT_OPTIONS, ...(headers ? { global: { headers } } : {}) });
}

/** supabase-js with the publishable key and, when given, a user's token: what any client of the idp could do. */
export function userClient(idp: IdpEndpoint, token?: string): SupabaseClient {
  return supabase(idp, idp.publishableKey, token ? { Authorization: `Bearer ${token}` } : undefined);
}

/** supabase-js with the secret key: admin calls, and reads that bypass row-level security. */
export function serviceClient(idp: IdpEndpoint): SupabaseClient {
  return supabase(idp, idp.secretKey);
}
