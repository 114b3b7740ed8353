import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import type { AccountsService } from '../service.js';
import { Errors, FactorChallenge, TokenPair } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import { described } from '../../kit/http/openapi.js';

const LoginBody = Type.Object(
  {
    email: Type.String(),
    password: Type.String(),
  },
  { additionalProperties: false },
);

export async function loginRoute(app: App, { accounts }: { accounts: AccountsService }): Promise<void> {
  app.post(
    '/auth/login',
    {
      schema: {
        tags: ['auth'],
        summary: 'Exchange email and password for an access token and a refresh token (a new session)',
        description:
          'Failed logins are limited to 10 per account and 100 per client IP per 15 minutes (429 with Retry-After). ' +
          '503 with Retry-After when the password-checking queue is full. For an account with a second factor, the answer carries ' +
          'no token but a challenge (`mfa_required: true`) for POST /auth/login/factor.',
        body: LoginBody,
        response: {
          200: envelope(Type.Union([TokenPair, FactorChallenge])),
          400: Errors.invalid("body must have required property 'password'"),
          401: described(ErrorEnvelope, 'No account with this email and password', {
            status: 401,
            response: 'Unauthorized',
            message: 'Invalid email or password',
          }),
          403: Errors.banned,
          429: described(ErrorEnvelope, 'Too many failed logins for this account or from this client (Retry-After)', {
            status: 429,
            response: 'Too Many Requests',
            message: 'Too many failed login attempts, try again in 900 seconds.',
          }),
          503: Errors.unavailable('The password-checking queue is full or the database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const outcome = await accounts.login(request.body, { ...originOf(request), log: request.log });
      if ('mfa_required' in outcome) return dataEnvelope(200, 'Second factor required', outcome);
      return dataEnvelope(200, 'Login successful', outcome);
    },
  );
}
