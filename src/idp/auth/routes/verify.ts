import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { described } from '../../../kit/http/openapi.js';
import type { EmailFlows } from '../email-flows.js';
import { AuthError } from '../errors.js';
import type { AuthRateLimits } from '../rate-limits.js';
import { AuthErrorSchema, KEY_SECURITY, TokenResponseSchema, authErrorResponses, rateLimited } from '../schemas.js';
import { Ignored } from './mail-fields.js';

// GoTrue's verify endpoint, counted on its own limit:
//   POST /verify                  a mailed code or token hash for a session (verifyOtp)
//   GET  /verify                  the mail's link: 303 to redirect_to with the session in the fragment
// GET /verify needs no apikey (see api.ts): a browser opens it from the mail.

const VerifyBody = Type.Object({
  type: Type.Optional(Type.String({ description: 'signup, invite, recovery, magiclink, email or email_change' })),
  token: Type.Optional(Type.String({ description: 'The six-digit code of the mail, with email' })),
  token_hash: Type.Optional(Type.String({ description: 'The token of the link, alone' })),
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  redirect_to: Type.Optional(Type.String()),
  gotrue_meta_security: Ignored,
});

const tokenRefused = described(
  AuthErrorSchema,
  'The link or code is unknown, used, expired or of another type (otp_expired); or the user is banned',
  {
    code: 'otp_expired',
    message: 'Email link is invalid or has expired',
  },
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

export function verifyRoutes(scope: App, { flows, limits }: { flows: EmailFlows; limits: AuthRateLimits }): void {
  scope.post(
    '/verify',
    {
      config: { goParams: 'VerifyParams' },
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
}
