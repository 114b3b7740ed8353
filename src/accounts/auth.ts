import type { onRequestAsyncHookHandler } from 'fastify';
import type { Clock } from '../kit/clock.js';
import { HttpError, forbidden, notFound, unauthorized } from '../kit/http/errors.js';
import type { App } from '../kit/http/app.js';
import { requestSlot } from '../kit/http/identity.js';
import { type AuditLog, originOf } from './audit.js';
import type { PublicUser, Role, UsersRepository } from './repository.js';
import { type AccessTokens, type Authentication, INVALID_TOKEN, usedSecondFactor } from './tokens.js';
import { USER_NOT_FOUND } from './service.js';

export const NO_TOKEN = 'Access denied. No token provided.';
export const NO_PERMISSION = 'You do not have permission to access this resource.';

const BEARER = 'Bearer ';

/**
 * The caller: the user row behind the verified token, as it is now (its role
 * included); only set inside a scope that called `requireAccessToken`.
 */
export const callers = requestSlot<PublicUser>('accounts caller');

/** How the caller's token says its session was authenticated (auth_time, amr). */
export const authentications = requestSlot<Authentication>('accounts authentication');

export const REAUTHENTICATION_REQUIRED =
  'reauthentication_required: this operation needs a recent sign-in; sign in again (POST /auth/login) and retry with the new token.';

/**
 * The refusal of a sensitive operation whose token's authentication is older than
 * REAUTH_MAX_AGE: 401 with the stable message prefix `reauthentication_required`,
 * and the header of OAuth 2.0 step-up (RFC 9470) for clients that read it.
 */
export function reauthenticationRequired(maxAgeSeconds: number): HttpError {
  return new HttpError(401, REAUTHENTICATION_REQUIRED, {
    'www-authenticate': `Bearer error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age=${maxAgeSeconds}`,
  });
}

/** Whether the caller signed in (password, and factor if any) within the last `maxAgeSeconds`. */
export function checkRecentAuthentication(authentication: Authentication, maxAgeSeconds: number, clock: Clock): void {
  if (clock() - authentication.authTime * 1000 > maxAgeSeconds * 1000) throw reauthenticationRequired(maxAgeSeconds);
}

/** The window and clock the step-up check of sensitive operations uses (REAUTH_MAX_AGE). */
export interface StepUp {
  maxAgeSeconds: number;
  clock: Clock;
}

/** An onRequest hook, after requireAccessToken's: the scope's routes need a recent authentication. */
export function requireRecentAuthentication(scope: App, stepUp: StepUp): void {
  scope.addHook('onRequest', async (request) => {
    checkRecentAuthentication(authentications.get(request), stepUp.maxAgeSeconds, stepUp.clock);
  });
}

export const MFA_ENROLLMENT_REQUIRED =
  'mfa_enrollment_required: admin routes need two-step sign-in on the admin account; add a factor (TOTP: POST /auth/factors/totp, then /auth/factors/totp/confirm; or a passkey: POST /auth/passkeys/registration-options, then POST /auth/passkeys) and sign in again with it.';
export const MFA_SIGN_IN_REQUIRED =
  'mfa_sign_in_required: admin routes need a sign-in with your second factor; sign in again (POST /auth/login, then POST /auth/login/factor) and retry with the new token.';

/** Whether a user has a second factor on now (REQUIRE_ADMIN_MFA asks it of admins). */
export interface SecondFactorLookup {
  isOn(userId: string): Promise<boolean>;
}

/** What checking an access token needs: the token's signature, the user row, and the audit log for 403s. */
export interface AccessCheck {
  tokens: AccessTokens;
  users: UsersRepository;
  audit: AuditLog;
  /** Set when REQUIRE_ADMIN_MFA is on: routes of role admin also need the admin's second factor. */
  adminSecondFactor?: SecondFactorLookup;
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
  if (opts.role === 'admin' && opts.adminSecondFactor) scope.addHook('onRequest', requireSecondFactor(opts.adminSecondFactor, opts.audit));
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
    authentications.set(request, claims.authentication);
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

/**
 * REQUIRE_ADMIN_MFA, after the role check: the admin has a second factor now (a factor
 * removed since the sign-in counts as none), and the token's sign-in used it. Without a
 * factor, 403: signing in again cannot help, enrolling does (those routes need no role).
 * With one but a password-only sign-in (a token from before enrolling), 401 as for step-up:
 * signing in again asks for the code.
 */
function requireSecondFactor(lookup: SecondFactorLookup, audit: AuditLog): onRequestAsyncHookHandler {
  return async (request) => {
    const caller = callers.get(request);
    if (!(await lookup.isOn(caller.id))) {
      request.log.warn(
        { event: 'access_denied', userId: caller.id, role: caller.role, ip: request.ip },
        'forbidden: admin without a second factor',
      );
      await audit.record({
        event: 'access_denied',
        actorId: caller.id,
        origin: originOf(request),
        details: { method: request.method, route: request.routeOptions.url ?? '', reason: 'mfa_enrollment_required' },
      });
      throw forbidden(MFA_ENROLLMENT_REQUIRED);
    }
    if (!usedSecondFactor(authentications.get(request))) {
      throw new HttpError(401, MFA_SIGN_IN_REQUIRED, {
        'www-authenticate':
          'Bearer error="insufficient_user_authentication", error_description="A sign-in with a second factor is required"',
      });
    }
  };
}
