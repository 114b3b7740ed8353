import { Type } from '@sinclair/typebox';
import { badRequest } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { originOf } from '../audit.js';
import { type AccessCheck, callers, requireAccessToken } from '../auth.js';
import type { Sessions } from '../sessions.js';
import { BEARER_SECURITY, BearerHeader, Done, Errors } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';

const LogoutBody = Type.Object(
  {
    refresh_token: Type.Optional(Type.String({ maxLength: 512, description: 'Ends the session of this refresh token' })),
    scope: Type.Optional(Type.Literal('global', { description: 'Ends every session and refuses every access token issued so far' })),
  },
  { additionalProperties: false },
);

const Session = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.String({ format: 'date-time' }),
    ip: Type.String(),
    user_agent: Type.Union([Type.String(), Type.Null()]),
    device: Type.Union([Type.String(), Type.Null()], {
      description: 'The browser and system in words, read from user_agent ("Chrome on Linux"); null when it names no known browser',
    }),
  },
  { additionalProperties: false },
);

const SessionParams = Type.Object({ id: Type.String({ format: 'uuid', description: 'A session id from GET /auth/sessions' }) });

export const LOGOUT_NEEDS_ONE = 'body must have either refresh_token or scope "global"';

/** Logout and the caller's own sessions. */
export async function sessionsRoutes(app: App, { sessions, access }: { sessions: Sessions; access: AccessCheck }): Promise<void> {
  // A valid token (docs/accounts.md, rule 5).
  requireAccessToken(app, access);
  app.post(
    '/auth/logout',
    {
      schema: {
        tags: ['auth'],
        security: BEARER_SECURITY,
        summary: 'End one session (refresh_token) or all of them (scope "global")',
        description:
          `${BearerHeader.description} With refresh_token, that session of the caller ends (a token of no live session of the caller changes nothing); ` +
          'access tokens already issued stay valid until they expire. With scope "global", every session ends and every access token issued so far is refused.',
        body: LogoutBody,
        response: {
          200: described(Done, 'Logged out', statusEnvelope(200, 'Logged out')),
          400: Errors.invalid(LOGOUT_NEEDS_ONE),
          401: Errors.noToken,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const { refresh_token: refreshToken, scope } = request.body;
      if ((refreshToken === undefined) === (scope === undefined)) throw badRequest(LOGOUT_NEEDS_ONE);
      const caller = callers.get(request);
      if (scope === 'global') await sessions.logoutEverywhere(caller.id, originOf(request));
      else await sessions.logout(caller.id, refreshToken!, originOf(request));
      return statusEnvelope(200, 'Logged out');
    },
  );

  app.get(
    '/auth/sessions',
    {
      schema: {
        tags: ['auth'],
        security: BEARER_SECURITY,
        summary: 'The caller’s live sessions, newest first',
        ...BearerHeader,
        response: {
          200: envelope(Type.Array(Session)),
          401: Errors.noToken,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const list = await sessions.list(callers.get(request).id);
      return dataEnvelope(200, 'Sessions retrieved successfully', list);
    },
  );

  app.delete(
    '/auth/sessions/:id',
    {
      schema: {
        tags: ['auth'],
        security: BEARER_SECURITY,
        summary: 'End one of the caller’s own sessions',
        ...BearerHeader,
        params: SessionParams,
        response: {
          200: described(Done, 'The session ended', statusEnvelope(200, 'Session ended')),
          400: Errors.invalid('params/id must match format "uuid"'),
          401: Errors.noToken,
          404: described(ErrorEnvelope, 'No live session of the caller has this id', statusEnvelope(404, 'Session not found')),
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      await sessions.end(callers.get(request).id, request.params.id, originOf(request));
      return statusEnvelope(200, 'Session ended');
    },
  );
}
