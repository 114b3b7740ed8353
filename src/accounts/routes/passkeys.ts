import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import { type AccessCheck, type StepUp, callers, requireAccessToken, requireRecentAuthentication } from '../auth.js';
import {
  INVALID_PASSKEY_SIGN_IN,
  INVALID_REGISTRATION_CHALLENGE,
  PASSKEY_ALREADY_REGISTERED,
  PASSKEY_NAME_MAX,
  PASSKEY_NOT_FOUND,
  type Passkeys,
} from '../passkeys.js';
import {
  BEARER_SECURITY,
  BearerHeader,
  Done,
  Errors,
  PasskeyAssertion,
  PasskeyAttestation,
  PasskeyCreationOptions,
  PasskeyRequestOptions,
  ReauthenticationRequired,
  STEP_UP_NOTE,
  TokenPair,
} from './schemas.js';

const Passkey = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'Its last sign-in; null: never used' }),
});
const Name = Type.String({ maxLength: PASSKEY_NAME_MAX * 4, description: `1 to ${PASSKEY_NAME_MAX} characters, trimmed` });
const RegistrationBody = Type.Object({ name: Name, response: PasskeyAttestation }, { additionalProperties: false });
const RenameBody = Type.Object({ name: Name }, { additionalProperties: false });
const SignInBody = Type.Object({ response: PasskeyAssertion }, { additionalProperties: false });
const IdParams = Type.Object({ id: Type.String({ format: 'uuid' }) });

export const passkeySignInFailures = {
  401: described(
    ErrorEnvelope,
    'The challenge is unknown, used or expired, the passkey is not registered, or its answer does not verify',
    statusEnvelope(401, INVALID_PASSKEY_SIGN_IN),
  ),
  429: described(
    ErrorEnvelope,
    'Too many failed second-factor checks for the passkey’s account (10 per 15 minutes, shared with TOTP and recovery codes; Retry-After)',
  ),
};

/** Sign-in with a passkey alone, and the caller's passkeys. */
export async function passkeyRoutes(
  app: App,
  { passkeys, access, stepUp }: { passkeys: Passkeys; access: AccessCheck; stepUp: StepUp },
): Promise<void> {
  app.post(
    '/auth/passkeys/sign-in/options',
    {
      schema: {
        tags: ['auth'],
        summary: 'Start a sign-in with a passkey alone (no email): the options for navigator.credentials.get',
        description:
          'No credentials are listed: the authenticator offers the passkeys it holds for this site. User verification is required. ' +
          'The challenge is single use and lives 5 minutes; 30 per client address per minute (429 with Retry-After).',
        response: {
          200: envelope(PasskeyRequestOptions),
          429: described(ErrorEnvelope, 'Too many passkey sign-ins started from this address (Retry-After)'),
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => dataEnvelope(200, 'Answer with a passkey', await passkeys.signInOptions({ ...originOf(request), log: request.log })),
  );

  app.post(
    '/auth/passkeys/sign-in',
    {
      schema: {
        tags: ['auth'],
        summary: 'Sign in with a passkey alone: the answer of navigator.credentials.get, for a token pair as POST /auth/login gives',
        description:
          'The token’s amr is ["hwk", "mfa"]. A failed check counts against the account’s second-factor budget. A signature counter ' +
          'that did not increase (a cloned authenticator) is refused.',
        body: SignInBody,
        response: {
          200: envelope(TokenPair),
          400: Errors.invalid("body must have required property 'response'"),
          401: passkeySignInFailures[401],
          403: Errors.banned,
          429: passkeySignInFailures[429],
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) =>
      dataEnvelope(200, 'Login successful', await passkeys.signIn(request.body.response, { ...originOf(request), log: request.log })),
  );

  // A valid token.
  await app.register(async (scope: App) => {
    requireAccessToken(scope, access);
    scope.get(
      '/auth/passkeys',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'The caller’s passkeys, oldest first',
          description: BearerHeader.description,
          response: {
            200: envelope(Type.Array(Passkey)),
            401: Errors.invalidToken,
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) => dataEnvelope(200, 'Passkeys', await passkeys.list(callers.get(request).id)),
    );

    scope.post(
      '/auth/passkeys',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'Finish adding a passkey: its name and the answer of navigator.credentials.create to the registration options',
          description: `${BearerHeader.description} The options' challenge must be the caller's, unused and under 5 minutes old; it is spent by this call, whatever the outcome.`,
          body: RegistrationBody,
          response: {
            201: envelope(Passkey),
            400: described(
              ErrorEnvelope,
              'The name breaks its rule, the challenge is unknown, used or expired, or the answer does not verify (origin, RP id, signature)',
              statusEnvelope(400, INVALID_REGISTRATION_CHALLENGE),
            ),
            401: Errors.invalidToken,
            409: described(
              ErrorEnvelope,
              'This passkey is registered already, or the account holds 20',
              statusEnvelope(409, PASSKEY_ALREADY_REGISTERED),
            ),
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request, reply) => {
        const added = await passkeys.register(callers.get(request), request.body, { ...originOf(request), log: request.log });
        return reply.code(201).send(dataEnvelope(201, 'Passkey added', added));
      },
    );

    scope.patch(
      '/auth/passkeys/:id',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'Rename one of the caller’s passkeys',
          description: BearerHeader.description,
          params: IdParams,
          body: RenameBody,
          response: {
            200: envelope(Passkey),
            400: Errors.invalid('body/name must be between 1 and 64 characters'),
            401: Errors.invalidToken,
            404: described(ErrorEnvelope, 'No such passkey of the caller', statusEnvelope(404, PASSKEY_NOT_FOUND)),
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) =>
        dataEnvelope(200, 'Passkey renamed', await passkeys.rename(callers.get(request).id, request.params.id, request.body.name)),
    );
  });

  // A valid token from a recent sign-in (REAUTH_MAX_AGE), as for TOTP.
  await app.register(async (scope: App) => {
    requireAccessToken(scope, access);
    requireRecentAuthentication(scope, stepUp);
    const stepUpNote = `${BearerHeader.description} ${STEP_UP_NOTE}`;

    scope.post(
      '/auth/passkeys/registration-options',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'Start adding a passkey: the options for navigator.credentials.create',
          description: `${stepUpNote} A discoverable credential is asked for; the caller's passkeys are excluded. The challenge is single use, lives 5 minutes and replaces any earlier one of the caller.`,
          response: {
            200: envelope(PasskeyCreationOptions),
            401: ReauthenticationRequired,
            409: described(ErrorEnvelope, 'The account holds 20 passkeys already'),
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) => dataEnvelope(200, 'Answer with a new passkey', await passkeys.registrationOptions(callers.get(request))),
    );

    scope.delete(
      '/auth/passkeys/:id',
      {
        schema: {
          tags: ['auth'],
          security: BEARER_SECURITY,
          summary: 'Remove one of the caller’s passkeys: it no longer signs in',
          description: stepUpNote,
          params: IdParams,
          response: {
            200: described(Done, 'Removed', statusEnvelope(200, 'Passkey removed')),
            400: Errors.invalid('params/id must match format "uuid"'),
            401: ReauthenticationRequired,
            404: described(ErrorEnvelope, 'No such passkey of the caller', statusEnvelope(404, PASSKEY_NOT_FOUND)),
            503: Errors.unavailable('The database is unavailable (Retry-After)'),
          },
        },
      },
      async (request) => {
        await passkeys.remove(callers.get(request), request.params.id, { ...originOf(request), log: request.log });
        return statusEnvelope(200, 'Passkey removed');
      },
    );
  });
}
