import type { FastifyReply, FastifyRequest } from 'fastify';
import { ConfigError, type VarSpec } from '../kit/config.js';
import type { App } from '../kit/http/app.js';

// CORS as Supabase serves browser apps. Its gateway (Kong's cors plugin, default settings) answers
// every preflight itself, before any key is checked: any origin, the usual methods, and whatever
// request headers the browser asks for (apikey, authorization, x-client-info, prefer,
// accept-profile, …: supabase-js sends several). On actual responses the services behind it expose
// their headers: PostgREST Content-Range, Range-Unit, Location, …; Auth X-Total-Count, Link and
// X-Supabase-Api-Version. The same rules apply to every route here, errors included, so a browser
// can read why a request failed (a 401 from the key check, a PGRST error).
//
// No credentials (cookies) are ever allowed: supabase-js sends its keys and tokens in headers.

/** `*`, or the exact origins (`scheme://host[:port]`) allowed to call the idp from a browser. */
export type CorsOrigins = '*' | ReadonlySet<string>;

const METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
/** PostgREST's exposed headers (Cors.hs) and Supabase Auth's (api.go), together. */
export const EXPOSED_HEADERS = [
  'Content-Encoding',
  'Content-Location',
  'Content-Range',
  'Content-Type',
  'Date',
  'Location',
  'Server',
  'Transfer-Encoding',
  'Range-Unit',
  'X-Total-Count',
  'Link',
  'X-Supabase-Api-Version',
].join(', ');
/** How long a browser may reuse a preflight answer (PostgREST's own value). */
const MAX_AGE_SECONDS = 86_400;

// A header name is an RFC 9110 token; anything else in Access-Control-Request-Headers is not echoed.
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Enough for any real client (supabase-js asks for at most a handful); bounds what is echoed.
const MAX_REQUEST_HEADERS = 64;

/** IDP_CORS_ORIGINS: `*` or a comma-separated list of origins such as `http://localhost:3000`. */
export const corsOrigins = (): VarSpec<CorsOrigins, true> => ({
  default: '*',
  parse: (raw, name) => {
    const value = raw.trim();
    if (value === '*') return '*';
    const origins = value
      .split(',')
      .map((o) => o.trim())
      .filter(Boolean);
    if (origins.length === 0) throw new ConfigError(name, 'must be * or a comma-separated list of origins');
    for (const origin of origins) {
      let parsed: URL | null = null;
      try {
        parsed = new URL(origin);
      } catch {
        parsed = null;
      }
      // Browsers send the serialized origin: scheme, host and a non-default port, nothing else.
      // No wildcards in a host: every allowed origin is spelled out.
      const plainHost = parsed !== null && /^([a-z0-9-]+(\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])$/i.test(parsed.hostname);
      if (parsed === null || !['http:', 'https:'].includes(parsed.protocol) || parsed.origin !== origin || !plainHost) {
        throw new ConfigError(name, `has "${origin}", which is not an origin like https://app.example.com or http://localhost:3000`);
      }
    }
    return new Set(origins);
  },
});

function allowedOrigin(origins: CorsOrigins, origin: string | undefined): string | null {
  if (origin === undefined) return null;
  if (origins === '*') return '*';
  return origins.has(origin) ? origin : null;
}

function requestedHeaders(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  const names = raw
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '' && TOKEN.test(h));
  if (names.length === 0 || names.length > MAX_REQUEST_HEADERS) return null;
  return [...new Set(names)].join(', ');
}

function isPreflight(request: FastifyRequest): boolean {
  return (
    request.method === 'OPTIONS' && request.headers.origin !== undefined && request.headers['access-control-request-method'] !== undefined
  );
}

/** Installs the CORS rules on the whole app; call before routes are registered. */
export function installCors(app: App, origins: CorsOrigins): void {
  const vary = (reply: FastifyReply) => {
    // With a list the answer depends on the Origin; with * it does not.
    if (origins !== '*') reply.header('vary', 'Origin');
  };

  // A preflight is answered here, before routing and before the key check: browsers send no
  // apikey on it. An origin not allowed gets the same 200 without any Access-Control-Allow-*
  // header, which the browser takes as a refusal.
  // Callback hooks, not async ones: every request passes both, and an async hook costs each a promise.
  app.addHook('onRequest', (request, reply, done) => {
    if (!isPreflight(request)) return done();
    vary(reply);
    const allowed = allowedOrigin(origins, request.headers.origin);
    if (allowed !== null) {
      reply
        .header('access-control-allow-origin', allowed)
        .header('access-control-allow-methods', METHODS)
        .header('access-control-max-age', String(MAX_AGE_SECONDS));
      const headers = requestedHeaders(request.headers['access-control-request-headers']);
      if (headers !== null) reply.header('access-control-allow-headers', headers);
    }
    reply.code(200).header('content-length', '0').send();
  });

  app.addHook('onSend', (request, reply, payload, done) => {
    if (!isPreflight(request)) {
      vary(reply);
      const allowed = allowedOrigin(origins, request.headers.origin);
      if (allowed !== null) reply.header('access-control-allow-origin', allowed).header('access-control-expose-headers', EXPOSED_HEADERS);
    }
    done(null, payload);
  });
}
