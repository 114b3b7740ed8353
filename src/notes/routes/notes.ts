import { Type } from '@sinclair/typebox';
import { HttpError } from '../../kit/errors.js';
import type { App } from '../../kit/http.js';
import { callerOf } from '../bearer-auth.js';
import type { NotesStore } from '../notes-store.js';
import { BEARER_SECURITY, Deleted, Errors, NewNote, Note, NoteIdParams } from '../schemas.js';

// Routes of the authenticated /notes scope: each acts as the caller, and the
// store's row-level security keeps every user to their own rows.

const noteNotFound = () => new HttpError(404, 'Note not found');
const BIGINT_MAX = 9_223_372_036_854_775_807n;

// Every route behind the bearer check can also answer these.
const authFailures = { 401: Errors.noToken, 503: Errors.unavailable };

export async function notesRoutes(app: App, store: NotesStore): Promise<void> {
  app.get(
    '/',
    {
      schema: {
        tags: ['notes'],
        security: BEARER_SECURITY,
        summary: "The caller's notes, newest first",
        response: { 200: Type.Array(Note), ...authFailures, 500: Errors.storeFailed },
      },
    },
    async (request) => store.list(callerOf(request).accessToken),
  );

  app.post(
    '/',
    {
      schema: {
        tags: ['notes'],
        security: BEARER_SECURITY,
        summary: 'Create a note owned by the caller',
        body: NewNote,
        response: { 201: Note, 400: Errors.invalid('body/title must NOT have fewer than 1 characters'), 413: Errors.tooLarge, 415: Errors.mediaType, ...authFailures, 500: Errors.storeFailed },
      },
    },
    async (request, reply) => reply.code(201).send(await store.create(callerOf(request).accessToken, request.body)),
  );

  app.delete(
    '/:id',
    {
      // A malformed id cannot name a note, so it gets the same 404 as a missing
      // one, answered here without asking the store.
      attachValidation: true,
      schema: {
        tags: ['notes'],
        security: BEARER_SECURITY,
        summary: "Delete one of the caller's notes",
        params: NoteIdParams,
        response: { 200: Deleted, 404: Errors.notFound, ...authFailures, 500: Errors.storeFailed },
      },
    },
    async (request) => {
      if (request.validationError) throw noteNotFound();
      const id = BigInt(request.params.id);
      if (id > BIGINT_MAX) throw noteNotFound();
      // Another user's note and a missing one look the same: RLS leaves nothing to delete.
      const deleted = await store.delete(callerOf(request).accessToken, id.toString());
      if (deleted.length === 0) throw noteNotFound();
      return { message: 'Note deleted' as const };
    },
  );
}
