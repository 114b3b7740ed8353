import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import { INVALID_EMAIL_TOKEN, MAIL_NOT_CONFIGURED, RESET_REQUESTED, type EmailFlows } from '../email-flows.js';
import { Done, Errors } from './schemas.js';

const EmailBody = Type.Object(
  { email: Type.String({ description: 'The account’s address (trimmed, any case)' }) },
  { additionalProperties: false },
);

const TokenBody = Type.Object(
  { token: Type.String({ maxLength: 256, description: 'The token from the reset link’s fragment (#token=…)' }) },
  { additionalProperties: false },
);

const ConfirmBody = Type.Object(
  {
    token: Type.String({ maxLength: 256, description: 'The token from the reset link’s fragment (#token=…)' }),
    new_password: Type.String({ description: '8 to 72 characters and at most 72 bytes in UTF-8' }),
  },
  { additionalProperties: false },
);

/** The answers shared by the routes that send a mail (also POST /auth/verify-email/resend). */
export const mailRequestErrors = {
  429: described(
    ErrorEnvelope,
    'Too many reset or verification requests from this client (Retry-After)',
    statusEnvelope(429, 'Too many requests from this address, try again in 3600 seconds.'),
  ),
  503: described(
    ErrorEnvelope,
    'SMTP_URL is not set on this server, or the database is unavailable',
    statusEnvelope(503, MAIL_NOT_CONFIGURED),
  ),
};

export async function passwordResetRoutes(app: App, { emails }: { emails: EmailFlows }): Promise<void> {
  app.post(
    '/auth/password-reset',
    {
      // After the answer is sent, known address or not (see EmailFlows.requestMail).
      onResponse: async () => emails.mailQueued(),
      schema: {
        tags: ['auth'],
        summary: 'Mail a password reset link to the address, if it has an account',
        description:
          'Answers 202 with the same body whether or not the address has an account. The link, ' +
          '`<ACCOUNTS_PUBLIC_URL>/reset-password#token=…`, works once, for 30 minutes. At most one mail per address per minute ' +
          '(further requests are answered the same and send nothing); MAIL_REQUESTS_MAX_PER_IP requests per client IP per MAIL_REQUESTS_WINDOW.',
        body: EmailBody,
        response: {
          202: described(Done, 'Accepted; a mail is sent if the address has an account', statusEnvelope(202, RESET_REQUESTED)),
          400: Errors.invalid('body/email must be a valid email address'),
          ...mailRequestErrors,
        },
      },
    },
    async (request, reply) => {
      await emails.requestPasswordReset(request.body, { ...originOf(request), log: request.log });
      return reply.code(202).send(statusEnvelope(202, RESET_REQUESTED));
    },
  );

  app.post(
    '/auth/password-reset/check',
    {
      schema: {
        tags: ['auth'],
        summary: 'Whether the token of a reset link still works, without using it up',
        description:
          'The reset page asks this as it opens, so a used or expired link is told before a new password is typed. ' +
          'Answers the account’s address (the holder of the link can reset its password anyway).',
        body: TokenBody,
        response: {
          200: described(envelope(Type.Object({ email: Type.String({ format: 'email' }) })), 'The link works; its account’s address'),
          400: described(ErrorEnvelope, 'The token is used, expired or unknown', statusEnvelope(400, INVALID_EMAIL_TOKEN)),
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => dataEnvelope(200, 'Reset link is valid', await emails.checkPasswordReset(request.body)),
  );

  app.post(
    '/auth/password-reset/confirm',
    {
      schema: {
        tags: ['auth'],
        summary: 'Set a new password with the token of a reset link; every session ends',
        description:
          'The new password follows the registration rules. Success ends every session of the account and refuses every access ' +
          'token issued before, retires the account’s other reset links, and marks the address verified. A used, expired or unknown token is 400.',
        body: ConfirmBody,
        response: {
          200: described(Done, 'The password is changed; sign in with it', statusEnvelope(200, 'Password has been reset')),
          400: described(
            ErrorEnvelope,
            'The token is used, expired or unknown, or the new password breaks a rule',
            statusEnvelope(400, INVALID_EMAIL_TOKEN),
          ),
          503: Errors.unavailable('The password-hashing queue is full or the database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      await emails.confirmPasswordReset(request.body, { ...originOf(request), log: request.log });
      return statusEnvelope(200, 'Password has been reset');
    },
  );
}
