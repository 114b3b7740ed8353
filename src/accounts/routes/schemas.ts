import { type TSchema, Type } from '@sinclair/typebox';
import { type ApiDocument, described } from '../../kit/openapi.js';

/** The tags and security scheme of the accounts OpenAPI document. */
export const ACCOUNTS_DOCUMENT: ApiDocument = {
  tags: [
    { name: 'auth', description: 'Registration, login and the caller’s own account' },
    { name: 'admin', description: 'Every account: needs a token of a user with role admin' },
  ],
  securitySchemes: {
    bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'The token from POST /auth/login (HS256, 1 hour)' },
  },
};

/** Routes that need a token from POST /auth/login. */
export const BEARER_SECURITY = [{ bearerAuth: [] }];

export const ErrorEnvelope = Type.Object({
  status: Type.Integer(),
  response: Type.String(),
  message: Type.String(),
});

/** The public user: the only user shape any endpoint returns (no password hash, by construction of the serializer too). */
export const PublicUser = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    email: Type.String({ format: 'email' }),
    role: Type.Union([Type.Literal('user'), Type.Literal('admin')]),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

const error = (status: number, response: string, message: string) => ({ status, response, message });

/** The error answers with the meaning they have on every accounts route. */
export const Errors = {
  invalid: (message: string) => described(ErrorEnvelope, 'A field breaks its rule, or the body is not valid JSON', error(400, 'Bad Request', message)),
  noToken: described(ErrorEnvelope, 'No token, or one that is not valid (signature, expiry, algorithm)', error(401, 'Unauthorized', 'Access denied. No token provided.')),
  forbidden: described(ErrorEnvelope, 'The token is valid but its user is not an admin', error(403, 'Forbidden', 'You do not have permission to access this resource.')),
  tooLarge: described(ErrorEnvelope, 'Request body larger than the limit', error(413, 'Payload Too Large', 'Request body is too large')),
  mediaType: described(ErrorEnvelope, 'The body must be application/json', error(415, 'Unsupported Media Type', 'Unsupported Media Type')),
  unavailable: (why: string) => described(ErrorEnvelope, why, error(503, 'Service Unavailable', 'Service temporarily unavailable, try again shortly')),
};

export function envelope<T extends TSchema>(data: T) {
  return Type.Object({
    status: Type.Integer(),
    response: Type.String(),
    message: Type.String(),
    data,
  });
}

export const BearerHeader = {
  description: 'Needs `Authorization: Bearer <token>` from POST /auth/login.',
};
