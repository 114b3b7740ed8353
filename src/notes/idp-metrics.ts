import { Counter, Histogram, type Registry } from 'prom-client';
import type { IdpFetch } from './idp-clients.js';

// Every request to the identity provider, counted by the kind of endpoint and
// how it ended. The kind comes from a fixed list matched against the path, so
// no user id, table filter or token ever becomes a label.

const AUTH_KINDS: Record<string, string> = {
  user: 'auth_user',
  token: 'auth_token',
  signup: 'auth_signup',
  logout: 'auth_logout',
  '.well-known/jwks.json': 'jwks',
};

export function idpEndpointKind(url: string): string {
  const path = new URL(url).pathname;
  const auth = /\/auth\/v1\/(.+)$/.exec(path);
  if (auth) return AUTH_KINDS[auth[1]!] ?? 'auth_other';
  return /\/rest\/v1\//.test(path) ? 'rest' : 'other';
}

const urlOf = (input: Parameters<IdpFetch>[0]) => (typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);

/**
 * Wraps the fetch every provider request goes through (beneath the request
 * timeout, so an abort by that timeout is seen here as `timeout`). Counts when
 * the answer's headers arrive, or when the request fails.
 */
export function measuredIdpFetch(registry: Registry, base: IdpFetch = fetch): IdpFetch {
  const calls = new Counter({
    name: 'notes_idp_requests_total',
    help: 'Requests to the identity provider by endpoint kind and outcome: ok, 4xx, 5xx, timeout, error (network).',
    labelNames: ['kind', 'outcome'] as const,
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'notes_idp_request_duration_seconds',
    help: 'Time until the identity provider answered (headers), or the request failed, by endpoint kind.',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  return async (input, init) => {
    const kind = idpEndpointKind(urlOf(input));
    const started = performance.now();
    const done = (outcome: string) => {
      calls.inc({ kind, outcome });
      durations.observe({ kind }, (performance.now() - started) / 1000);
    };
    let response: Response;
    try {
      response = await base(input, init);
    } catch (err) {
      done((err as Error | undefined)?.name === 'TimeoutError' ? 'timeout' : 'error');
      throw err;
    }
    done(response.status >= 500 ? '5xx' : response.status >= 400 ? '4xx' : 'ok');
    return response;
  };
}
