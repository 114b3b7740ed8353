import type { FastifyRequest } from 'fastify';

// Credentials sent in a query string (`?apikey=…`, `?access_token=…`) must not
// reach the logs with the URL they came in.

export const REDACTED = '[redacted]';

/**
 * Query parameters whose value is redacted in every logged URL, compared case-
 * insensitively: API keys (`apikey`, as PostgREST and the Supabase gateway
 * accept them), bearer and OAuth tokens and codes, passwords, secrets and
 * signatures.
 */
export const CREDENTIAL_QUERY_PARAMETERS: ReadonlySet<string> = new Set([
  'apikey',
  'api_key',
  'api-key',
  'key',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  // A mailed link's one-time token (Supabase's `token_hash`), good for a session until used.
  'token_hash',
  'jwt',
  'code',
  'auth',
  'authorization',
  'secret',
  'client_secret',
  'password',
  'passwd',
  'pwd',
  'signature',
  'sig',
]);

/** Names no list can foresee (`auth_token`, `x-api-key`, `db_password`) end like these. */
const CREDENTIAL_SUFFIX = /(token|secret|password|api[_-]?key)$/;

function isCredentialName(raw: string): boolean {
  let name = raw;
  // Most names are plain: decoding is for the ones that carry an escape or a plus.
  if (raw.includes('%') || raw.includes('+')) {
    try {
      name = decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      // an undecodable name is compared as it was sent
    }
  }
  name = name.trim().toLowerCase();
  return CREDENTIAL_QUERY_PARAMETERS.has(name) || CREDENTIAL_SUFFIX.test(name);
}

/** The URL (path and query) with the value of every credential parameter replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  const start = url.indexOf('?');
  if (start === -1) return url;
  const query = url
    .slice(start + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      return eq !== -1 && isCredentialName(pair.slice(0, eq)) ? `${pair.slice(0, eq)}=${REDACTED}` : pair;
    })
    .join('&');
  return `${url.slice(0, start)}?${query}`;
}

/** Fastify's own request serializer, with the URL redacted (any object logged as `req` goes through it). */
export function serializeRequest(request: FastifyRequest) {
  // Spelt out rather than spread from serializeRequestWithoutClient: it is on every access line.
  return {
    method: request.method,
    url: typeof request.url === 'string' ? redactUrl(request.url) : undefined,
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/**
 * The same without the client's address and port, for a service that must not
 * be able to tell who called it (the shortener's visitors).
 */
export function serializeRequestWithoutClient(request: FastifyRequest) {
  return {
    method: request.method,
    url: typeof request.url === 'string' ? redactUrl(request.url) : undefined,
    host: request.host,
  };
}
