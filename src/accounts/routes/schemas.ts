import { type TSchema, Type } from '@sinclair/typebox';

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
