import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';

// The response headers a careful operator expects, set by @fastify/helmet on
// every response (errors and 404s included), with these choices:
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

export interface SecurityHeaderOptions {
  /** Seconds; 0 or absent: no Strict-Transport-Security header. */
  hstsMaxAge?: number;
}

export async function registerSecurityHeaders(app: FastifyInstance, opts: SecurityHeaderOptions): Promise<void> {
  await app.register(helmet, {
    global: true,
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        'default-src': ["'none'"],
        'base-uri': ["'none'"],
        'form-action': ["'none'"],
        'frame-ancestors': ["'none'"],
      },
    },
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'strict-origin-when-cross-origin' },
    crossOriginResourcePolicy: { policy: 'same-origin' },
    crossOriginOpenerPolicy: { policy: 'same-origin' },
    crossOriginEmbedderPolicy: false,
    // This host only: includeSubDomains would impose https on every other service under the domain.
    hsts: opts.hstsMaxAge ? { maxAge: opts.hstsMaxAge, includeSubDomains: false } : false,
  });
}

/**
 * The Swagger UI's own policy (its assets and hashed inline code, from
 * @fastify/swagger-ui) without upgrade-insecure-requests, which would send the
 * page's requests for its assets to https when /docs is served over http.
 */
export const docsContentSecurityPolicy = (policy: string): string =>
  policy
    .split(';')
    .map((directive) => directive.trim())
    .filter((directive) => directive !== '' && directive !== 'upgrade-insecure-requests')
    .join('; ');

/**
 * Route option (`helmet: pageSecurityHeaders`) for the HTML pages of a
 * service: they load their own scripts, styles and images, call their own API
 * and nothing else, with no inline script or style (the pages carry none), so
 * an injected <script> or style attribute does not run. The other headers stay
 * the global ones.
 */
export const pageSecurityHeaders = {
  contentSecurityPolicy: {
    useDefaults: false,
    directives: {
      'default-src': ["'self'"],
      'script-src': ["'self'"],
      'style-src': ["'self'"],
      'img-src': ["'self'", 'data:'],
      'connect-src': ["'self'"],
      'frame-ancestors': ["'none'"],
      'base-uri': ["'none'"],
      'form-action': ["'self'"],
    },
  },
};
