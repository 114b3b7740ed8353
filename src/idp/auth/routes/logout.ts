import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { described } from '../../../kit/http/openapi.js';
import { callers } from '../../gateway.js';
import { USER_SECURITY, authErrorResponses } from '../schemas.js';
import type { Authentication } from '../authentication.js';
import type { Sessions } from '../sessions.js';

// POST /logout?scope=global|local|others: end the caller's sessions.

export function logoutRoutes(scope: App, { authentication, sessions }: { authentication: Authentication; sessions: Sessions }): void {
  scope.post(
    '/logout',
    {
      schema: {
        tags: ['auth'],
        summary: 'End the sessions of the caller (global: all, local: this one, others: all but this one)',
        security: USER_SECURITY,
        querystring: Type.Object({
          scope: Type.Optional(Type.Union([Type.Literal('global'), Type.Literal('local'), Type.Literal('others')])),
        }),
        // No body: supabase-js sends an empty one.
        response: { 204: described(Type.Null(), 'Sessions ended'), ...authErrorResponses },
      },
    },
    async (request, reply) => {
      const caller = await authentication.authenticate(callers.get(request));
      await sessions.signOut(caller, request.query.scope ?? 'global');
      return reply.code(204).send(null);
    },
  );
}
