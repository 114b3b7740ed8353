import { Type } from '@sinclair/typebox';
import type { FastifyError, FastifyRequest } from 'fastify';
import type { App } from '../../kit/http/app.js';
import { callers, type GatewayKeys, gatewayHook } from '../gateway.js';
import { InvalidJsonBody } from '../../kit/http/json-body.js';
import { acceptJsonBodies } from '../../kit/http/json-body-parser.js';
import { AuthError, OAuthError, authErrors, bodyTypeError, sendAuthError, unexpectedAuthError } from './errors.js';
import type { AuthRateLimits } from './rate-limits.js';
import {
  AdminUserBody,
  JsonObject,
  KEY_SECURITY,
  TokenResponseSchema,
  USER_SECURITY,
  UserSchema,
  authErrorResponses,
  rateLimited,
} from './schemas.js';
import { described } from '../../kit/http/openapi.js';
import { AuthService } from './service.js';
import type { AdminUsers } from './admin-users.js';
import type { UserUpdates } from './user-update.js';
import { userRoutes } from './routes-users.js';
import { emailRoutes } from './routes-email.js';
import { mfaRoutes } from './routes-mfa.js';
import type { Mfa } from './mfa.js';
import type { MfaLimits } from './mfa-limits.js';
import { type EmailFlows, parsePkce } from './email-flows.js';
import type { SigningKeys } from '../keys.js';

// The Supabase Auth (GoTrue) subset, mounted at /auth/v1 behind the gateway. The whole route map:
//   POST   /signup                           sign up (session, or user awaiting confirmation)
//   POST   /token?grant_type=password        sign in
//   POST   /token?grant_type=refresh_token   rotate the refresh token
//   POST   /token?grant_type=pkce            exchange a PKCE link's auth code (email-flows.ts)
//   GET    /settings                         the sign-up settings (providers, disable_signup)
//   GET    /user                             the caller's user
//   POST   /logout?scope=global|local|others end sessions
//   POST   /admin/users                      create a user (service_role)
//   DELETE /admin/users/:id                  delete a user (service_role)
//   GET    /admin/users, GET|PUT /admin/users/:id, PUT /user: userRoutes (routes-users.ts)
//   POST   /recover, /resend, /otp, /verify, /invite, /admin/generate_link, GET /verify: emailRoutes (routes-email.ts)
//   POST /factors, POST /factors/:id/challenge|verify, DELETE /factors/:id, GET /admin/users/:id/factors,
//   DELETE /admin/users/:id/factors/:factorId: mfaRoutes (routes-mfa.ts)
// (GET /.well-known/jwks.json is public: jwksRoute, registered outside the gateway.)
// /signup and /token are rate limited per client address as in GoTrue, and password sign-ins per
// account as well (see rate-limits.ts); the limit is taken before any work for the request.

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

const TokenBody = Type.Object({
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  password: Type.Optional(Type.String()),
  refresh_token: Type.Optional(Type.String()),
  auth_code: Type.Optional(Type.String({ description: 'grant_type=pkce: the code of the PKCE redirect' })),
  code_verifier: Type.Optional(Type.String({ description: 'grant_type=pkce: the verifier of the challenge sent with the request' })),
});

/** GoTrue's name for the body of each route (its Go struct), which its decoding errors mention. */
function goParamsOf(request: FastifyRequest): string {
  const route = `${request.method} ${request.routeOptions.url ?? ''}`;
  if (route === 'POST /auth/v1/token') {
    const grant = (request.query as { grant_type?: string }).grant_type;
    if (grant === 'pkce') return 'PKCEGrantParams';
    return grant === 'refresh_token' ? 'RefreshTokenGrantParams' : 'PasswordGrantParams';
  }
  if (route === 'POST /auth/v1/signup') return 'SignupParams';
  if (route === 'POST /auth/v1/admin/users') return 'AdminUserParams';
  if (route === 'DELETE /auth/v1/admin/users/:id') return 'adminUserDeleteParams';
  if (route === 'PUT /auth/v1/admin/users/:id') return 'AdminUserParams';
  if (route === 'PUT /auth/v1/user') return 'UserUpdateParams';
  if (route === 'POST /auth/v1/recover') return 'RecoverParams';
  if (route === 'POST /auth/v1/resend') return 'ResendConfirmationParams';
  if (route === 'POST /auth/v1/otp') return 'OtpParams';
  if (route === 'POST /auth/v1/verify') return 'VerifyParams';
  if (route === 'POST /auth/v1/admin/generate_link') return 'GenerateLinkParams';
  if (route === 'POST /auth/v1/invite') return 'InviteParams';
  if (route === 'POST /auth/v1/factors') return 'EnrollFactorParams';
  if (route === 'POST /auth/v1/factors/:id/challenge') return 'ChallengeFactorParams';
  if (route === 'POST /auth/v1/factors/:id/verify') return 'VerifyFactorParams';
  return 'Params';
}

export async function authRoutes(
  scope: App,
  opts: {
    gateway: GatewayKeys;
    auth: AuthService;
    limits: AuthRateLimits;
    users: { admin: AdminUsers; self: UserUpdates };
    emailFlows: EmailFlows;
    mfa: { mfa: Mfa; limits: MfaLimits };
  },
): Promise<void> {
  const { auth, limits } = opts;
  // The mail's link is opened by a browser, which has no key: Supabase's gateway leaves GET /verify
  // open too. It needs none, since the token in the link is the credential.
  const gateway = gatewayHook(opts.gateway);
  scope.addHook('onRequest', async (request, reply) => {
    if (request.method === 'GET' && request.routeOptions.url === '/auth/v1/verify') return;
    return gateway(request, reply);
  });
  acceptJsonBodies(scope, 'empty-object');
  // Every auth body is optional (GoTrue reads an absent body as an empty one), but Fastify validates
  // an absent body against the schema as `undefined`: a DELETE /admin/users/:id sent without a body
  // was a 400 bad_json, answered before the admin check. Absent is empty, whatever the content type.
  scope.addHook('preValidation', async (request) => {
    if (request.body === undefined) request.body = {};
  });

  scope.setErrorHandler((err: FastifyError | Error, request, reply) => {
    if (err instanceof AuthError || err instanceof OAuthError) return sendAuthError(request, reply, err);
    const fe = err as FastifyError;
    if (err instanceof InvalidJsonBody) return sendAuthError(request, reply, authErrors.badJson(err.message));
    // A body field of the wrong JSON type is a decoding error in GoTrue; a bad query value a validation one.
    if (fe.validation) {
      const problem =
        fe.validationContext === 'body' && fe.validation[0]
          ? bodyTypeError(goParamsOf(request), request.body, fe.validation[0])
          : authErrors.validation(fe.message);
      return sendAuthError(request, reply, problem);
    }
    return sendAuthError(request, reply, unexpectedAuthError(request, err));
  });

  scope.post(
    '/signup',
    {
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
      if (AuthService.isAnonymousSignUp(body)) {
        auth.requireAnonymousSignIns();
        await limits.anonymousSignIn(request.ip);
        return auth.signUpAnonymously(body);
      }
      await limits.signup(request.ip);
      return auth.signUp(body, request.query.redirect_to, parsePkce(body.code_challenge, body.code_challenge_method));
    },
  );

  scope.post(
    '/token',
    {
      schema: {
        tags: ['auth'],
        summary: 'Sign in (grant_type=password), refresh (grant_type=refresh_token) or exchange a PKCE auth code (grant_type=pkce)',
        security: KEY_SECURITY,
        querystring: Type.Object({
          grant_type: Type.Optional(Type.String({ description: 'password, refresh_token or pkce; anything else is a 400' })),
        }),
        body: Type.Optional(TokenBody),
        response: { 200: TokenResponseSchema, ...authErrorResponses, 429: rateLimited },
      },
    },
    async (request) => {
      const body = request.body ?? {};
      switch (request.query.grant_type) {
        case 'password': {
          await limits.tokenRequest(request.ip);
          const attempt = await limits.reserveSignIn(body.email, request.ip);
          const session = await auth.signInWithPassword(body);
          await attempt.succeeded();
          return session;
        }
        case 'refresh_token':
          await limits.tokenRequest(request.ip);
          return auth.refresh(body.refresh_token);
        case 'pkce':
          await limits.tokenRequest(request.ip);
          return opts.emailFlows.exchangeAuthCode(body);
        default:
          throw authErrors.unsupportedGrantType();
      }
    },
  );

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
    async () => auth.publicSettings(),
  );

  scope.get(
    '/user',
    {
      schema: {
        tags: ['auth'],
        summary: "The caller's user",
        security: USER_SECURITY,
        response: { 200: UserSchema, ...authErrorResponses },
      },
    },
    async (request) => auth.getUser(callers.get(request)),
  );

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
      await auth.logout(callers.get(request), request.query.scope ?? 'global');
      return reply.code(204).send(null);
    },
  );

  scope.post(
    '/admin/users',
    {
      schema: {
        tags: ['admin'],
        summary: 'Create a user (secret key)',
        description: 'Needs the secret key as apikey (and, as supabase-js sends it, as the bearer token).',
        security: KEY_SECURITY,
        body: Type.Optional(AdminUserBody),
        response: { 200: UserSchema, ...authErrorResponses },
      },
    },
    async (request) => auth.adminCreateUser(callers.get(request), request.body ?? {}),
  );

  scope.delete(
    '/admin/users/:id',
    {
      schema: {
        tags: ['admin'],
        summary: 'Delete a user (secret key); should_soft_delete keeps the row',
        security: KEY_SECURITY,
        params: Type.Object({ id: Type.String({ description: 'The user id (a UUID)' }) }),
        body: Type.Optional(Type.Object({ should_soft_delete: Type.Optional(Type.Boolean()) })),
        response: { 200: described(Type.Object({}), 'Deleted'), ...authErrorResponses },
      },
    },
    async (request) => {
      await auth.adminDeleteUser(callers.get(request), request.params.id, request.body?.should_soft_delete === true);
      return {};
    },
  );

  // Registered last, so these routes share the gateway, body handling and error handler above.
  await scope.register(userRoutes, opts.users);
  await scope.register(emailRoutes, { flows: opts.emailFlows, limits });
  await scope.register(mfaRoutes, opts.mfa);
}

/** The public keys that verify access tokens; public like Supabase's, so registered outside the gateway. */
export async function jwksRoute(app: App, { keys }: { keys: SigningKeys }): Promise<void> {
  app.get(
    '/auth/v1/.well-known/jwks.json',
    {
      schema: {
        tags: ['auth'],
        summary: 'Public keys that verify access tokens',
        response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
      },
    },
    async (_request, reply) => reply.header('cache-control', 'public, max-age=600').send(keys.jwks()),
  );
}
