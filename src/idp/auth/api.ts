import type { FastifyError } from 'fastify';
import type { App } from '../../kit/http/app.js';
import { InvalidJsonBody } from '../../kit/http/json-body.js';
import { acceptJsonBodies } from '../../kit/http/json-body-parser.js';
import { type GatewayKeys, gatewayHook } from '../gateway.js';
import type { AdminUsers } from './admin-users.js';
import type { EmailFlows } from './email-flows.js';
import { AuthError, OAuthError, authErrors, bodyTypeError, sendAuthError, unexpectedAuthError } from './errors.js';
import type { Mfa } from './mfa.js';
import type { MfaLimits } from './mfa-limits.js';
import type { AuthRateLimits } from './rate-limits.js';
import { adminUserRoutes } from './routes/admin-users.js';
import { factorRoutes } from './routes/factors.js';
import { generateLinkRoutes } from './routes/generate-link.js';
import { goParamsOf } from './routes/go-params.js';
import { inviteRoutes } from './routes/invite.js';
import { logoutRoutes } from './routes/logout.js';
import { otpRoutes } from './routes/otp.js';
import { reauthenticateRoutes } from './routes/reauthenticate.js';
import { recoverRoutes } from './routes/recover.js';
import { resendRoutes } from './routes/resend.js';
import { settingsRoutes } from './routes/settings.js';
import { signupRoutes } from './routes/signup.js';
import { tokenRoutes } from './routes/token.js';
import { userRoutes } from './routes/user.js';
import { verifyRoutes } from './routes/verify.js';
import type { Authentication } from './authentication.js';
import type { Sessions } from './sessions.js';
import type { SignUp } from './sign-up.js';
import type { UserUpdates } from './user-update.js';

// The Supabase Auth (GoTrue) subset, mounted at /auth/v1 behind the gateway: what every route shares
// (the gateway, body handling, GoTrue's error bodies), then one file per endpoint group in routes/:
//   POST   /signup                           signup.ts: sign up, or sign in anonymously
//   POST   /token?grant_type=password|refresh_token|pkce   token.ts: sign in, refresh, PKCE exchange
//   GET    /settings                         settings.ts: the sign-up settings
//   GET    /user, PUT /user                  user.ts: the caller's user, changed by the caller
//   POST   /logout?scope=global|local|others logout.ts: end sessions
//   POST|GET /admin/users, GET|PUT|DELETE /admin/users/:id   admin-users.ts (secret key)
//   GET    /reauthenticate                   reauthenticate.ts: the nonce a password change may need
//   POST   /recover, /resend, /otp           recover.ts, resend.ts, otp.ts: mails a link and code
//   POST   /verify, GET /verify              verify.ts: a mailed code, token hash or link for a session
//   POST   /invite, /admin/generate_link     invite.ts, generate-link.ts (secret key)
//   POST /factors, POST /factors/:id/challenge|verify, DELETE /factors/:id, GET /admin/users/:id/factors,
//   DELETE /admin/users/:id/factors/:factorId   factors.ts: MFA
// (GET /.well-known/jwks.json is public: routes/jwks.ts, registered outside the gateway.)

export async function authRoutes(
  scope: App,
  opts: {
    gateway: GatewayKeys;
    signUp: SignUp;
    sessions: Sessions;
    authentication: Authentication;
    limits: AuthRateLimits;
    users: { admin: AdminUsers; self: UserUpdates };
    emailFlows: EmailFlows;
    mfa: { mfa: Mfa; limits: MfaLimits };
  },
): Promise<void> {
  const { signUp, sessions, authentication, limits, emailFlows: flows } = opts;
  // The mail's link is opened by a browser, which has no key: Supabase's gateway leaves GET /verify
  // open too. It needs none, since the token in the link is the credential.
  const gateway = gatewayHook(opts.gateway);
  scope.addHook('onRequest', (request, reply, done) => {
    if (request.method === 'GET' && request.routeOptions.url === '/auth/v1/verify') return done();
    gateway(request, reply, done);
  });
  acceptJsonBodies(scope, 'empty-object');
  // Every auth body is optional (GoTrue reads an absent body as an empty one), but Fastify validates
  // an absent body against the schema as `undefined`: a DELETE /admin/users/:id sent without a body
  // was a 400 bad_json, answered before the admin check. Absent is empty, whatever the content type.
  scope.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined) request.body = {};
    done();
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

  // After the hooks and error handler above, so every route shares them.
  signupRoutes(scope, { signUp, limits });
  tokenRoutes(scope, { authentication, sessions, limits, emailFlows: flows });
  settingsRoutes(scope, { signUp });
  userRoutes(scope, { authentication, self: opts.users.self });
  logoutRoutes(scope, { authentication, sessions });
  adminUserRoutes(scope, { admin: opts.users.admin });
  reauthenticateRoutes(scope, { self: opts.users.self });
  recoverRoutes(scope, { flows, limits });
  resendRoutes(scope, { flows, limits });
  otpRoutes(scope, { flows, limits });
  verifyRoutes(scope, { flows, limits });
  inviteRoutes(scope, { flows });
  generateLinkRoutes(scope, { flows });
  factorRoutes(scope, opts.mfa);
}
