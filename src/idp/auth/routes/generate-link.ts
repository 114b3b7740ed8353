import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { described } from '../../../kit/http/openapi.js';
import { callers } from '../../gateway.js';
import type { EmailFlows } from '../email-flows.js';
import { KEY_SECURITY, UserSchema, authErrorResponses } from '../schemas.js';
import { Ignored, RedirectQuery } from './mail-fields.js';

// POST /admin/generate_link: the link and code a mail would carry, not sent (secret key).

const GenerateLinkBody = Type.Object({
  type: Type.Optional(Type.String({ description: 'signup, invite, recovery or magiclink' })),
  email: Type.Optional(Type.String()),
  password: Type.Optional(Type.String({ description: 'signup only' })),
  data: Type.Optional(Type.Object({}, { additionalProperties: true })),
  redirect_to: Type.Optional(Type.String()),
  redirectTo: Ignored,
});

const GeneratedLink = described(
  Type.Intersect([
    UserSchema,
    Type.Object({
      action_link: Type.String(),
      email_otp: Type.String(),
      hashed_token: Type.String(),
      verification_type: Type.String(),
      redirect_to: Type.String(),
    }),
  ]),
  'The user, and the link and code a mail would have carried',
);

export function generateLinkRoutes(scope: App, { flows }: { flows: EmailFlows }): void {
  scope.post(
    '/admin/generate_link',
    {
      config: { goParams: 'GenerateLinkParams' },
      schema: {
        tags: ['admin'],
        summary: 'The link and code of a signup, invite, recovery or magiclink mail, returned and not sent (secret key)',
        security: KEY_SECURITY,
        querystring: RedirectQuery,
        body: Type.Optional(GenerateLinkBody),
        response: { 200: GeneratedLink, ...authErrorResponses },
      },
    },
    async (request) => flows.generateLink(callers.get(request), request.body ?? {}, request.query.redirect_to),
  );
}
