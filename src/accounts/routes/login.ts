import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http.js';
import type { AccountsService } from '../service.js';
import { ErrorEnvelope, PublicUser, envelope } from './schemas.js';

const LoginBody = Type.Object(
  {
    email: Type.String(),
    password: Type.String(),
  },
  { additionalProperties: false },
);

export function loginRoute(app: App, accounts: AccountsService): void {
  app.post(
    '/auth/login',
    {
      schema: {
        tags: ['auth'],
        summary: 'Exchange email and password for an access token',
        description:
          'Failed logins are limited to 10 per account and 100 per client IP per 15 minutes (429 with Retry-After). ' +
          '503 with Retry-After when the password-checking queue is full.',
        body: LoginBody,
        response: {
          200: envelope(Type.Object({ token: Type.String(), user: PublicUser })),
          400: ErrorEnvelope,
          401: ErrorEnvelope,
          429: ErrorEnvelope,
          503: ErrorEnvelope,
        },
      },
    },
    async (request) => {
      const { token, user } = await accounts.login(request.body, { ip: request.ip, log: request.log });
      return { status: 200, response: 'OK', message: 'Login successful', data: { token, user } };
    },
  );
}
