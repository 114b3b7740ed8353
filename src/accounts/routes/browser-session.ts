import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { App } from '../../kit/http/app.js';
import { HttpError } from '../../kit/http/errors.js';
import { described } from '../../kit/http/openapi.js';
import {
  CSRF_HEADER,
  clearRefreshCookie,
  type RefreshCookie,
  readRefreshCookie,
  requireCsrfHeader,
  setRefreshCookie,
} from '../../kit/http/refresh-cookie.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import { type AccessCheck, type StepUp, authentications, callers, checkRecentAuthentication, requireAccessToken } from '../auth.js';
import type { Factors } from '../factors.js';
import type { Passkeys } from '../passkeys.js';
import { passkeySignInFailures } from './passkeys.js';
import { type EmailSignin, INVALID_EMAIL_SIGNIN } from '../email-signin.js';
import { FactorAnswerBody, factorFailures } from './factors.js';
import type { AccountsService } from '../service.js';
import { INVALID_REFRESH_TOKEN, type Sessions, type TokenPair } from '../sessions.js';
import { BEARER_SECURITY, Done, Errors, FactorChallenge, PasskeyAssertion, PublicUser, ReauthenticationRequired } from './schemas.js';

// The session of the accounts web pages (backend-for-frontend, docs/accounts.md,
// "Sessions in the browser"): the same login, refresh, password change and
// logout as the API, but the refresh token travels only in an HttpOnly cookie
// scoped to these routes, never in a body a script could read. A second tab, or
// the page after a browser restart, resumes the session with one refresh.

export const BROWSER_SESSION_PATH = '/auth/browser';

const BrowserSession = Type.Object({
  token: Type.String({ description: 'Access token, kept in the page’s memory' }),
  expires_in: Type.Integer({ description: 'Seconds the access token lives' }),
  session_id: Type.String({ format: 'uuid', description: 'This browser’s session, as GET /auth/sessions lists it' }),
  user: PublicUser,
});

const EmailSigninBody = Type.Object(
  {
    email: Type.Optional(Type.String({ maxLength: 320 })),
    code: Type.Optional(Type.String({ maxLength: 32 })),
    token: Type.Optional(Type.String({ maxLength: 256 })),
  },
  { additionalProperties: false },
);
const LoginBody = Type.Object({ email: Type.String(), password: Type.String() }, { additionalProperties: false });
const PasskeySignInBody = Type.Object({ response: PasskeyAssertion }, { additionalProperties: false });
const PasswordBody = Type.Object(
  { current_password: Type.String({ maxLength: 1024 }), new_password: Type.String() },
  { additionalProperties: false },
);
const LogoutBody = Type.Object(
  { scope: Type.Optional(Type.Literal('global', { description: 'Every session ends, as POST /auth/logout {scope: "global"}' })) },
  { additionalProperties: false },
);

const csrfRefused = described(ErrorEnvelope, `The ${CSRF_HEADER} header is missing: these routes answer the service's own pages only`);
const COOKIE_DESCRIPTION =
  `Sets the refresh token in the cookie accounts_refresh (HttpOnly; Secure; SameSite=Strict; Path=${BROWSER_SESSION_PATH}). ` +
  `Needs the header ${CSRF_HEADER} (any value).`;

export async function browserSessionRoutes(
  app: App,
  {
    accounts,
    sessions,
    access,
    factors,
    passkeys,
    stepUp,
    cookieMaxAgeSeconds,
    emailSignin,
  }: {
    accounts: AccountsService;
    sessions: Sessions;
    access: AccessCheck;
    factors: Factors;
    passkeys: Passkeys;
    stepUp: StepUp;
    cookieMaxAgeSeconds: number;
    /** Set when EMAIL_SIGNIN is on. */
    emailSignin?: EmailSignin;
  },
): Promise<void> {
  const cookie: RefreshCookie = { name: 'accounts_refresh', path: BROWSER_SESSION_PATH, maxAgeSeconds: cookieMaxAgeSeconds };

  /** The pair's refresh token into the cookie; the rest, with the session's id, to the page. */
  async function answer(reply: FastifyReply, pair: TokenPair, message: string) {
    setRefreshCookie(reply, cookie, pair.refresh_token);
    const sessionId = await sessions.idOf(pair.refresh_token);
    return dataEnvelope(200, message, { token: pair.token, expires_in: pair.expires_in, session_id: sessionId, user: pair.user });
  }

  /** A refusal that means the cookie's session is over: the browser forgets the cookie too. */
  async function forgettingCookieOnRefusal<T>(reply: FastifyReply, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof HttpError && (err.statusCode === 401 || err.statusCode === 403)) clearRefreshCookie(reply, cookie);
      throw err;
    }
  }

  // Public: a sign-in, and the refresh that resumes a session from the cookie.
  await app.register(async (scope: App) => {
    scope.addHook('onRequest', requireCsrfHeader);
    scope.post(
      `${BROWSER_SESSION_PATH}/login`,
      {
        schema: {
          tags: ['browser session'],
          summary: 'Sign in from the web pages: POST /auth/login, with the refresh token in a cookie',
          description: COOKIE_DESCRIPTION,
          body: LoginBody,
          response: {
            200: envelope(Type.Union([BrowserSession, FactorChallenge])),
            400: Errors.invalid("body must have required property 'password'"),
            401: described(ErrorEnvelope, 'No account with this email and password', statusEnvelope(401, 'Invalid email or password')),
            403: csrfRefused,
            429: described(ErrorEnvelope, 'Too many failed logins for this account or from this client (Retry-After)'),
            503: Errors.unavailable('The password-checking queue is full or the database is unavailable (Retry-After)'),
          },
        },
      },
      async (request, reply) => {
        const outcome = await accounts.login(request.body, { ...originOf(request), log: request.log });
        // A second factor: no cookie yet, the challenge goes to the page for the second step.
        if ('mfa_required' in outcome) return dataEnvelope(200, 'Second factor required', outcome);
        return answer(reply, outcome, 'Login successful');
      },
    );

    if (emailSignin) {
      scope.post(
        `${BROWSER_SESSION_PATH}/email-signin`,
        {
          schema: {
            tags: ['browser session'],
            summary: 'Sign in from the web pages with a sign-in mail: POST /auth/email-signin/verify, with the refresh token in a cookie',
            description: COOKIE_DESCRIPTION,
            body: EmailSigninBody,
            response: {
              200: envelope(Type.Union([BrowserSession, FactorChallenge])),
              400: Errors.invalid('Give either email and code, or token'),
              401: described(ErrorEnvelope, 'Wrong, used, expired or voided code or link', statusEnvelope(401, INVALID_EMAIL_SIGNIN)),
              403: csrfRefused,
              429: described(ErrorEnvelope, 'Too many failed logins for this account or from this client (Retry-After)'),
              503: Errors.unavailable('The database is unavailable (Retry-After)'),
            },
          },
        },
        async (request, reply) => {
          const outcome = await emailSignin.verify(request.body, { ...originOf(request), log: request.log });
          if ('mfa_required' in outcome) return dataEnvelope(200, 'Second factor required', outcome);
          return answer(reply, outcome, 'Login successful');
        },
      );
    }

    scope.post(
      `${BROWSER_SESSION_PATH}/passkey-sign-in`,
      {
        schema: {
          tags: ['browser session'],
          summary: 'Sign in from the web pages with a passkey alone: POST /auth/passkeys/sign-in, with the refresh token in a cookie',
          description: `${COOKIE_DESCRIPTION} The options come from POST /auth/passkeys/sign-in/options.`,
          body: PasskeySignInBody,
          response: {
            200: envelope(BrowserSession),
            400: Errors.invalid("body must have required property 'response'"),
            401: passkeySignInFailures[401],
            403: csrfRefused,
            429: passkeySignInFailures[429],
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request, reply) => {
        const pair = await passkeys.signIn(request.body.response, { ...originOf(request), log: request.log });
        return answer(reply, pair, 'Login successful');
      },
    );

    scope.post(
      `${BROWSER_SESSION_PATH}/login/factor`,
      {
        schema: {
          tags: ['browser session'],
          summary: 'The second step of a sign-in from the web pages: POST /auth/login/factor, with the refresh token in a cookie',
          description: COOKIE_DESCRIPTION,
          body: FactorAnswerBody,
          response: {
            200: envelope(BrowserSession),
            400: Errors.invalid('Give exactly one of code, recovery_code and passkey'),
            401: factorFailures[401],
            403: csrfRefused,
            429: factorFailures[429],
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request, reply) => {
        const pair = await factors.completeLogin(request.body, { ...originOf(request), log: request.log });
        return answer(reply, pair, 'Login successful');
      },
    );

    scope.post(
      `${BROWSER_SESSION_PATH}/refresh`,
      {
        schema: {
          tags: ['browser session'],
          summary: 'A new access token for the session in the cookie (its refresh token rotates, as POST /auth/refresh)',
          description: `${COOKIE_DESCRIPTION} No cookie: 204 (nobody is signed in on this browser). A refused cookie: 401, and the cookie is cleared.`,
          response: {
            200: envelope(BrowserSession),
            204: described(Type.Null(), 'No cookie: nobody is signed in on this browser'),
            401: described(
              ErrorEnvelope,
              'The cookie’s session is over (ended, expired, replayed)',
              statusEnvelope(401, INVALID_REFRESH_TOKEN),
            ),
            403: csrfRefused,
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request, reply) =>
        forgettingCookieOnRefusal(reply, async () => {
          const token = readRefreshCookie(request, cookie);
          // Nobody signed in on this browser: an answer, not an error (every page asks as it opens).
          if (!token) return reply.code(204).send(null);
          return answer(reply, await sessions.refresh(token, originOf(request)), 'Token refreshed');
        }),
    );
  });

  // Signed in: a password change (a new session, in the cookie) and the sign-out that clears it.
  await app.register(async (scope: App) => {
    scope.addHook('onRequest', requireCsrfHeader);
    requireAccessToken(scope, access);
    scope.post(
      `${BROWSER_SESSION_PATH}/password`,
      {
        schema: {
          tags: ['browser session'],
          security: BEARER_SECURITY,
          summary: 'Change the password from the web pages: POST /auth/password, with the new session’s refresh token in the cookie',
          description: COOKIE_DESCRIPTION,
          body: PasswordBody,
          response: {
            200: envelope(BrowserSession),
            400: described(ErrorEnvelope, 'The current password is wrong, or the new one breaks a password rule'),
            401: ReauthenticationRequired,
            403: csrfRefused,
            429: described(ErrorEnvelope, 'Too many failed logins for this account or from this client (Retry-After)'),
            503: Errors.unavailable('The password-checking queue is full or the database is unavailable (Retry-After)'),
          },
        },
      },
      async (request, reply) => {
        checkRecentAuthentication(authentications.get(request), stepUp.maxAgeSeconds, stepUp.clock);
        const pair = await accounts.changePassword(callers.get(request), request.body, { ...originOf(request), log: request.log });
        return answer(reply, pair, 'Password changed');
      },
    );

    scope.post(
      `${BROWSER_SESSION_PATH}/logout`,
      {
        schema: {
          tags: ['browser session'],
          security: BEARER_SECURITY,
          summary: 'Sign out from the web pages: the cookie’s session ends (every session with scope "global") and the cookie is cleared',
          description: `Needs the header ${CSRF_HEADER} (any value).`,
          body: LogoutBody,
          response: {
            200: described(Done, 'Logged out', statusEnvelope(200, 'Logged out')),
            401: Errors.noToken,
            403: csrfRefused,
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request, reply) => {
        const caller = callers.get(request);
        if (request.body?.scope === 'global') await sessions.logoutEverywhere(caller.id, originOf(request));
        else {
          const token = readRefreshCookie(request, cookie);
          if (token) await sessions.logout(caller.id, token, originOf(request));
        }
        clearRefreshCookie(reply, cookie);
        return statusEnvelope(200, 'Logged out');
      },
    );
  });
}
