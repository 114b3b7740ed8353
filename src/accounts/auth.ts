import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { forbidden, unauthorized } from '../kit/errors.js';
import type { App } from '../kit/http.js';
import type { Role } from './repository.js';
import type { AccessClaims, AccessTokens } from './tokens.js';

export const NO_TOKEN = 'Access denied. No token provided.';
export const NO_PERMISSION = 'You do not have permission to access this resource.';

const BEARER = 'Bearer ';

// Kept beside the request rather than declared on FastifyRequest, so no other
// service's type augmentation can collide with it.
const callers = new WeakMap<FastifyRequest, AccessClaims>();

/** The verified claims of the request; only reachable inside an `authenticated` scope. */
export function callerOf(request: FastifyRequest): AccessClaims {
  const caller = callers.get(request);
  if (!caller) throw new Error('callerOf() used on a route outside an authenticated scope');
  return caller;
}

/**
 * Everything registered inside `routes` needs a valid access token, and, when
 * `role` is given, that role too: token first, role second (docs/accounts.md, rule 6). Both run
 * as onRequest hooks, before the body or query is even parsed, so an
 * unauthenticated caller learns nothing from validation errors.
 */
export function authenticated(
  app: App,
  opts: { tokens: AccessTokens; role?: Role },
  routes: (scope: App) => void,
): void {
  void app.register(async (scope) => {
    scope.addHook('onRequest', verifyBearerToken(opts.tokens));
    if (opts.role) scope.addHook('onRequest', requireRole(opts.role));
    routes(scope);
  });
}

function verifyBearerToken(tokens: AccessTokens): onRequestAsyncHookHandler {
  return async (request) => {
    const header = request.headers.authorization;
    // The spec's form only: exactly `Bearer ` then the token.
    if (typeof header !== 'string' || !header.startsWith(BEARER) || header.length === BEARER.length) {
      throw unauthorized(NO_TOKEN);
    }
    callers.set(request, await tokens.verifyAccessToken(header.slice(BEARER.length)));
  };
}

function requireRole(role: Role): onRequestAsyncHookHandler {
  return async (request) => {
    const caller = callerOf(request);
    if (caller.role !== role) {
      request.log.warn(
        { event: 'access_denied', userId: caller.id, role: caller.role, required: role, ip: request.ip },
        'forbidden: role required',
      );
      throw forbidden(NO_PERMISSION);
    }
  };
}
