import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { parsePkce } from '../email-flows.js';
import type { AuthRateLimits } from '../rate-limits.js';
import { JsonObject, KEY_SECURITY, TokenResponseSchema, UserSchema, authErrorResponses, rateLimited } from '../schemas.js';
import { SignUp } from '../sign-up.js';

// POST /signup: sign up (a session, or a user awaiting confirmation), or sign in anonymously.
// Rate limited per client address as in GoTrue; the limit is taken before any work for the request.

const SignupBody = Type.Object({
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  password: Type.Optional(Type.String()),
  data: Type.Optional(JsonObject),
  code_challenge: Type.Optional(
    Type.Union([Type.String(), Type.Null()], { description: 'PKCE: the confirmation link then redirects with ?code=' }),
  ),
  code_challenge_method: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 's256 or plain' })),
});

export function signupRoutes(scope: App, { signUp, limits }: { signUp: SignUp; limits: AuthRateLimits }): void {
  scope.post(
    '/signup',
    {
      config: { goParams: 'SignupParams' },
      schema: {
        tags: ['auth'],
        summary: 'Sign up with email and password, or sign in anonymously (no email)',
        description:
          'A session when sign-ups are confirmed at once (IDP_AUTOCONFIRM), otherwise the user awaiting confirmation. Without email and phone: a new anonymous user and its session (IDP_EXTERNAL_ANONYMOUS_USERS_ENABLED). 422 signup_disabled with IDP_DISABLE_SIGNUP.',
        security: KEY_SECURITY,
        querystring: Type.Object({
          redirect_to: Type.Optional(Type.String({ description: 'Where the confirmation link leads (IDP_AUTOCONFIRM off)' })),
        }),
        body: Type.Optional(SignupBody),
        response: { 200: Type.Union([TokenResponseSchema, UserSchema]), ...authErrorResponses, 429: rateLimited },
      },
    },
    async (request) => {
      const body = request.body ?? {};
      // GoTrue's order: an anonymous sign-in is refused when disabled before its own limit is taken.
      if (SignUp.isAnonymousSignUp(body)) {
        signUp.requireAnonymousSignIns();
        await limits.anonymousSignIn(request.ip);
        return signUp.signUpAnonymously(body);
      }
      await limits.signup(request.ip);
      return signUp.signUp(body, request.query.redirect_to, parsePkce(body.code_challenge, body.code_challenge_method));
    },
  );
}
