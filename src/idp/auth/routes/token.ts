import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../../kit/http/app.js';
import type { EmailFlows } from '../email-flows.js';
import { authErrors } from '../errors.js';
import type { AuthRateLimits } from '../rate-limits.js';
import { KEY_SECURITY, TokenResponseSchema, authErrorResponses, rateLimited } from '../schemas.js';
import type { Authentication } from '../authentication.js';
import type { Sessions } from '../sessions.js';

// POST /token?grant_type=password|refresh_token|pkce: sign in, rotate the refresh token, or exchange
// a PKCE link's auth code (email-flows.ts). Rate limited per client address as in GoTrue, and
// password sign-ins per account as well (see rate-limits.ts), before any work for the request.

const TokenBody = Type.Object({
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  password: Type.Optional(Type.String()),
  refresh_token: Type.Optional(Type.String()),
  auth_code: Type.Optional(Type.String({ description: 'grant_type=pkce: the code of the PKCE redirect' })),
  code_verifier: Type.Optional(Type.String({ description: 'grant_type=pkce: the verifier of the challenge sent with the request' })),
});

/** Each grant has its own Go struct in GoTrue. */
function goParamsOfGrant(request: FastifyRequest): string {
  const grant = (request.query as { grant_type?: string }).grant_type;
  if (grant === 'pkce') return 'PKCEGrantParams';
  return grant === 'refresh_token' ? 'RefreshTokenGrantParams' : 'PasswordGrantParams';
}

export function tokenRoutes(
  scope: App,
  {
    authentication,
    sessions,
    limits,
    emailFlows,
  }: { authentication: Authentication; sessions: Sessions; limits: AuthRateLimits; emailFlows: EmailFlows },
): void {
  scope.post(
    '/token',
    {
      config: { goParams: goParamsOfGrant },
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
          const session = await authentication.signInWithPassword(body);
          await attempt.succeeded();
          return session;
        }
        case 'refresh_token':
          await limits.tokenRequest(request.ip);
          return sessions.refresh(body.refresh_token);
        case 'pkce':
          await limits.tokenRequest(request.ip);
          return emailFlows.exchangeAuthCode(body);
        default:
          throw authErrors.unsupportedGrantType();
      }
    },
  );
}
