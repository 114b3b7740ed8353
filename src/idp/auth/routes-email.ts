import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { callers } from '../gateway.js';
import { AuthError } from './errors.js';
import { type EmailFlows, parsePkce } from './email-flows.js';
import type { AuthRateLimits } from './rate-limits.js';
import { AuthErrorSchema, KEY_SECURITY, TokenResponseSchema, UserSchema, authErrorResponses, mailLimited, rateLimited } from './schemas.js';

// GoTrue's email flows, registered inside authRoutes (same gateway and error handling):
//   POST /recover                 recovery mail (supabase-js resetPasswordForEmail)
//   POST /resend                  the sign-up confirmation mail again (resend)
//   POST /otp                     a magic link and code, creating the user if asked (signInWithOtp)
//   POST /verify                  a mailed code or token hash for a session (verifyOtp)
//   GET  /verify                  the mail's link: 303 to redirect_to with the session in the fragment
//   POST /invite                  create a user and mail an invitation (secret key)
//   POST /admin/generate_link     the link and code a mail would carry, not sent (secret key)
// Mails are limited per recipient (SMTP max frequency) and per hour for the service; /recover and
// /resend and /otp count per client address with sign-ups, /verify on its own limit.

const RedirectQuery = Type.Object({
  redirect_to: Type.Optional(
    Type.String({ description: 'Where the link leads after verification; an unlisted URL falls back to IDP_APP_URL' }),
  ),
});
// supabase-js sends these with null values it does not use (code_challenge without PKCE, the captcha token).
const Ignored = Type.Optional(Type.Unknown());

const PkceFields = {
  code_challenge: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'PKCE (supabase-js flowType pkce)' })),
  code_challenge_method: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 's256 or plain' })),
};

const RecoverBody = Type.Object({
  email: Type.Optional(Type.String()),
  ...PkceFields,
  gotrue_meta_security: Ignored,
});

const ResendBody = Type.Object({
  type: Type.Optional(Type.String({ description: 'signup (email_change has nothing pending here)' })),
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  gotrue_meta_security: Ignored,
});

const OtpBody = Type.Object({
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String({ description: 'Refused: no phone sign-ins' })),
  create_user: Type.Optional(Type.Boolean({ description: 'Create a user for an unknown address (default true)' })),
  data: Type.Optional(Type.Object({}, { additionalProperties: true, description: "A new user's user_metadata" })),
  channel: Type.Optional(Type.String()),
  ...PkceFields,
  gotrue_meta_security: Ignored,
});

const VerifyBody = Type.Object({
  type: Type.Optional(Type.String({ description: 'signup, invite, recovery, magiclink, email or email_change' })),
  token: Type.Optional(Type.String({ description: 'The six-digit code of the mail, with email' })),
  token_hash: Type.Optional(Type.String({ description: 'The token of the link, alone' })),
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  redirect_to: Type.Optional(Type.String()),
  gotrue_meta_security: Ignored,
});

const InviteBody = Type.Object({
  email: Type.Optional(Type.String()),
  data: Type.Optional(Type.Object({}, { additionalProperties: true })),
});

const GenerateLinkBody = Type.Object({
  type: Type.Optional(Type.String({ description: 'signup, invite, recovery or magiclink' })),
  email: Type.Optional(Type.String()),
  password: Type.Optional(Type.String({ description: 'signup only' })),
  data: Type.Optional(Type.Object({}, { additionalProperties: true })),
  redirect_to: Type.Optional(Type.String()),
  redirectTo: Ignored,
});

const Accepted = described(Type.Object({}), 'Accepted: a mail goes out if the address has something to send (the same answer otherwise)');
const tokenRefused = described(
  AuthErrorSchema,
  'The link or code is unknown, used, expired or of another type (otp_expired); or the user is banned',
  {
    code: 'otp_expired',
    message: 'Email link is invalid or has expired',
  },
);
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
const Redirect = described(
  Type.Null(),
  'See Other: Location is redirect_to with the session in the fragment (#access_token=…&expires_at=…&expires_in=…&refresh_token=…&token_type=bearer&type=…), or the error (#error=…&error_code=…&error_description=…)',
);

/** GoTrue's AsRedirectURL: the session in the fragment, keys sorted as Go's url.Values encodes them. */
function sessionFragment(
  session: { access_token: string; expires_at: number; expires_in: number; refresh_token: string; token_type: string },
  type: string,
): string {
  const values: Record<string, string> = {
    access_token: session.access_token,
    expires_at: String(session.expires_at),
    expires_in: String(session.expires_in),
    refresh_token: session.refresh_token,
    sb: '',
    token_type: session.token_type,
    type,
  };
  return new URLSearchParams(values).toString();
}

/** GoTrue's OAuth error names by status, for the error fragment of a link. */
const OAUTH_ERROR: Record<number, string> = {
  400: 'invalid_request',
  401: 'unauthorized_client',
  403: 'access_denied',
  500: 'server_error',
  503: 'temporarily_unavailable',
};

/** prepErrorRedirectURL: the error in the fragment of redirect_to (its query and fragment dropped). */
function errorFragment(err: AuthError): string {
  const values = new URLSearchParams();
  const name = OAUTH_ERROR[err.status];
  if (name) values.set('error', name);
  values.set('error_code', err.code);
  values.set('error_description', err.message);
  values.set('sb', '');
  values.sort();
  return values.toString();
}

export async function emailRoutes(scope: App, { flows, limits }: { flows: EmailFlows; limits: AuthRateLimits }): Promise<void> {
  scope.post(
    '/recover',
    {
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

  scope.post(
    '/resend',
    {
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

  scope.post(
    '/otp',
    {
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

  scope.post(
    '/verify',
    {
      schema: {
        tags: ['auth'],
        summary: 'Exchange a mailed code (with email) or token hash for a session (supabase-js verifyOtp)',
        security: KEY_SECURITY,
        body: Type.Optional(VerifyBody),
        response: {
          200: Type.Union([
            TokenResponseSchema,
            described(Type.Object({ msg: Type.String(), code: Type.String() }), 'The first of the two confirmations of an email change'),
          ]),
          ...authErrorResponses,
          403: tokenRefused,
          429: rateLimited,
        },
      },
    },
    async (request) => {
      await limits.verify(request.ip);
      const verified = await flows.verifyPost(request.body ?? {});
      // GoTrue's answer for the first half of a secure email change: a message and no session.
      if ('message' in verified) return { msg: verified.message, code: '200' };
      // A code typed or a token hash sent here always gives the session; only a PKCE link gives a code.
      if ('authCode' in verified) throw new AuthError(500, 'unexpected_failure', 'Unexpected failure');
      return verified.session;
    },
  );

  scope.get(
    '/verify',
    {
      schema: {
        tags: ['auth'],
        summary: "The mail's link: verifies the token and redirects (303) to redirect_to with the session or the error in the fragment",
        description: 'Needs no apikey: a browser opens it from the mail.',
        security: [],
        querystring: Type.Object({
          token: Type.Optional(Type.String()),
          type: Type.Optional(Type.String()),
          redirect_to: Type.Optional(Type.String()),
        }),
        response: { 303: Redirect, ...authErrorResponses, 429: rateLimited },
      },
    },
    async (request, reply) => {
      await limits.verify(request.ip);
      const { token, type } = request.query;
      const target = flows.redirectFor(request.query.redirect_to ?? request.headers.referer);
      let fragment: string;
      try {
        const verified = await flows.verifyLink(type, token);
        if ('authCode' in verified) {
          // GoTrue's PKCE redirect: the auth code in the query, for exchangeCodeForSession.
          const url = new URL(target);
          url.hash = '';
          url.searchParams.set('code', verified.authCode);
          return reply.code(303).header('location', url.toString()).send(null);
        }
        fragment =
          'message' in verified
            ? new URLSearchParams({ message: verified.message, sb: '' }).toString()
            : sessionFragment(verified.session, verified.type);
      } catch (err) {
        // A missing token or type is the request's fault and answered as JSON, as GoTrue's Validate;
        // anything the token itself decides goes back to the app in the fragment.
        if (!(err instanceof AuthError) || (err.status === 400 && (!token || !type))) throw err;
        fragment = errorFragment(err);
      }
      const url = new URL(target);
      url.hash = '';
      return reply.code(303).header('location', `${url.toString()}#${fragment}`).send(null);
    },
  );

  scope.post(
    '/invite',
    {
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

  scope.post(
    '/admin/generate_link',
    {
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
