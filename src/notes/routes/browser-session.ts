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
import { callers, installBearerAuth } from '../bearer-auth.js';
import type { Identity, LoginSession } from '../identity.js';
import { REFRESH_REFUSED } from '../identity.js';
import { BEARER_SECURITY, CredentialsBody, ErrorMessage, Errors } from '../schemas.js';
import type { TokenVerifier } from '../token-verifier.js';

// The session of the notes web app (backend-for-frontend, docs/notes.md,
// "Sessions in the browser"): sign-in and refresh as POST /auth/login and
// /auth/refresh, but the provider's refresh token travels only in an HttpOnly
// cookie scoped to these routes, never in a body a script could read, so a
// second tab or the app after a browser restart resumes the session.

export const BROWSER_SESSION_PATH = '/auth/browser';
/** How long the browser keeps the cookie; each refresh sets it again, so only an unused session runs out. */
export const BROWSER_SESSION_MAX_AGE_SECONDS = 30 * 86_400;

const BrowserSession = Type.Object({
  access_token: Type.String({ description: 'Kept in the page’s memory' }),
  expires_at: Type.Integer({ description: 'Unix time in seconds when access_token expires' }),
});

const csrfRefused = described(ErrorMessage, `The ${CSRF_HEADER} header is missing: these routes answer the service's own pages only`);
const COOKIE = `The refresh token goes into the cookie notes_refresh (HttpOnly; Secure; SameSite=Strict; Path=${BROWSER_SESSION_PATH}). Needs the header ${CSRF_HEADER} (any value).`;

export async function browserSessionRoutes(
  app: App,
  { identity, verifyToken }: { identity: Identity; verifyToken: TokenVerifier },
): Promise<void> {
  const cookie: RefreshCookie = { name: 'notes_refresh', path: BROWSER_SESSION_PATH, maxAgeSeconds: BROWSER_SESSION_MAX_AGE_SECONDS };

  /** The session's refresh token into the cookie, the rest to the page. */
  function answer(reply: FastifyReply, session: LoginSession) {
    setRefreshCookie(reply, cookie, session.refresh_token);
    return { access_token: session.access_token, expires_at: session.expires_at };
  }

  await app.register(async (scope: App) => {
    scope.addHook('onRequest', requireCsrfHeader);
    scope.post(
      `${BROWSER_SESSION_PATH}/login`,
      {
        attachValidation: true,
        schema: {
          tags: ['browser session'],
          summary: 'Sign in from the web app: POST /auth/login, with the refresh token in a cookie',
          description: COOKIE,
          body: CredentialsBody,
          response: {
            200: BrowserSession,
            400: Errors.invalid('email and password are required'),
            401: described(ErrorMessage, 'No user with this email and password', { message: 'Invalid email or password' }),
            403: csrfRefused,
            429: Errors.rateLimited,
            503: Errors.unavailable,
          },
        },
      },
      async (request, reply) => {
        if (request.validationError) throw new HttpError(400, 'email and password are required');
        return answer(reply, await identity.login(request.body, request.ip));
      },
    );

    scope.post(
      `${BROWSER_SESSION_PATH}/refresh`,
      {
        schema: {
          tags: ['browser session'],
          summary: 'A new access token for the session in the cookie (its refresh token rotates, as POST /auth/refresh)',
          description: `${COOKIE} No cookie: 204 (nobody is signed in on this browser). A refused cookie: 401, and the cookie is cleared.`,
          response: {
            200: BrowserSession,
            204: described(Type.Null(), 'No cookie: nobody is signed in on this browser'),
            401: described(ErrorMessage, 'The provider refused the cookie’s refresh token (revoked, used, unknown)', {
              message: REFRESH_REFUSED,
            }),
            403: csrfRefused,
            429: Errors.rateLimited,
            503: Errors.unavailable,
          },
        },
      },
      async (request, reply) => {
        const token = readRefreshCookie(request, cookie);
        // Nobody signed in on this browser: an answer, not an error (the app asks as it opens).
        if (!token) return reply.code(204).send(null);
        try {
          return answer(reply, await identity.refresh(token, request.ip));
        } catch (err) {
          // Refused for good: the browser forgets it. An outage or a 429 keeps it for another try.
          if (err instanceof HttpError && err.statusCode === 401) clearRefreshCookie(reply, cookie);
          throw err;
        }
      },
    );
  });

  await app.register(async (scope: App) => {
    scope.addHook('onRequest', requireCsrfHeader);
    installBearerAuth(scope, verifyToken);
    scope.post(
      `${BROWSER_SESSION_PATH}/logout`,
      {
        schema: {
          tags: ['browser session'],
          security: BEARER_SECURITY,
          summary: 'Sign out from the web app: the session ends at the identity provider, and the cookie is cleared',
          description: `Needs the header ${CSRF_HEADER} (any value).`,
          response: {
            204: described(Type.Null(), 'Signed out'),
            401: Errors.noToken,
            403: csrfRefused,
            503: Errors.unavailable,
          },
        },
      },
      async (request, reply) => {
        await identity.logout(callers.get(request).accessToken, request.ip);
        clearRefreshCookie(reply, cookie);
        return reply.code(204).send(null);
      },
    );
  });
}
