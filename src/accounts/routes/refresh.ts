import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { originOf } from '../audit.js';
import type { Sessions } from '../sessions.js';
import { Errors, TokenPair } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';

const RefreshBody = Type.Object(
  { refresh_token: Type.String({ maxLength: 512, description: 'The refresh token from login or the last refresh' }) },
  { additionalProperties: false },
);

export async function refreshRoute(app: App, { sessions }: { sessions: Sessions }): Promise<void> {
  app.post(
    '/auth/refresh',
    {
      schema: {
        tags: ['auth'],
        summary: 'Exchange a refresh token for a new access token and a new refresh token',
        description:
          'Each refresh token works once. The token just replaced, presented again within REFRESH_REUSE_INTERVAL (10 s), ' +
          'gets the session’s current pair (tabs refreshing at once); presented later, it ends the session.',
        body: RefreshBody,
        response: {
          200: envelope(TokenPair),
          400: Errors.invalid("body must have required property 'refresh_token'"),
          401: described(
            ErrorEnvelope,
            'Unknown, used, ended or expired refresh token',
            statusEnvelope(401, 'Invalid or expired refresh token.'),
          ),
          403: Errors.banned,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const pair = await sessions.refresh(request.body.refresh_token, originOf(request));
      return dataEnvelope(200, 'Token refreshed', pair);
    },
  );
}
