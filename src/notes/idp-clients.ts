import { createClient, type SupabaseClient, type SupabaseClientOptions } from '@supabase/supabase-js';
import WebSocket from 'ws';
import type { NotesConfig } from './config.js';
import { IdpUnavailableError } from './idp-errors.js';

// Every conversation with the identity provider goes through the real
// supabase-js client, so the service runs unchanged against a hosted project.

export type IdpFetch = typeof fetch;

type Options = SupabaseClientOptions<'public'>;
// The `ws` class is what supabase-js documents for Node 20; its typings open with a
// `new (address: null)` overload that the structural transport type does not accept.
const webSocketTransport = WebSocket as unknown as NonNullable<Options['realtime']>['transport'];

/** A client for one sign-up or one login on behalf of one end user. */
export interface AnonymousCall {
  client: SupabaseClient;
  /** The Retry-After of the provider's last 429 to this client (supabase-js does not surface headers). */
  retryAfter(): string | null;
  /**
   * Rejects with the cause once a request of this client fails as an outage
   * would (no answer, or 502/503/504). supabase-js retries such a refresh with
   * backoff for up to 30 s; racing the call against this answers 503 at the
   * first failure instead, and the client then sends nothing more.
   */
  readonly firstOutage: Promise<never>;
}

export interface IdpClients {
  /**
   * A new client with no session, for one sign-up or one login: nothing is shared between users.
   * It names `clientIp` in X-Forwarded-For, so the provider's per-address limits apply to the end
   * user rather than to this service as a whole (the provider must trust this service as a proxy).
   */
  anonymous(clientIp: string): AnonymousCall;
  /** The secret-key client; it checks access tokens and nothing else (it bypasses row-level security). */
  readonly privileged: SupabaseClient;
  /**
   * The publishable-key client for table requests, shared by all callers. It holds no session:
   * every query names its caller with `asCaller`; a query without one would run as the
   * anonymous role, which the notes table refuses.
   */
  readonly data: SupabaseClient;
}

/**
 * Wraps fetch so no request to the provider, body included, waits longer than
 * `timeoutMs`. supabase-js reports the abort like any network failure (status
 * 0), which the service answers with 503.
 *
 * The timer is cleared as soon as the body has been read. A timer left to run
 * keeps its signal, and with it everything fetch hung on that signal, alive
 * for the whole timeout after the answer: at a few hundred requests a second,
 * about 6 MB of heap and 100 MB of resident memory held for nothing (measured
 * with the soak's memory probe). A response nobody reads keeps the full timer.
 */
export function boundedFetch(timeoutMs: number, base: IdpFetch = fetch): IdpFetch {
  return async (input, init) => {
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new DOMException('The request to the identity provider timed out', 'TimeoutError')),
      timeoutMs,
    );
    timer.unref();
    const release = () => clearTimeout(timer);
    const signal = init?.signal ? AbortSignal.any([init.signal, controller.signal]) : controller.signal;
    let response: Response;
    try {
      response = await base(input, { ...init, signal });
    } catch (err) {
      release();
      throw err;
    }
    releaseOnceRead(response, release);
    return response;
  };
}

const BODY_READERS = ['arrayBuffer', 'blob', 'formData', 'json', 'text'] as const;

/** Calls `release` when one of the response's body readers finishes, however it ends. */
function releaseOnceRead(response: Response, release: () => void): void {
  for (const name of BODY_READERS) {
    const read = response[name].bind(response) as () => Promise<unknown>;
    Object.defineProperty(response, name, { value: () => read().finally(release), configurable: true });
  }
}

export function createIdpClients(
  config: Pick<NotesConfig, 'IDP_URL' | 'IDP_SECRET_KEY' | 'IDP_PUBLISHABLE_KEY' | 'IDP_TIMEOUT_MS' | 'IDP_FORWARDED_SECRET'>,
  baseFetch?: IdpFetch,
): IdpClients {
  const fetchWithTimeout = boundedFetch(config.IDP_TIMEOUT_MS, baseFetch);
  const options = (global: Options['global'] = { fetch: fetchWithTimeout }): Options => ({
    // No session is ever stored, refreshed in the background or read from a URL: the
    // service holds other people's tokens only for the length of one request.
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
    // supabase-js 2.x refuses to construct on Node 20 without a WebSocket class, even
    // though Realtime is never used; `ws` is harmless on Node 22+.
    realtime: { transport: webSocketTransport },
    global,
  });

  return {
    anonymous: (clientIp) => {
      let retryAfter: string | null = null;
      let outage: string | undefined;
      let reportOutage!: (reason: string) => void;
      const firstOutage = new Promise<never>((_, reject) => {
        reportOutage = (reason) => reject(new IdpUnavailableError(reason));
      });
      // Nobody may be racing it (only refresh does): its rejection is not an unhandled one.
      firstOutage.catch(() => {});
      const recordingFetch: IdpFetch = async (input, init) => {
        if (outage) throw new Error(`not sent after an earlier failure: ${outage}`);
        let response: Response;
        try {
          response = await fetchWithTimeout(input, init);
        } catch (err) {
          outage = `status 0, ${(err as Error).message}`;
          reportOutage(outage);
          throw err;
        }
        if (response.status === 429) retryAfter = response.headers.get('retry-after');
        if (response.status === 502 || response.status === 503 || response.status === 504) {
          outage = `status ${response.status}`;
          reportOutage(outage);
        }
        return response;
      };
      // A client per call already (no session may be shared), so the per-user header costs nothing more.
      const client = createClient(
        config.IDP_URL,
        config.IDP_PUBLISHABLE_KEY,
        options({
          fetch: recordingFetch,
          headers: {
            'X-Forwarded-For': clientIp,
            ...(config.IDP_FORWARDED_SECRET ? { 'X-Forwarded-Secret': config.IDP_FORWARDED_SECRET } : {}),
          },
        }),
      );
      return { client, retryAfter: () => retryAfter, firstOutage };
    },
    privileged: createClient(config.IDP_URL, config.IDP_SECRET_KEY, options()),
    data: createClient(config.IDP_URL, config.IDP_PUBLISHABLE_KEY, options()),
  };
}

/**
 * Makes one table query act as the caller: their access token in its own Authorization
 * header (postgrest-js copies headers per query, so nothing is shared between requests),
 * which is what row-level security sees. One shared client rather than one per request:
 * building a supabase-js client took about 8% of the service's CPU under load.
 */
export function asCaller<Query extends { setHeader(name: string, value: string): Query }>(query: Query, accessToken: string): Query {
  return query.setHeader('Authorization', `Bearer ${accessToken}`);
}

/** The provider's public signing keys; also the cheapest request that proves it is up. */
export const jwksUrl = (idpUrl: string) => new URL(`${idpUrl}/auth/v1/.well-known/jwks.json`);
