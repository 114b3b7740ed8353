import { Type } from '@sinclair/typebox';

// Response shapes of the auth endpoints, for serialisation and the OpenAPI document.

const JsonObject = Type.Object({}, { additionalProperties: true });

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
    last_sign_in_at: Type.Optional(Type.String()),
    banned_until: Type.Optional(Type.String()),
    deleted_at: Type.Optional(Type.String()),
    app_metadata: JsonObject,
    user_metadata: JsonObject,
    identities: Type.Array(IdentitySchema),
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

export const authErrorResponses = {
  400: AuthErrorSchema,
  401: AuthErrorSchema,
  403: AuthErrorSchema,
  404: AuthErrorSchema,
  422: AuthErrorSchema,
  500: AuthErrorSchema,
};
