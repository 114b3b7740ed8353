import { Type } from '@sinclair/typebox';

export const ErrorMessage = Type.Object({ message: Type.String() }, { description: 'Every error: one field, message' });

export const Credentials = Type.Object(
  {
    email: Type.String({ minLength: 1 }),
    password: Type.String({ minLength: 1 }),
  },
  { additionalProperties: false },
);

export const RegisteredUser = Type.Object({
  id: Type.String({ format: 'uuid' }),
  email: Type.String(),
});

export const LoginSession = Type.Object({
  access_token: Type.String(),
  refresh_token: Type.String(),
  expires_at: Type.Integer({ description: 'Unix time in seconds when access_token expires' }),
});

export const TITLE_MAX = 200;
export const BODY_MAX = 10_000;

export const NewNote = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: TITLE_MAX }),
    body: Type.Optional(Type.String({ maxLength: BODY_MAX })),
  },
  // Anything else, user_id included, is dropped before the handler sees it: the owner
  // always comes from the caller's token.
  { additionalProperties: false },
);

export const Note = Type.Object({
  id: Type.Integer(),
  user_id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  body: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
});

/** A PostgreSQL bigint written in decimal without sign; the range is checked separately. */
export const NOTE_ID_PATTERN = '^[0-9]{1,19}$';
export const NoteIdParams = Type.Object({ id: Type.String({ pattern: NOTE_ID_PATTERN }) });

export const Deleted = Type.Object({ message: Type.Literal('Note deleted') });
