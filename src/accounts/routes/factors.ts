import { Type } from '@sinclair/typebox';
import QRCode from 'qrcode';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import { type AccessCheck, type StepUp, callers, requireAccessToken, requireRecentAuthentication } from '../auth.js';
import { INVALID_CHALLENGE, type Factors, NO_PENDING_ENROLMENT, NO_TOTP, TOTP_ALREADY_ON } from '../factors.js';
import {
  BEARER_SECURITY,
  BearerHeader,
  Done,
  Errors,
  PasskeyAssertion,
  ReauthenticationRequired,
  STEP_UP_NOTE,
  TokenPair,
} from './schemas.js';

export const FactorAnswerBody = Type.Object(
  {
    challenge: Type.String({ maxLength: 128, description: 'From the answer of POST /auth/login' }),
    code: Type.Optional(Type.String({ maxLength: 32, description: 'The 6-digit code of the authenticator app' })),
    recovery_code: Type.Optional(Type.String({ maxLength: 32, description: 'One of the recovery codes (single use)' })),
    passkey: Type.Optional(PasskeyAssertion),
  },
  { additionalProperties: false },
);

const CodeBody = Type.Object(
  { code: Type.String({ maxLength: 32, description: 'The 6-digit code the app shows now' }) },
  { additionalProperties: false },
);
const RecoveryCodes = Type.Object({
  recovery_codes: Type.Array(Type.String(), { description: 'Ten single-use codes, shown this once; store them safely' }),
});
const Enrolment = Type.Object({
  secret: Type.String({ description: 'The shared secret in base32, for typing into the app; never shown again' }),
  otpauth_uri: Type.String({ description: 'The otpauth:// URI to show as a QR code' }),
  otpauth_qr: Type.String({
    description: 'The otpauth URI as a QR code: an SVG image in a data: URL, for the src of an img (no script needed to draw it)',
  }),
});
const Status = Type.Object({
  totp: Type.Object({ enabled: Type.Boolean(), confirmed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]) }),
  recovery_codes_remaining: Type.Integer(),
});

export const factorFailures = {
  401: described(
    ErrorEnvelope,
    'The challenge is unknown, used, expired or out of attempts, or the code or passkey answer is wrong',
    statusEnvelope(401, INVALID_CHALLENGE),
  ),
  429: described(
    ErrorEnvelope,
    'Too many failed second-factor checks for this account (10 per 15 minutes, TOTP, recovery codes and passkeys together; Retry-After)',
    statusEnvelope(429, 'Too many failed second-factor checks, try again in 900 seconds.'),
  ),
};

/** The second step of a login, and the caller's own second factors. */
export async function factorRoutes(
  app: App,
  { factors, access, stepUp }: { factors: Factors; access: AccessCheck; stepUp: StepUp },
): Promise<void> {
  app.post(
    '/auth/login/factor',
    {
      schema: {
        tags: ['auth'],
        summary: 'The second step of a login: the challenge with a TOTP code or a recovery code, for a token pair',
        description:
          'Exactly one of `code`, `recovery_code` and `passkey` (the answer of navigator.credentials.get to the challenge’s `passkey` options). ' +
          'A challenge accepts 5 tries within its 5 minutes and signs in once; failures count against the account (10 per 15 minutes), ' +
          'before the answer is checked.',
        body: FactorAnswerBody,
        response: {
          200: envelope(TokenPair),
          400: Errors.invalid('Give exactly one of code, recovery_code and passkey'),
          401: factorFailures[401],
          403: Errors.banned,
          429: factorFailures[429],
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const pair = await factors.completeLogin(request.body, { ...originOf(request), log: request.log });
      return dataEnvelope(200, 'Login successful', pair);
    },
  );

  // A valid token.
  await app.register(async (scope: App) => {
    requireAccessToken(scope, access);
    scope.get(
      '/auth/factors',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'The caller’s second factors: whether TOTP is on, and how many recovery codes are left',
          description: BearerHeader.description,
          response: {
            200: envelope(Status),
            401: Errors.invalidToken,
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) => dataEnvelope(200, 'Second factors', await factors.status(callers.get(request).id)),
    );

    scope.post(
      '/auth/factors/totp/confirm',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'Turn the pending TOTP enrolment on with one code of it; answers the ten recovery codes, once',
          description: `${BearerHeader.description} Within 10 minutes of POST /auth/factors/totp. A wrong code counts against the account’s second-factor budget.`,
          body: CodeBody,
          response: {
            200: envelope(RecoveryCodes),
            400: described(ErrorEnvelope, 'The code is wrong, or no enrolment is pending', statusEnvelope(400, NO_PENDING_ENROLMENT)),
            401: Errors.invalidToken,
            429: factorFailures[429],
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) =>
        dataEnvelope(
          200,
          'Two-step sign-in is on',
          await factors.confirmEnrolment(callers.get(request), request.body.code, { ...originOf(request), log: request.log }),
        ),
    );
  });

  // A valid token from a recent sign-in (REAUTH_MAX_AGE): what a stolen token must not be able to do.
  await app.register(async (scope: App) => {
    requireAccessToken(scope, access);
    requireRecentAuthentication(scope, stepUp);
    const stepUpNote = `${BearerHeader.description} ${STEP_UP_NOTE}`;

    scope.post(
      '/auth/factors/totp',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'Start a TOTP enrolment: a new secret and its otpauth URI (QR code), shown this once',
          description: `${stepUpNote} Starting again before confirming replaces the secret.`,
          response: {
            200: envelope(Enrolment),
            401: ReauthenticationRequired,
            409: described(ErrorEnvelope, 'TOTP is already on', statusEnvelope(409, TOTP_ALREADY_ON)),
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) => {
        const enrolment = await factors.beginEnrolment(callers.get(request));
        // Drawn here, so a page shows it without a QR script of its own (and the secret never leaves for a QR service).
        const svg = await QRCode.toString(enrolment.otpauth_uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 4 });
        const otpauth_qr = `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
        return dataEnvelope(200, 'Scan the code, then confirm with one code', { ...enrolment, otpauth_qr });
      },
    );

    scope.delete(
      '/auth/factors/totp',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'Turn TOTP off; its recovery codes stop working',
          description: stepUpNote,
          response: {
            200: described(Done, 'Removed', statusEnvelope(200, 'Two-step sign-in is off')),
            401: ReauthenticationRequired,
            404: described(ErrorEnvelope, 'No TOTP factor', statusEnvelope(404, NO_TOTP)),
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) => {
        await factors.removeTotp(callers.get(request), { ...originOf(request), log: request.log });
        return statusEnvelope(200, 'Two-step sign-in is off');
      },
    );

    scope.post(
      '/auth/factors/recovery-codes',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'A new set of ten recovery codes, shown once; the previous set stops working',
          description: stepUpNote,
          response: {
            200: envelope(RecoveryCodes),
            401: ReauthenticationRequired,
            404: described(ErrorEnvelope, 'No TOTP factor', statusEnvelope(404, NO_TOTP)),
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) =>
        dataEnvelope(
          200,
          'New recovery codes',
          await factors.regenerateRecoveryCodes(callers.get(request), { ...originOf(request), log: request.log }),
        ),
    );
  });
}
