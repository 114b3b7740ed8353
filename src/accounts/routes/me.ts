import { callerOf } from '../auth.js';
import type { App } from '../../kit/http.js';
import type { AccountsService } from '../service.js';
import { BearerHeader, ErrorEnvelope, PublicUser, envelope } from './schemas.js';

export function meRoute(app: App, accounts: AccountsService): void {
  app.get(
    '/auth/me',
    {
      schema: {
        tags: ['auth'],
        summary: 'The caller’s own account',
        ...BearerHeader,
        response: { 200: envelope(PublicUser), 401: ErrorEnvelope, 404: ErrorEnvelope },
      },
    },
    async (request) => {
      const user = await accounts.profile(callerOf(request).id);
      return { status: 200, response: 'OK', message: 'User profile retrieved successfully', data: user };
    },
  );
}
