import { Type } from '@sinclair/typebox';
import { type ApiDocument, described } from '../kit/http/openapi.js';

/** The tags and security scheme of the notes OpenAPI document. */
export const NOTES_DOCUMENT: ApiDocument = {
  tags: [
    { name: 'auth', description: 'Sign-up and login, forwarded to the identity provider' },
    { name: 'notes', description: "The caller's own notes: needs the access token from /auth/login" },
    {
      name: 'browser session',
      description:
        'What the web app uses instead of login and refresh: the refresh token in an HttpOnly cookie, CSRF-protected by a header',
    },
  ],
  securitySchemes: {
    bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'The access_token from POST /auth/login' },
  },
};

/** Routes that need the caller's access token. */
export const BEARER_SECURITY = [{ bearerAuth: [] }];

/** Every error: one field, message. */
export const ErrorMessage = Type.Object({ message: Type.String() });

/** The error answers with the meaning they have on the notes routes. */
export const Errors = {
  invalid: (message: string) => described(ErrorMessage, 'A field breaks its rule, or the body is not valid JSON', { message }),
  noToken: described(ErrorMessage, 'No bearer token, or one that is not valid or has expired', { message: 'Missing bearer token' }),
  notFound: described(ErrorMessage, "No note of the caller's has this id (another user's note looks the same)", {
    message: 'Note not found',
  }),
  rateLimited: described(ErrorMessage, "The identity provider's limit for this client was reached (Retry-After)", {
    message: 'Too many attempts, try again in 60 seconds',
  }),
  storeFailed: described(ErrorMessage, "The note store refused the request; the store's own message", {
    message: 'permission denied for table notes',
  }),
  unavailable: described(ErrorMessage, 'The identity provider is unreachable or failing (Retry-After)', {
    message: 'Service temporarily unavailable, try again shortly',
  }),
};

/** The body of POST /auth/register and /auth/login (the Credentials they carry are in identity.ts). */
export const CredentialsBody = Type.Object(
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

/** POST /auth/password-reset. */
export const PasswordResetRequest = Type.Object({ email: Type.String({ minLength: 1, maxLength: 255 }) }, { additionalProperties: false });

/** POST /auth/verify: a mailed link's token hash and kind. */
export const VerifyLinkRequest = Type.Object(
  {
    token_hash: Type.String({ minLength: 1, maxLength: 128, pattern: '^[0-9a-fA-F-]+$' }),
    type: Type.Union([Type.Literal('recovery'), Type.Literal('signup')]),
  },
  { additionalProperties: false },
);

/** The session a verified link starts, without its refresh token: it serves one step in one page. */
export const LinkSession = Type.Object({
  access_token: Type.String(),
  expires_at: Type.Integer({ description: 'Unix time in seconds when access_token expires' }),
});

/** POST /auth/password. */
export const NewPassword = Type.Object({ password: Type.String({ minLength: 1, maxLength: 1024 }) }, { additionalProperties: false });

/** POST /auth/refresh. */
export const RefreshRequest = Type.Object({ refresh_token: Type.String({ minLength: 1 }) }, { additionalProperties: false });

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
  updated_at: Type.String({ format: 'date-time', description: 'When the note was last changed (created_at until then); set by the store' }),
});

/** PATCH /notes/:id: title and/or body, each with the rules of a new note. */
export const NoteChanges = Type.Object(
  {
    title: Type.Optional(Type.String({ minLength: 1, maxLength: TITLE_MAX })),
    body: Type.Optional(Type.String({ maxLength: BODY_MAX })),
  },
  // As for a new note, anything else (user_id, created_at, …) is dropped: only these two change.
  { additionalProperties: false },
);

export const PAGE_MAX = 100;
export const SEARCH_MAX = 200;

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: PAGE_MAX,
        description: `At most this many notes (1-${PAGE_MAX}; ${PAGE_MAX} when offset or q is given without it)`,
      }),
    ),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'Skip this many notes first' })),
    q: Type.Optional(
      Type.String({
        maxLength: SEARCH_MAX,
        description: 'Only notes whose title or body contains this text, ignoring case (an empty q is no filter)',
      }),
    ),
  },
  { additionalProperties: false },
);

/** A PostgreSQL bigint written in decimal without sign; the range is checked separately. */
export const NOTE_ID_PATTERN = '^[0-9]{1,19}$';
export const NoteIdParams = Type.Object({ id: Type.String({ pattern: NOTE_ID_PATTERN, description: 'The note id (a positive integer)' }) });

export const Deleted = Type.Object({ message: Type.Literal('Note deleted') });
