import { Type } from '@sinclair/typebox';
import { HttpError } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import type { Identity } from '../identity.js';
import { EMAIL_INVALID, LINK_REFUSED, PASSWORD_TOO_WEAK, REFRESH_REFUSED } from '../identity.js';
import {
  BEARER_SECURITY,
  CredentialsBody,
  ErrorMessage,
  Errors,
  LinkSession,
  LoginSession,
  NewPassword,
  PasswordResetRequest,
  RefreshRequest,
  RegisteredUser,
  VerifyLinkRequest,
} from '../schemas.js';
import { callers, installBearerAuth } from '../bearer-auth.js';
import type { TokenVerifier } from '../token-verifier.js';
import { described } from '../../kit/http/openapi.js';

// Public routes: sign-up and login, forwarded to the identity provider with the caller's address
// (request.ip, which believes X-Forwarded-For only from TRUST_PROXY), so that the provider's
// per-address limits count each end user rather than this service.

// The spec fixes one message for a missing email or password; the schema decides
// what "missing" is (absent, empty or not a string) and this turns its verdict into that text.
const credentialsRequired = () => new HttpError(400, 'email and password are required');

export async function authRoutes(app: App, { identity, publicUrl }: { identity: Identity; publicUrl: string }): Promise<void> {
  // The page the recovery link leads to, with the session in its fragment.
  const resetPage = `${publicUrl.replace(/\/+$/, '')}/reset-password`;
  // The page a sign-up's confirmation mail leads to, when the provider confirms addresses by mail.
  const confirmPage = `${publicUrl.replace(/\/+$/, '')}/confirm`;
  app.post(
    '/register',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        summary: 'Create a user at the identity provider',
        body: CredentialsBody,
        response: {
          201: RegisteredUser,
          400: Errors.invalid('email and password are required'),
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request, reply) => {
      if (request.validationError) throw credentialsRequired();
      return reply.code(201).send(await identity.register(request.body, request.ip, confirmPage));
    },
  );

  app.post(
    '/login',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        summary: 'Exchange email and password for a session',
        body: CredentialsBody,
        response: {
          200: LoginSession,
          400: Errors.invalid('email and password are required'),
          401: described(ErrorMessage, 'No user with this email and password', { message: 'Invalid login credentials' }),
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request) => {
      if (request.validationError) throw credentialsRequired();
      return identity.login(request.body, request.ip);
    },
  );

  app.post(
    '/password-reset',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        summary: 'Mail a password recovery link to the address (202 whether or not it belongs to anyone)',
        description:
          'The identity provider mails a link to <NOTES_PUBLIC_URL>/reset-password with the session in the URL fragment (#access_token=…&type=recovery); ' +
          "that page sets the new password with POST /auth/password. A second request for one address within the provider's mail interval answers 202 and sends nothing.",
        body: PasswordResetRequest,
        response: {
          202: described(Type.Object({ message: Type.String() }), 'Accepted: a mail goes out if the address belongs to a user', {
            message: 'If this address belongs to an account, a password reset link is on its way',
          }),
          400: Errors.invalid(EMAIL_INVALID),
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request, reply) => {
      if (request.validationError) throw new HttpError(400, EMAIL_INVALID);
      await identity.requestPasswordReset(request.body.email, resetPage, request.ip);
      return reply.code(202).send({ message: 'If this address belongs to an account, a password reset link is on its way' });
    },
  );

  app.post(
    '/verify',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        summary: "Use a mailed link's token when the person confirms: a session for its one step",
        description:
          'The pages a mailed link opens (/reset-password, /confirm) show a button and send the token hash here only when it is pressed, so a ' +
          "mail scanner that opens the link spends nothing. The provider's refresh token stays here: the session serves the page's one step " +
          '(POST /auth/password, then POST /auth/logout).',
        body: VerifyLinkRequest,
        response: {
          200: LinkSession,
          400: Errors.invalid('token_hash and type (recovery or signup) are required'),
          401: described(ErrorMessage, 'The link was used, has expired, was replaced by a newer one, or never existed', {
            message: LINK_REFUSED,
          }),
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request) => {
      if (request.validationError) throw new HttpError(400, 'token_hash and type (recovery or signup) are required');
      const session = await identity.verifyLink(request.body.token_hash, request.body.type, request.ip);
      return { access_token: session.access_token, expires_at: session.expires_at };
    },
  );

  app.post(
    '/refresh',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        summary: 'Exchange a refresh token for a new session (the refresh token is rotated)',
        body: RefreshRequest,
        response: {
          200: LoginSession,
          400: Errors.invalid('refresh_token is required'),
          401: described(ErrorMessage, 'The provider refused the refresh token (unknown, revoked or already used)', {
            message: REFRESH_REFUSED,
          }),
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request) => {
      if (request.validationError) throw new HttpError(400, 'refresh_token is required');
      return identity.refresh(request.body.refresh_token, request.ip);
    },
  );
}

/** Routes of /auth that act for a signed-in caller: the plugin installs the bearer check itself. */
export async function sessionRoutes(
  app: App,
  { identity, verifyToken }: { identity: Identity; verifyToken: TokenVerifier },
): Promise<void> {
  installBearerAuth(app, verifyToken);
  app.post(
    '/logout',
    {
      schema: {
        tags: ['auth'],
        security: BEARER_SECURITY,
        summary: "End the caller's session at the identity provider",
        description:
          'The access token stops working at once in IDP_VERIFY=remote (at its expiry in local); its refresh token stops working.',
        response: {
          204: described(Type.Null(), 'Signed out'),
          401: Errors.noToken,
          503: Errors.unavailable,
        },
      },
    },
    async (request, reply) => {
      await identity.logout(callers.get(request).accessToken, request.ip);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/password',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        security: BEARER_SECURITY,
        summary: "Set a new password for the caller (the recovery link's session, or any signed-in user)",
        description: "The caller's other sessions end; this one stays.",
        body: NewPassword,
        response: {
          204: described(Type.Null(), 'Password changed'),
          400: described(ErrorMessage, 'No password, or one the identity provider refuses (too weak, the current one again, too long)', {
            message: PASSWORD_TOO_WEAK,
          }),
          401: Errors.noToken,
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request, reply) => {
      if (request.validationError) throw new HttpError(400, 'password is required');
      await identity.setPassword(callers.get(request).accessToken, request.body.password, request.ip);
      return reply.code(204).send(null);
    },
  );
}
