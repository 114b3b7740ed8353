import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { callers } from '../../gateway.js';
import { USER_SECURITY, authErrorResponses, mailLimited } from '../schemas.js';
import type { UserUpdates } from '../user-update.js';

// GET /reauthenticate: mails the caller the nonce a password change (PUT /user) may need.

export function reauthenticateRoutes(scope: App, { self }: { self: UserUpdates }): void {
  scope.get(
    '/reauthenticate',
    {
      schema: {
        tags: ['auth'],
        summary: 'Mail the caller a six-digit nonce, which PUT /user needs with a password from a session older than a day',
        security: USER_SECURITY,
        response: { 200: Type.Object({}), ...authErrorResponses, 429: mailLimited },
      },
    },
    async (request) => self.reauthenticate(callers.get(request)),
  );
}
