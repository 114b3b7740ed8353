import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { KEY_SECURITY, authErrorResponses } from '../schemas.js';
import type { SignUp } from '../sign-up.js';

// GET /settings: the sign-up settings (providers, disable_signup), as GoTrue's.

export function settingsRoutes(scope: App, { signUp }: { signUp: SignUp }): void {
  scope.get(
    '/settings',
    {
      schema: {
        tags: ['auth'],
        summary: "The server's sign-up settings (GoTrue's GET /settings): providers, disable_signup, mailer_autoconfirm",
        security: KEY_SECURITY,
        response: {
          200: Type.Object(
            {
              external: Type.Record(Type.String(), Type.Boolean()),
              disable_signup: Type.Boolean(),
              mailer_autoconfirm: Type.Boolean(),
              phone_autoconfirm: Type.Boolean(),
              sms_provider: Type.String(),
              saml_enabled: Type.Boolean(),
              saml_private_key_next_configured: Type.Boolean(),
              passkeys_enabled: Type.Boolean(),
            },
            { additionalProperties: false },
          ),
          ...authErrorResponses,
        },
      },
    },
    async () => signUp.publicSettings(),
  );
}
