import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { callers } from '../../gateway.js';
import type { EmailFlows } from '../email-flows.js';
import { KEY_SECURITY, UserSchema, authErrorResponses, mailLimited } from '../schemas.js';
import { RedirectQuery } from './mail-fields.js';

// POST /invite: create a user and mail an invitation (secret key).

const InviteBody = Type.Object({
  email: Type.Optional(Type.String()),
  data: Type.Optional(Type.Object({}, { additionalProperties: true })),
});

export function inviteRoutes(scope: App, { flows }: { flows: EmailFlows }): void {
  scope.post(
    '/invite',
    {
      config: { goParams: 'InviteParams' },
      schema: {
        tags: ['admin'],
        summary: 'Invite a user by mail (secret key; supabase-js auth.admin.inviteUserByEmail)',
        description:
          'Creates the user (no password they know) and mails a link of type invite; following it confirms the address and signs in.',
        security: KEY_SECURITY,
        querystring: RedirectQuery,
        body: Type.Optional(InviteBody),
        response: { 200: UserSchema, ...authErrorResponses, 429: mailLimited },
      },
    },
    async (request) => flows.invite(callers.get(request), request.body ?? {}, request.query.redirect_to),
  );
}
