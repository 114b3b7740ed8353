import type { onRequestAsyncHookHandler } from 'fastify';
import { forbidden, notFound, unauthorized } from '../kit/errors.js';
import type { App } from '../kit/http.js';
import { requestSlot } from '../kit/identity.js';
import { type AuditLog, originOf } from './audit.js';
import type { PublicUser, Role, UsersRepository } from './repository.js';
import { type AccessTokens, INVALID_TOKEN } from './tokens.js';
import { USER_NOT_FOUND } from './service.js';

export const NO_TOKEN = 'Access denied. No token provided.';
export const NO_PERMISSION = 'You do not have permission to access this resource.';

const BEARER = 'Bearer ';

/**
 * The caller: the user row behind the verified token, as it is now (its role
 * included); only set inside a scope that called `requireAccessToken`.
 */
export const callers = requestSlot<PublicUser>('accounts caller');

/** What checking an access token needs: the token's signature, the user row, and the audit log for 403s. */
export interface AccessCheck {
  tokens: AccessTokens;
  users: UsersRepository;
  audit: AuditLog;
}

/**
 * Every route of this scope (a route plugin) needs a valid access token, and, when
 * `role` is given, that role too: token first, role second (docs/accounts.md, rule 6). Both run
 * as onRequest hooks, before the body or query is even parsed, so an
 * unauthenticated caller learns nothing from validation errors.
 */
export function requireAccessToken(scope: App, opts: AccessCheck & { role?: Role; deletedAccount?: 'not-found' }): void {
  scope.addHook('onRequest', verifyBearerToken(opts, opts.deletedAccount === 'not-found'));
  if (opts.role) scope.addHook('onRequest', requireRole(opts.role, opts.audit));
}

/**
 * The signature and expiry, then the user row (the one query of a protected
 * route): a token issued before the user's cut-off (global logout, password,
 * role change, ban) is refused like an expired one, and so is the token of a
 * deleted user, except on /auth/me, whose 404 the contract names (rule 5).
 */
function verifyBearerToken(check: AccessCheck, deletedIsNotFound: boolean): onRequestAsyncHookHandler {
  return async (request) => {
    const header = request.headers.authorization;
    // The spec's form only: exactly `Bearer ` then the token.
    if (typeof header !== 'string' || !header.startsWith(BEARER) || header.length === BEARER.length) {
      throw unauthorized(NO_TOKEN);
    }
    const claims = await check.tokens.verifyAccessToken(header.slice(BEARER.length));
    const account = await check.users.findAccountById(claims.id);
    if (!account) throw deletedIsNotFound ? notFound(USER_NOT_FOUND) : unauthorized(INVALID_TOKEN);
    if (claims.iat < account.accessTokensFrom || account.banned) throw unauthorized(INVALID_TOKEN);
    callers.set(request, account.user);
  };
}

function requireRole(role: Role, audit: AuditLog): onRequestAsyncHookHandler {
  return async (request) => {
    const caller = callers.get(request);
    if (caller.role !== role) {
      request.log.warn(
        { event: 'access_denied', userId: caller.id, role: caller.role, required: role, ip: request.ip },
        'forbidden: role required',
      );
      await audit.record({
        event: 'access_denied',
        actorId: caller.id,
        origin: originOf(request),
        details: { method: request.method, route: request.routeOptions.url ?? '', required_role: role },
      });
      throw forbidden(NO_PERMISSION);
    }
  };
}
