import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { originOf } from '../audit.js';
import { type AccessCheck, type StepUp, callers, requireAccessToken, requireRecentAuthentication } from '../auth.js';
import type { AccountsService } from '../service.js';
import { BEARER_SECURITY, BearerHeader, Errors, ReauthenticationRequired, STEP_UP_NOTE, TokenPair } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';

const PasswordBody = Type.Object(
  {
    current_password: Type.String({ maxLength: 1024 }),
    new_password: Type.String({ description: '8 to 72 characters and at most 72 bytes in UTF-8' }),
  },
  { additionalProperties: false },
);

export async function passwordRoute(
  app: App,
  { accounts, access, stepUp }: { accounts: AccountsService; access: AccessCheck; stepUp: StepUp },
): Promise<void> {
  // A valid token (docs/accounts.md, rule 5), from a recent sign-in: a stolen token alone cannot lock the owner out.
  requireAccessToken(app, access);
  requireRecentAuthentication(app, stepUp);
  app.post(
    '/auth/password',
    {
      schema: {
        tags: ['auth'],
        security: BEARER_SECURITY,
        summary: 'Change the caller’s password; every session ends and a new pair is returned',
        description:
          `${BearerHeader.description} A wrong current password counts as a failed login for the account ` +
          '(10 per 15 minutes, then 429 with Retry-After). Success ends every session, refuses every access token issued before, ' +
          `and answers with a new session’s pair. ${STEP_UP_NOTE}`,
        body: PasswordBody,
        response: {
          200: envelope(TokenPair),
          400: described(
            ErrorEnvelope,
            'The current password is wrong, or the new one breaks a password rule',
            statusEnvelope(400, 'Current password is incorrect'),
          ),
          401: ReauthenticationRequired,
          429: described(
            ErrorEnvelope,
            'Too many failed logins for this account or from this client (Retry-After)',
            statusEnvelope(429, 'Too many failed login attempts, try again in 900 seconds.'),
          ),
          503: Errors.unavailable('The password-checking queue is full or the database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const pair = await accounts.changePassword(callers.get(request), request.body, { ...originOf(request), log: request.log });
      return dataEnvelope(200, 'Password changed', pair);
    },
  );
}
