import { Type } from '@sinclair/typebox';
import { type ApiDocument, described } from '../../kit/http/openapi.js';

/** The tags and security schemes of the idp's OpenAPI document. */
export const IDP_DOCUMENT: ApiDocument = {
  tags: [
    { name: 'auth', description: 'Supabase Auth (GoTrue) subset: sign-up, sign-in, refresh, the caller, logout' },
    { name: 'admin', description: 'User administration: needs the secret key' },
    { name: 'mfa', description: 'Multi-factor authentication: TOTP factors, challenges, verification to aal2' },
    { name: 'rest', description: 'PostgREST subset over the public schema, under row-level security' },
  ],
  securitySchemes: {
    apikey: {
      type: 'apiKey',
      in: 'header',
      name: 'apikey',
      description: 'The publishable key (role anon) or the secret key (role service_role); every /auth/v1 and /rest/v1 request needs one',
    },
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description: "A user's access_token from /auth/v1/token: the request acts as that user",
    },
  },
};

/** The key alone: the request acts as the key's role. */
export const KEY_SECURITY = [{ apikey: [] }];
/** The key and a user's access token. */
export const USER_SECURITY = [{ apikey: [], bearerAuth: [] }];

// Response shapes of the auth endpoints, for serialisation and the OpenAPI document.

/** User and app metadata: any JSON object. */
export const JsonObject = Type.Object({}, { additionalProperties: true });

export const IdentitySchema = Type.Object({
  identity_id: Type.String(),
  id: Type.String(),
  user_id: Type.String(),
  identity_data: JsonObject,
  provider: Type.String(),
  last_sign_in_at: Type.Optional(Type.String()),
  created_at: Type.String(),
  updated_at: Type.String(),
  email: Type.Optional(Type.String()),
});

export const FactorSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    friendly_name: Type.Optional(Type.String()),
    factor_type: Type.String({ description: 'totp' }),
    status: Type.Union([Type.Literal('verified'), Type.Literal('unverified')]),
    created_at: Type.String(),
    updated_at: Type.String(),
    phone: Type.String({ description: 'Always empty: only TOTP factors exist here' }),
    last_challenged_at: Type.Union([Type.String(), Type.Null()]),
  },
  { description: 'An MFA factor (GoTrue models.Factor)' },
);

export const UserSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    aud: Type.String(),
    role: Type.String(),
    email: Type.String(),
    phone: Type.String(),
    email_confirmed_at: Type.Optional(Type.String()),
    phone_confirmed_at: Type.Optional(Type.String()),
    confirmed_at: Type.Optional(Type.String()),
    confirmation_sent_at: Type.Optional(Type.String()),
    recovery_sent_at: Type.Optional(Type.String()),
    invited_at: Type.Optional(Type.String()),
    new_email: Type.Optional(Type.String({ description: 'An email change awaiting confirmation' })),
    email_change_sent_at: Type.Optional(Type.String()),
    last_sign_in_at: Type.Optional(Type.String()),
    banned_until: Type.Optional(Type.String()),
    deleted_at: Type.Optional(Type.String()),
    app_metadata: JsonObject,
    user_metadata: JsonObject,
    identities: Type.Array(IdentitySchema),
    factors: Type.Optional(Type.Array(FactorSchema, { description: 'Absent when the user has none' })),
    created_at: Type.String(),
    updated_at: Type.String(),
    is_anonymous: Type.Boolean(),
  },
  { description: 'A user (GoTrue models.User)' },
);

export const TokenResponseSchema = Type.Object(
  {
    access_token: Type.String(),
    token_type: Type.Literal('bearer'),
    expires_in: Type.Integer({ description: 'seconds' }),
    expires_at: Type.Integer({ description: 'Unix time in seconds, equal to the token exp' }),
    refresh_token: Type.String(),
    user: UserSchema,
    weak_password: Type.Optional(Type.Object({ message: Type.String(), reasons: Type.Array(Type.String()) })),
  },
  { description: 'A session' },
);

/** `{code, message}` (versioned API), `{code, error_code, msg}` (legacy) or `{error, error_description}` (OAuth). */
export const AuthErrorSchema = Type.Object(
  {
    code: Type.Optional(Type.Union([Type.String(), Type.Integer()])),
    message: Type.Optional(Type.String()),
    error_code: Type.Optional(Type.String()),
    msg: Type.Optional(Type.String()),
    error: Type.Optional(Type.String()),
    error_description: Type.Optional(Type.String()),
    hint: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

// Examples in the versioned API's form (X-Supabase-Api-Version: 2024-01-01, as supabase-js sends).
const authError = (description: string, example: Record<string, unknown>) => described(AuthErrorSchema, description, example);

export const authErrorResponses = {
  400: authError(
    'Invalid request or credentials (validation_failed, invalid_credentials, bad_json, weak_password; OAuth errors on refresh)',
    {
      code: 'invalid_credentials',
      message: 'Invalid login credentials',
    },
  ),
  401: authError('The apikey header is missing or is not one of the two keys (gateway answer)', {
    message: 'Invalid API key',
    hint: 'Double check your Supabase `anon` or `service_role` API key.',
  }),
  403: authError('The bearer token is not valid, or the caller may not do this (bad_jwt, not_admin, user_not_found)', {
    code: 'bad_jwt',
    message: 'invalid JWT: unable to parse or verify signature, token is malformed',
  }),
  404: authError('No such user', { code: 'user_not_found', message: 'User not found' }),
  413: authError('Request body larger than the limit', { code: 'validation_failed', message: 'Request body is too large' }),
  415: authError('The body must be application/json', { code: 'validation_failed', message: 'Unsupported Media Type' }),
  422: authError('Refused by a rule (email_exists, signup_disabled, email_address_invalid)', {
    code: 'email_exists',
    message: 'A user with this email address has already been registered',
  }),
  500: authError('Unexpected failure (its cause is only logged)', { code: 'unexpected_failure', message: 'Unexpected failure' }),
  503: authError('The database or the password queue is unavailable (Retry-After)', {
    code: 'unexpected_failure',
    message: 'Service temporarily unavailable',
  }),
};

export const rateLimited = authError('Too many requests from this client or for this account (Retry-After)', {
  code: 'over_request_rate_limit',
  message: 'Request rate limit reached',
});

export const mailLimited = authError(
  'A mail to this address was sent less than IDP_SMTP_MAX_FREQUENCY seconds ago, or its hourly limit is spent (Retry-After)',
  {
    code: 'over_email_send_rate_limit',
    message: 'For security purposes, you can only request this after 42 seconds.',
  },
);

/** What the secret key may set on a user it creates (POST /admin/users); PUT /admin/users/:id takes a ban as well. */
export const AdminUserBody = Type.Object({
  email: Type.Optional(Type.String()),
  phone: Type.Optional(Type.String()),
  password: Type.Optional(Type.String()),
  email_confirm: Type.Optional(Type.Boolean()),
  user_metadata: Type.Optional(JsonObject),
  app_metadata: Type.Optional(JsonObject),
});
