import type { FastifyInstance } from 'fastify';

// The response headers a careful operator expects, on every response (errors
// and 404s included), with these choices:
// - Content-Security-Policy: the APIs answer JSON and never need to load
//   anything, so nothing is allowed. The Swagger UI under /docs sends its own
//   policy (see docsContentSecurityPolicy) that allows its own assets, and
//   the HTML pages theirs (pageSecurityHeaders).
// - Frames: neither the APIs nor /docs may be framed (X-Frame-Options DENY,
//   frame-ancestors 'none'), against clickjacking of the docs page.
// - Referrer-Policy strict-origin-when-cross-origin: the browsers' own default,
//   stated for those whose default leaks more. It also governs the referrer the
//   shortener's 302 passes on: a destination sees the origin of the page the
//   link was clicked on, as without a shortener, never a full URL.
// - Cross-Origin-Resource-Policy same-origin: it only governs no-cors loads
//   (<img>, <script>); browsers calling the APIs with fetch (supabase-js
//   against the idp) use CORS mode, which it does not affect.
// - Cross-Origin-Embedder-Policy: not sent; it constrains documents that embed
//   other origins, and only /docs is a document.
// - Strict-Transport-Security: only when HSTS_MAX_AGE is set, because the
//   services also run on plain http (locally, behind a TLS-terminating proxy),
//   and a browser that saw HSTS for a host refuses http to it for max-age.
// The rest are the usual hardening defaults (those of helmet): nosniff, no DNS
// prefetch, no cross-domain policy files, the legacy XSS filter off.
//
// The headers are fixed strings, built once per policy and set by one
// synchronous hook, through the reply rather than on the raw response: a
// header set on the raw response makes Node take its slow path for every
// header of the answer (each one set and checked one by one, Fastify's own
// too), while a reply's headers reach Node in one object, checked once as the
// head is written. Their names go on the wire in lower case, as Fastify's own.

export interface SecurityHeaderOptions {
  /** Seconds; 0 or absent: no Strict-Transport-Security header. */
  hstsMaxAge?: number;
}

/** Route option `config: pageSecurityHeaders` (or any `{ contentSecurityPolicy }`): that route's own policy. */
export interface SecurityHeadersConfig {
  contentSecurityPolicy?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig extends SecurityHeadersConfig {}
}

/** The APIs' policy: a JSON answer loads nothing, and nothing may frame it. */
const API_CONTENT_SECURITY_POLICY = "default-src 'none';base-uri 'none';form-action 'none';frame-ancestors 'none'";

/** Every header of a response under the given policy, in the order they are set. */
export function securityHeaders(contentSecurityPolicy: string, hstsMaxAge?: number): Array<[string, string]> {
  return [
    ['Content-Security-Policy', contentSecurityPolicy],
    ['Cross-Origin-Opener-Policy', 'same-origin'],
    ['Cross-Origin-Resource-Policy', 'same-origin'],
    ['Origin-Agent-Cluster', '?1'],
    ['Referrer-Policy', 'strict-origin-when-cross-origin'],
    // This host only: includeSubDomains would impose https on every other service under the domain.
    ...(hstsMaxAge ? [['Strict-Transport-Security', `max-age=${hstsMaxAge}`] as [string, string]] : []),
    ['X-Content-Type-Options', 'nosniff'],
    ['X-DNS-Prefetch-Control', 'off'],
    ['X-Download-Options', 'noopen'],
    ['X-Frame-Options', 'DENY'],
    ['X-Permitted-Cross-Domain-Policies', 'none'],
    ['X-XSS-Protection', '0'],
  ];
}

export async function registerSecurityHeaders(app: FastifyInstance, opts: SecurityHeaderOptions): Promise<void> {
  const byPolicy = new Map<string, Array<[string, string]>>();
  const headersOf = (policy: string) => {
    let headers = byPolicy.get(policy);
    if (!headers) {
      headers = securityHeaders(policy, opts.hstsMaxAge).map(([name, value]) => [name.toLowerCase(), value]);
      byPolicy.set(policy, headers);
    }
    return headers;
  };
  const api = headersOf(API_CONTENT_SECURITY_POLICY);
  // Before anything else answers: a route's own headers (the Swagger UI's policy) are set later
  // through the reply, under the same lower-case names, and take precedence.
  app.addHook('onRequest', (request, reply, done) => {
    const policy = request.routeOptions.config.contentSecurityPolicy;
    const headers = policy === undefined ? api : headersOf(policy);
    for (const [name, value] of headers) reply.header(name, value);
    done();
  });
}

/**
 * The Swagger UI's own policy (its assets and hashed inline code, from
 * @fastify/swagger-ui), changed where it does not fit this page:
 * - no upgrade-insecure-requests, which would send the page's requests for its
 *   assets to https when /docs is served over http;
 * - styles from this origin, plus the <style> element Swagger UI's React code
 *   writes as it renders (blocked, it was a console error on every load):
 *   'unsafe-inline' for styles only, on a page that shows nothing but the
 *   service's own document; scripts stay 'self' and hashed;
 * - no framing at all (frame-ancestors 'none'), as for the APIs and the pages.
 */
export const docsContentSecurityPolicy = (policy: string): string =>
  policy
    .split(';')
    .map((directive) => directive.trim())
    .filter((directive) => directive !== '' && directive !== 'upgrade-insecure-requests')
    .map((directive) => {
      const [name] = directive.split(/\s+/, 1);
      if (name === 'style-src') return "style-src 'self' 'unsafe-inline'";
      if (name === 'frame-ancestors') return "frame-ancestors 'none'";
      return directive;
    })
    .join('; ');

/**
 * Route option (`config: pageSecurityHeaders`) for the HTML pages of a
 * service: they load their own scripts, styles and images, call their own API
 * and nothing else, with no inline script or style (the pages carry none), so
 * an injected <script> or style attribute does not run. The other headers stay
 * the global ones.
 */
export const pageSecurityHeaders: SecurityHeadersConfig = {
  contentSecurityPolicy:
    "default-src 'self';script-src 'self';style-src 'self';img-src 'self' data:;connect-src 'self';frame-ancestors 'none';base-uri 'none';form-action 'self'",
};
