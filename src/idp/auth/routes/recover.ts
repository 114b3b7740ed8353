import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { type EmailFlows, parsePkce } from '../email-flows.js';
import type { AuthRateLimits } from '../rate-limits.js';
import { KEY_SECURITY, authErrorResponses, mailLimited } from '../schemas.js';
import { Accepted, Ignored, PkceFields, RedirectQuery } from './mail-fields.js';

// POST /recover: a recovery mail (supabase-js resetPasswordForEmail).

const RecoverBody = Type.Object({
  email: Type.Optional(Type.String()),
  ...PkceFields,
  gotrue_meta_security: Ignored,
});

export function recoverRoutes(scope: App, { flows, limits }: { flows: EmailFlows; limits: AuthRateLimits }): void {
  scope.post(
    '/recover',
    {
      config: { goParams: 'RecoverParams' },
      schema: {
        tags: ['auth'],
        summary: 'Send a password recovery mail (supabase-js resetPasswordForEmail)',
        description:
          'The link signs the user in and leads to redirect_to with type=recovery; the app then sets the new password with PUT /user.',
        security: KEY_SECURITY,
        querystring: RedirectQuery,
        body: Type.Optional(RecoverBody),
        response: { 200: Accepted, ...authErrorResponses, 429: mailLimited },
      },
    },
    async (request) => {
      await limits.signup(request.ip);
      const body = request.body ?? {};
      return flows.recover(body.email, request.query.redirect_to, parsePkce(body.code_challenge, body.code_challenge_method));
    },
  );
}
