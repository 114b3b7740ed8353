import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { described } from '../../../kit/http/openapi.js';
import { type EmailFlows, parsePkce } from '../email-flows.js';
import type { AuthRateLimits } from '../rate-limits.js';
import { KEY_SECURITY, authErrorResponses, mailLimited } from '../schemas.js';
import { Ignored, PkceFields, RedirectQuery } from './mail-fields.js';

// POST /otp: a magic link and code, creating the user if asked (supabase-js signInWithOtp).

const OtpBody = Type.Object({
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String({ description: 'Refused: no phone sign-ins' })),
  create_user: Type.Optional(Type.Boolean({ description: 'Create a user for an unknown address (default true)' })),
  data: Type.Optional(Type.Object({}, { additionalProperties: true, description: "A new user's user_metadata" })),
  channel: Type.Optional(Type.String()),
  ...PkceFields,
  gotrue_meta_security: Ignored,
});

export function otpRoutes(scope: App, { flows, limits }: { flows: EmailFlows; limits: AuthRateLimits }): void {
  scope.post(
    '/otp',
    {
      config: { goParams: 'OtpParams' },
      schema: {
        tags: ['auth'],
        summary: 'Mail a magic link and six-digit code (supabase-js signInWithOtp)',
        description:
          'A confirmed user gets a magic link; an unknown address becomes a user (unless create_user is false: 422 otp_disabled) and gets the sign-up confirmation, or a magic link with IDP_AUTOCONFIRM. 422 signup_disabled when a user would be created with IDP_DISABLE_SIGNUP.',
        security: KEY_SECURITY,
        querystring: RedirectQuery,
        body: Type.Optional(OtpBody),
        response: { 200: described(Type.Object({}), 'The mail is on its way'), ...authErrorResponses, 429: mailLimited },
      },
    },
    async (request) => {
      await limits.signup(request.ip);
      const body = request.body ?? {};
      return flows.signInWithOtp(body, request.query.redirect_to, parsePkce(body.code_challenge, body.code_challenge_method));
    },
  );
}
