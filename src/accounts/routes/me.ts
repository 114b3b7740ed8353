import { callerOf } from '../auth.js';
import type { App } from '../../kit/http.js';
import type { AccountsService } from '../service.js';
import { BEARER_SECURITY, BearerHeader, ErrorEnvelope, Errors, PublicUser, envelope } from './schemas.js';
import { described } from '../../kit/openapi.js';

export function meRoute(app: App, accounts: AccountsService): void {
  app.get(
    '/auth/me',
    {
      schema: {
        tags: ['auth'],
        security: BEARER_SECURITY,
        summary: 'The caller’s own account',
        ...BearerHeader,
        response: {
          200: envelope(PublicUser),
          401: Errors.noToken,
          404: described(ErrorEnvelope, 'The token is valid but its account was deleted since', { status: 404, response: 'Not Found', message: 'User not found' }),
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const user = await accounts.profile(callerOf(request).id);
      return { status: 200, response: 'OK', message: 'User profile retrieved successfully', data: user };
    },
  );
}
