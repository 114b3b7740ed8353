import { Type } from '@sinclair/typebox';
import { type ApiDocument, described } from '../../kit/http/openapi.js';
import { ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';

/** The tags and security scheme of the accounts OpenAPI document. */
export const ACCOUNTS_DOCUMENT: ApiDocument = {
  tags: [
    { name: 'auth', description: 'Registration, login and the caller’s own account' },
    { name: 'admin', description: 'Every account: needs a token of a user with role admin' },
    {
      name: 'browser session',
      description:
        'What the web pages use instead of login and refresh: the refresh token in an HttpOnly cookie, CSRF-protected by a header',
    },
  ],
  securitySchemes: {
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description: 'The token from POST /auth/login (HS256, or ES256 with JWT_ALGORITHM; 1 hour)',
    },
  },
};

/** Routes that need a token from POST /auth/login. */
export const BEARER_SECURITY = [{ bearerAuth: [] }];

/** The public user: the only user shape any endpoint returns (no password hash, by construction of the serializer too). */
export const PublicUser = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    email: Type.String({ format: 'email' }),
    role: Type.Union([Type.Literal('user'), Type.Literal('admin')]),
    emailVerified: Type.Boolean({ description: 'Whether the owner of the address followed a verification or password-reset link' }),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

/** The error answers with the meaning they have on every accounts route. */
export const Errors = {
  invalid: (message: string) =>
    described(ErrorEnvelope, 'A field breaks its rule, or the body is not valid JSON', statusEnvelope(400, message)),
  noToken: described(
    ErrorEnvelope,
    'No token, or one that is not valid (signature, expiry, algorithm)',
    statusEnvelope(401, 'Access denied. No token provided.'),
  ),
  forbidden: described(
    ErrorEnvelope,
    'The token is valid but its user is not an admin',
    statusEnvelope(403, 'You do not have permission to access this resource.'),
  ),
  invalidToken: described(
    ErrorEnvelope,
    'No token, or one that is not valid (signature, expiry, algorithm), or issued before a logout everywhere, password change, role change or ban',
    statusEnvelope(401, 'Invalid or expired token.'),
  ),
  banned: described(ErrorEnvelope, 'The account is banned', statusEnvelope(403, 'This account has been banned.')),
  unavailable: (why: string) => described(ErrorEnvelope, why, statusEnvelope(503, 'Service temporarily unavailable, try again shortly')),
};

export const BearerHeader = {
  description: 'Needs `Authorization: Bearer <token>` from POST /auth/login.',
};

/** What login, refresh and a password change answer with under `data`. */
export const TokenPair = Type.Object({
  token: Type.String({ description: 'Access token (HS256, or ES256 with JWT_ALGORITHM)' }),
  refresh_token: Type.String({ description: 'Opaque; works once (POST /auth/refresh)' }),
  expires_in: Type.Integer({ description: 'Seconds the access token lives' }),
  user: PublicUser,
});

/** A success that carries no data. */
export const Done = Type.Object({ status: Type.Integer(), response: Type.String(), message: Type.String() });

const CredentialDescriptor = Type.Object({
  id: Type.String({ description: 'A credential id, base64url' }),
  type: Type.Literal('public-key'),
  transports: Type.Optional(Type.Array(Type.String())),
});

/** The options of navigator.credentials.get (PublicKeyCredential.parseRequestOptionsFromJSON reads them). */
export const PasskeyRequestOptions = Type.Object(
  {
    challenge: Type.String({ description: 'base64url; single use, 5 minutes' }),
    timeout: Type.Optional(Type.Integer()),
    rpId: Type.Optional(Type.String()),
    allowCredentials: Type.Optional(Type.Array(CredentialDescriptor)),
    userVerification: Type.Optional(Type.String()),
  },
  { description: 'WebAuthn PublicKeyCredentialRequestOptionsJSON' },
);

/** The options of navigator.credentials.create (PublicKeyCredential.parseCreationOptionsFromJSON reads them). */
export const PasskeyCreationOptions = Type.Object(
  {
    rp: Type.Object({ name: Type.String(), id: Type.Optional(Type.String()) }),
    user: Type.Object({ id: Type.String(), name: Type.String(), displayName: Type.String() }),
    challenge: Type.String({ description: 'base64url; single use, 5 minutes' }),
    pubKeyCredParams: Type.Array(Type.Object({ alg: Type.Integer(), type: Type.Literal('public-key') })),
    timeout: Type.Optional(Type.Integer()),
    excludeCredentials: Type.Optional(Type.Array(CredentialDescriptor)),
    authenticatorSelection: Type.Optional(
      Type.Object({
        authenticatorAttachment: Type.Optional(Type.String()),
        residentKey: Type.Optional(Type.String()),
        requireResidentKey: Type.Optional(Type.Boolean()),
        userVerification: Type.Optional(Type.String()),
      }),
    ),
    attestation: Type.Optional(Type.String()),
    extensions: Type.Optional(Type.Object({ credProps: Type.Optional(Type.Boolean()) })),
  },
  { description: 'WebAuthn PublicKeyCredentialCreationOptionsJSON' },
);

const B64URL = (maxLength: number) => Type.String({ maxLength, pattern: '^[A-Za-z0-9_-]*$' });

/** A browser's answer to navigator.credentials.get, as PublicKeyCredential.toJSON() gives it. */
export const PasskeyAssertion = Type.Object(
  {
    id: B64URL(1366),
    rawId: B64URL(1366),
    type: Type.Literal('public-key'),
    response: Type.Object({
      clientDataJSON: B64URL(4096),
      authenticatorData: B64URL(4096),
      signature: B64URL(1024),
      userHandle: Type.Optional(B64URL(128)),
    }),
    authenticatorAttachment: Type.Optional(Type.Union([Type.Literal('platform'), Type.Literal('cross-platform')])),
    clientExtensionResults: Type.Object({}, { default: {} }),
  },
  { description: 'PublicKeyCredential.toJSON() of navigator.credentials.get' },
);

/** A browser's answer to navigator.credentials.create, as PublicKeyCredential.toJSON() gives it. */
export const PasskeyAttestation = Type.Object(
  {
    id: B64URL(1366),
    rawId: B64URL(1366),
    type: Type.Literal('public-key'),
    response: Type.Object({
      clientDataJSON: B64URL(4096),
      attestationObject: B64URL(16384),
      transports: Type.Optional(Type.Array(Type.String({ maxLength: 32 }), { maxItems: 8 })),
    }),
    authenticatorAttachment: Type.Optional(Type.Union([Type.Literal('platform'), Type.Literal('cross-platform')])),
    clientExtensionResults: Type.Object({}, { default: {} }),
  },
  { description: 'PublicKeyCredential.toJSON() of navigator.credentials.create' },
);

/** What POST /auth/login answers under `data` instead of a token pair when the account has a second factor. */
export const FactorChallenge = Type.Object(
  {
    mfa_required: Type.Literal(true),
    challenge: Type.String({ description: 'Single use; only POST /auth/login/factor accepts it' }),
    expires_in: Type.Integer({ description: 'Seconds the challenge lives (300)' }),
    methods: Type.Array(Type.String(), {
      description: 'What the second step accepts: totp and recovery_code (TOTP on), passkey (a passkey registered)',
    }),
    // With passkeys only: the options for navigator.credentials.get, listing the account's passkeys.
    passkey: Type.Optional(PasskeyRequestOptions),
  },
  { additionalProperties: false },
);

/** The description's sentence of every route behind requireRecentAuthentication. */
export const STEP_UP_NOTE = 'Needs a sign-in no older than REAUTH_MAX_AGE (10 minutes), else 401 reauthentication_required.';

export const ReauthenticationRequired = described(
  ErrorEnvelope,
  'The token’s sign-in is older than REAUTH_MAX_AGE (10 minutes): sign in again and retry with the new token. ' +
    'The WWW-Authenticate header says error="insufficient_user_authentication" and max_age (RFC 9470).',
  statusEnvelope(
    401,
    'reauthentication_required: this operation needs a recent sign-in; sign in again (POST /auth/login) and retry with the new token.',
  ),
);
