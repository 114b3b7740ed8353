import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { forbidden } from './errors.js';

// The refresh token of a service's own web pages (backend-for-frontend): the
// browser keeps it in a cookie that no script can read (HttpOnly), that goes
// only over HTTPS or to the local machine (Secure: browsers treat
// http://localhost and http://127.0.0.1 as secure), only with requests the
// service's own site starts (SameSite=Strict), and only to the routes that
// read it (Path). The pages keep the access token in memory; an injected
// script can use the session while the page is open, but can never carry the
// refresh token away.
//
// What reads the cookie also needs a header of its own (CSRF_HEADER): a form
// or a link of another site cannot send one, and a script of another origin
// can only with a CORS preflight, which these services never grant. Cookies
// are not kept apart by port, so each service names its cookie after itself.

export interface RefreshCookie {
  /** The cookie's name, the service's own (`accounts_refresh`). */
  name: string;
  /** The routes it is sent to, and only those. */
  path: string;
  /** How long the browser keeps it; each refresh sets it again. */
  maxAgeSeconds: number;
}

/** The header every route that reads the cookie requires (any value): only a page's own script sends it. */
export const CSRF_HEADER = 'x-csrf-protection';

const CSRF_MISSING = `This route answers the service's own pages only (header ${CSRF_HEADER} missing)`;

/** The cookie's value in the request, if sent. */
export function readRefreshCookie(request: FastifyRequest, cookie: RefreshCookie): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === cookie.name) return value.join('=') || undefined;
  }
  return undefined;
}

function attributes(cookie: RefreshCookie): string {
  return `Path=${cookie.path}; HttpOnly; Secure; SameSite=Strict`;
}

/** Keeps `token` in the browser's cookie (set again at each refresh, for its full lifetime). */
export function setRefreshCookie(reply: FastifyReply, cookie: RefreshCookie, token: string): void {
  void reply.header('set-cookie', `${cookie.name}=${token}; Max-Age=${cookie.maxAgeSeconds}; ${attributes(cookie)}`);
}

/** Makes the browser forget the cookie (sign-out, or a token the service no longer accepts). */
export function clearRefreshCookie(reply: FastifyReply, cookie: RefreshCookie): void {
  void reply.header('set-cookie', `${cookie.name}=; Max-Age=0; ${attributes(cookie)}`);
}

/** An onRequest hook: 403 unless the request carries CSRF_HEADER, before anything else is read. */
export const requireCsrfHeader: onRequestAsyncHookHandler = async (request) => {
  if (request.headers[CSRF_HEADER] === undefined) throw forbidden(CSRF_MISSING);
};
