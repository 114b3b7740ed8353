import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import { EMAIL_SIGNIN_REQUESTED, type EmailSignin, INVALID_EMAIL_SIGNIN } from '../email-signin.js';
import { mailRequestErrors } from './password-reset.js';
import { Done, Errors, FactorChallenge, TokenPair } from './schemas.js';

const RequestBody = Type.Object(
  { email: Type.String({ description: 'The account’s address (trimmed, any case)' }) },
  { additionalProperties: false },
);

const VerifyBody = Type.Object(
  {
    email: Type.Optional(Type.String({ maxLength: 320, description: 'With code: the address the mail was sent to' })),
    code: Type.Optional(Type.String({ maxLength: 32, description: 'With email: the 6 digits from the mail' })),
    token: Type.Optional(Type.String({ maxLength: 256, description: 'Alone: the token of the mail’s link (#token=…)' })),
  },
  { additionalProperties: false },
);

/**
 * Whether sign-in by mail is on: registered whatever EMAIL_SIGNIN says, so the sign-in page can
 * ask without a 404 in its console when it is off.
 */
export async function emailSigninStatusRoute(app: App, { enabled }: { enabled: boolean }): Promise<void> {
  app.get(
    '/auth/email-signin',
    {
      schema: {
        tags: ['auth'],
        summary: 'Whether sign-in by mail is on (EMAIL_SIGNIN)',
        response: { 200: envelope(Type.Object({ enabled: Type.Boolean() })) },
      },
    },
    async () => dataEnvelope(200, enabled ? 'Sign-in by mail is on' : 'Sign-in by mail is off', { enabled }),
  );
}

/** Sign-in by mail; registered only when EMAIL_SIGNIN is on (off, these paths are 404 like any unknown path). */
export async function emailSigninRoutes(app: App, { signin }: { signin: EmailSignin }): Promise<void> {
  app.post(
    '/auth/email-signin',
    {
      // After the answer is sent, known address or not (as for password reset).
      onResponse: async () => signin.mailQueued(),
      schema: {
        tags: ['auth'],
        summary: 'Mail a sign-in link and a 6-digit code to the address, if it has an account',
        description:
          'Answers 200 with the same body whether or not the address has an account. The link, ' +
          '`<ACCOUNTS_PUBLIC_URL>/email-signin#token=…`, and the code work once, for 10 minutes; a new request voids the previous mail. ' +
          'At most one mail per address per minute (shared with password reset and verification); MAIL_REQUESTS_MAX_PER_IP per client IP per MAIL_REQUESTS_WINDOW.',
        body: RequestBody,
        response: {
          200: described(Done, 'A mail is sent if the address has an account', statusEnvelope(200, EMAIL_SIGNIN_REQUESTED)),
          400: Errors.invalid('body/email must be a valid email address'),
          ...mailRequestErrors,
        },
      },
    },
    async (request) => {
      await signin.request(request.body, { ...originOf(request), log: request.log });
      return statusEnvelope(200, EMAIL_SIGNIN_REQUESTED);
    },
  );

  app.post(
    '/auth/email-signin/verify',
    {
      onResponse: async () => signin.mailQueued(),
      schema: {
        tags: ['auth'],
        summary: 'Sign in with the code (and address) or the link token of a sign-in mail',
        description:
          'Answers what POST /auth/login answers: the token pair (amr ["otp"]), or for an account with a second factor the challenge ' +
          'for POST /auth/login/factor. A wrong code counts as a failed login (429 past the login limits) and on the mail: after 5 wrong ' +
          'codes its code and link are void. A used, expired, voided or wrong code or token is 401.',
        body: VerifyBody,
        response: {
          200: envelope(Type.Union([TokenPair, FactorChallenge])),
          400: Errors.invalid('Give either email and code, or token'),
          401: described(ErrorEnvelope, 'Wrong, used, expired or voided code or link', statusEnvelope(401, INVALID_EMAIL_SIGNIN)),
          403: Errors.banned,
          429: described(ErrorEnvelope, 'Too many failed logins for this account or from this client (Retry-After)', {
            status: 429,
            response: 'Too Many Requests',
            message: 'Too many failed login attempts, try again in 900 seconds.',
          }),
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const outcome = await signin.verify(request.body, { ...originOf(request), log: request.log });
      if ('mfa_required' in outcome) return dataEnvelope(200, 'Second factor required', outcome);
      return dataEnvelope(200, 'Login successful', outcome);
    },
  );
}
