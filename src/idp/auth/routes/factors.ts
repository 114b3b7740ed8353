import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { described } from '../../../kit/http/openapi.js';
import { callers } from '../../gateway.js';
import type { Mfa } from '../mfa.js';
import type { MfaLimits } from '../mfa-limits.js';
import {
  AuthErrorSchema,
  FactorSchema,
  KEY_SECURITY,
  TokenResponseSchema,
  USER_SECURITY,
  authErrorResponses,
  rateLimited,
} from '../schemas.js';

// GoTrue's MFA endpoints:
//   POST   /factors                               enrol a TOTP factor (unverified until verified once)
//   POST   /factors/:id/challenge                 a challenge to verify a code against
//   POST   /factors/:id/verify                    a code for a challenge: the session becomes aal2
//   DELETE /factors/:id                           unenrol (a verified factor needs an aal2 session)
//   GET    /admin/users/:id/factors               a user's factors (secret key)
//   DELETE /admin/users/:id/factors/:factorId     remove one (secret key)
// Challenge and verify are limited per client address first (GoTrue's limiter), then verify counts
// each code per challenge, factor and user (mfa-limits.ts).

const FactorId = Type.Object({ id: Type.String({ description: 'The factor id (a UUID)' }) });

const mfaRefused = described(
  AuthErrorSchema,
  'Refused by a rule (mfa_verification_failed, mfa_challenge_expired, mfa_factor_name_conflict, too_many_enrolled_mfa_factors, insufficient_aal, mfa_ip_address_mismatch)',
  { code: 'mfa_verification_failed', message: 'Invalid TOTP code entered' },
);

export function factorRoutes(scope: App, opts: { mfa: Mfa; limits: MfaLimits }): void {
  const { mfa, limits } = opts;

  scope.post(
    '/factors',
    {
      config: { goParams: 'EnrollFactorParams' },
      schema: {
        tags: ['mfa'],
        summary: 'Enrol a TOTP factor',
        description:
          'An unverified factor with its secret, otpauth URI and QR code (SVG); verifying a first code makes it verified. With a verified factor already, the session must be aal2.',
        security: USER_SECURITY,
        body: Type.Optional(
          Type.Object({
            factor_type: Type.Optional(Type.String({ description: 'totp (phone and webauthn are not enabled)' })),
            friendly_name: Type.Optional(Type.String()),
            issuer: Type.Optional(Type.String({ description: 'The otpauth issuer; the host of IDP_APP_URL when absent' })),
            phone: Type.Optional(Type.String()),
          }),
        ),
        response: {
          200: Type.Object({
            id: Type.String({ format: 'uuid' }),
            type: Type.Literal('totp'),
            friendly_name: Type.String(),
            totp: Type.Object({
              qr_code: Type.String({ description: 'An SVG image of the URI' }),
              secret: Type.String({ description: 'Base32' }),
              uri: Type.String({ description: 'otpauth://totp/…' }),
            }),
          }),
          ...authErrorResponses,
          422: mfaRefused,
        },
      },
    },
    async (request) => mfa.enrol(callers.get(request), request.body ?? {}),
  );

  scope.post(
    '/factors/:id/challenge',
    {
      config: { goParams: 'ChallengeFactorParams' },
      schema: {
        tags: ['mfa'],
        summary: 'Challenge a factor: a code is then verified against the challenge, from the same address, before expires_at',
        security: USER_SECURITY,
        params: FactorId,
        body: Type.Optional(Type.Object({ channel: Type.Optional(Type.String()) })),
        response: {
          200: Type.Object({
            id: Type.String({ format: 'uuid' }),
            type: Type.Literal('totp'),
            expires_at: Type.Integer({ description: 'Unix seconds (IDP_MFA_CHALLENGE_EXPIRY_DURATION after now)' }),
          }),
          ...authErrorResponses,
          429: rateLimited,
        },
      },
    },
    async (request) => {
      await limits.challengeRequest(request.ip);
      return mfa.challenge(callers.get(request), request.params.id, request.ip);
    },
  );

  scope.post(
    '/factors/:id/verify',
    {
      config: { goParams: 'VerifyFactorParams' },
      schema: {
        tags: ['mfa'],
        summary: "Verify a code against a challenge: the caller's session becomes aal2 (amr totp) with new tokens",
        description:
          'Also verifies an unverified factor, ends the user’s other aal1 sessions and removes their other unverified TOTP factors, as GoTrue. A code is accepted once.',
        security: USER_SECURITY,
        params: FactorId,
        body: Type.Optional(
          Type.Object({
            challenge_id: Type.Optional(Type.String({ description: 'The id POST /factors/:id/challenge answered' })),
            code: Type.Optional(Type.String({ description: 'Six digits' })),
          }),
        ),
        response: { 200: TokenResponseSchema, ...authErrorResponses, 422: mfaRefused, 429: rateLimited },
      },
    },
    async (request) => {
      await limits.verifyRequest(request.ip);
      return mfa.verify(callers.get(request), request.params.id, request.body ?? {}, request.ip);
    },
  );

  scope.delete(
    '/factors/:id',
    {
      schema: {
        tags: ['mfa'],
        summary: 'Unenrol a factor (a verified one only from an aal2 session); sessions it raised go back to aal1',
        security: USER_SECURITY,
        params: FactorId,
        response: { 200: Type.Object({ id: Type.String({ format: 'uuid' }) }), ...authErrorResponses, 422: mfaRefused },
      },
    },
    async (request) => mfa.unenrol(callers.get(request), request.params.id),
  );

  scope.get(
    '/admin/users/:id/factors',
    {
      schema: {
        tags: ['admin'],
        summary: "A user's MFA factors (secret key)",
        security: KEY_SECURITY,
        params: Type.Object({ id: Type.String({ description: 'The user id (a UUID)' }) }),
        response: { 200: Type.Array(FactorSchema), ...authErrorResponses },
      },
    },
    async (request) => mfa.adminListFactors(callers.get(request), request.params.id),
  );

  scope.delete(
    '/admin/users/:id/factors/:factorId',
    {
      schema: {
        tags: ['admin'],
        summary: "Remove a user's factor (secret key); the factor as it was",
        security: KEY_SECURITY,
        params: Type.Object({
          id: Type.String({ description: 'The user id (a UUID)' }),
          factorId: Type.String({ description: 'The factor id (a UUID)' }),
        }),
        response: { 200: FactorSchema, ...authErrorResponses },
      },
    },
    async (request) => mfa.adminDeleteFactor(callers.get(request), request.params.id, request.params.factorId),
  );
}
