import { type AccessCheck, callers, requireAccessToken } from '../auth.js';
import type { App } from '../../kit/http/app.js';
import { BEARER_SECURITY, BearerHeader, Errors, PublicUser } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { described } from '../../kit/http/openapi.js';

/** The caller's row was read by requireAccessToken (deleted since: 404 there); no second query. */
export async function meRoute(app: App, { access }: { access: AccessCheck }): Promise<void> {
  // A valid token; a deleted user's is 404 here (docs/accounts.md, rule 5).
  requireAccessToken(app, { ...access, deletedAccount: 'not-found' });
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
          404: described(ErrorEnvelope, 'The token is valid but its account was deleted since', {
            status: 404,
            response: 'Not Found',
            message: 'User not found',
          }),
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      return dataEnvelope(200, 'User profile retrieved successfully', callers.get(request));
    },
  );
}
