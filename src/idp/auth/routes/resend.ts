import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import type { EmailFlows } from '../email-flows.js';
import type { AuthRateLimits } from '../rate-limits.js';
import { KEY_SECURITY, authErrorResponses, mailLimited } from '../schemas.js';
import { Accepted, Ignored, RedirectQuery } from './mail-fields.js';

// POST /resend: the sign-up confirmation mail again (supabase-js resend).

const ResendBody = Type.Object({
  type: Type.Optional(Type.String({ description: 'signup (email_change has nothing pending here)' })),
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  gotrue_meta_security: Ignored,
});

export function resendRoutes(scope: App, { flows, limits }: { flows: EmailFlows; limits: AuthRateLimits }): void {
  scope.post(
    '/resend',
    {
      config: { goParams: 'ResendConfirmationParams' },
      schema: {
        tags: ['auth'],
        summary: 'Send the sign-up confirmation mail again (supabase-js resend)',
        security: KEY_SECURITY,
        querystring: RedirectQuery,
        body: Type.Optional(ResendBody),
        response: { 200: Accepted, ...authErrorResponses, 429: mailLimited },
      },
    },
    async (request) => {
      await limits.signup(request.ip);
      return flows.resend(request.body ?? {}, request.query.redirect_to);
    },
  );
}
