import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import { INVALID_EMAIL_TOKEN, VERIFICATION_REQUESTED, type EmailFlows } from '../email-flows.js';
import { mailRequestErrors } from './password-reset.js';
import { Done, Errors, PublicUser } from './schemas.js';

const TokenBody = Type.Object(
  { token: Type.String({ maxLength: 256, description: 'The token from the verification link’s fragment (#token=…)' }) },
  { additionalProperties: false },
);

const EmailBody = Type.Object(
  { email: Type.String({ description: 'The account’s address (trimmed, any case)' }) },
  { additionalProperties: false },
);

export async function verifyEmailRoutes(app: App, { emails }: { emails: EmailFlows }): Promise<void> {
  app.post(
    '/auth/verify-email',
    {
      schema: {
        tags: ['auth'],
        summary: 'Confirm the account’s address with the token of a verification link',
        description: 'The token works once, for 24 hours. A used, expired or unknown token is 400.',
        body: TokenBody,
        response: {
          200: envelope(PublicUser),
          400: described(ErrorEnvelope, 'The token is used, expired or unknown', statusEnvelope(400, INVALID_EMAIL_TOKEN)),
          503: Errors.unavailable('The database is unavailable'),
        },
      },
    },
    async (request) => {
      const user = await emails.verifyEmail(request.body, { ...originOf(request), log: request.log });
      return dataEnvelope(200, 'Email verified', user);
    },
  );

  app.post(
    '/auth/verify-email/resend',
    {
      // After the answer is sent, known address or not (see EmailFlows.requestMail).
      onResponse: async () => emails.mailQueued(),
      schema: {
        tags: ['auth'],
        summary: 'Mail a new verification link to the address, if it has an unverified account',
        description:
          'Answers 202 with the same body whether the address is unknown, already verified or not. The link, ' +
          '`<ACCOUNTS_PUBLIC_URL>/verify-email#token=…`, works once, for 24 hours. Limits are shared with POST /auth/password-reset: ' +
          'one mail per address per minute, MAIL_REQUESTS_MAX_PER_IP requests per client IP per MAIL_REQUESTS_WINDOW.',
        body: EmailBody,
        response: {
          202: described(
            Done,
            'Accepted; a mail is sent if the address has an unverified account',
            statusEnvelope(202, VERIFICATION_REQUESTED),
          ),
          400: Errors.invalid('body/email must be a valid email address'),
          ...mailRequestErrors,
        },
      },
    },
    async (request, reply) => {
      await emails.resendVerification(request.body, { ...originOf(request), log: request.log });
      return reply.code(202).send(statusEnvelope(202, VERIFICATION_REQUESTED));
    },
  );
}
