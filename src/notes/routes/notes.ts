import { Type } from '@sinclair/typebox';
import { described } from '../../kit/http/openapi.js';
import { HttpError } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { callers, installBearerAuth } from '../bearer-auth.js';
import type { NotesStore } from '../notes-store.js';
import type { TokenVerifier } from '../token-verifier.js';
import { BEARER_SECURITY, Deleted, Errors, ListQuery, NewNote, Note, NoteChanges, NoteIdParams, PAGE_MAX } from '../schemas.js';

// Routes of the authenticated /notes scope: each acts as the caller, and the
// store's row-level security keeps every user to their own rows.

const noteNotFound = () => new HttpError(404, 'Note not found');
const BIGINT_MAX = 9_223_372_036_854_775_807n;

// Every route behind the bearer check can also answer these.
const authFailures = { 401: Errors.noToken, 503: Errors.unavailable };

export async function notesRoutes(app: App, { store, verifyToken }: { store: NotesStore; verifyToken: TokenVerifier }): Promise<void> {
  installBearerAuth(app, verifyToken);
  app.get(
    '/',
    {
      schema: {
        tags: ['notes'],
        security: BEARER_SECURITY,
        summary: "The caller's notes, newest first",
        description:
          'Bare, every note. With limit, offset or q, one page of them (limit defaults to ' +
          `${PAGE_MAX}), only those whose title or body contains q (ignoring case). X-Total-Count: how many notes match in all.`,
        querystring: ListQuery,
        response: {
          200: described(Type.Array(Note), 'The notes (X-Total-Count: how many match in all)'),
          400: Errors.invalid('querystring/limit must be <= 100'),
          ...authFailures,
          500: Errors.storeFailed,
        },
      },
    },
    async (request, reply) => {
      const { limit, offset } = request.query;
      // An empty q is no filter; PostgreSQL text cannot hold U+0000, so such a search would fail in the store.
      const q = request.query.q === '' ? undefined : request.query.q;
      if (q?.includes('\u0000')) throw new HttpError(400, 'querystring/q must not contain U+0000');
      const { accessToken } = callers.get(request);
      if (limit === undefined && offset === undefined && q === undefined) {
        const notes = await store.list(accessToken);
        return reply.header('x-total-count', String(notes.length)).send(notes);
      }
      const page = await store.listPage(accessToken, { limit: limit ?? PAGE_MAX, offset: offset ?? 0, q });
      return reply.header('x-total-count', String(page.total)).send(page.notes);
    },
  );

  app.post(
    '/',
    {
      schema: {
        tags: ['notes'],
        security: BEARER_SECURITY,
        summary: 'Create a note owned by the caller',
        body: NewNote,
        response: {
          201: Note,
          400: Errors.invalid('body/title must NOT have fewer than 1 characters'),
          ...authFailures,
          500: Errors.storeFailed,
        },
      },
    },
    async (request, reply) => reply.code(201).send(await store.create(callers.get(request).accessToken, request.body)),
  );

  app.patch(
    '/:id',
    {
      attachValidation: true,
      schema: {
        tags: ['notes'],
        security: BEARER_SECURITY,
        summary: "Change the title and/or body of one of the caller's notes",
        description: 'At least one of title and body, each with the rules of a new note; updated_at is set by the store.',
        params: NoteIdParams,
        body: NoteChanges,
        response: {
          200: Note,
          400: Errors.invalid('body must contain at least one of title, body'),
          404: Errors.notFound,
          ...authFailures,
          500: Errors.storeFailed,
        },
      },
    },
    async (request) => {
      const id = noteId(request);
      const changes = request.body;
      if (changes.title === undefined && changes.body === undefined)
        throw new HttpError(400, 'body must contain at least one of title, body');
      // Another user's note and a missing one look the same: RLS leaves nothing to update.
      const updated = await store.update(callers.get(request).accessToken, id, changes);
      if (updated.length === 0) throw noteNotFound();
      return updated[0]!;
    },
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
      // Another user's note and a missing one look the same: RLS leaves nothing to delete.
      const deleted = await store.delete(callers.get(request).accessToken, noteId(request));
      if (deleted.length === 0) throw noteNotFound();
      return { message: 'Note deleted' as const };
    },
  );
}

/**
 * The note id of the path as decimal text. A malformed or out-of-range id cannot name a note, so it
 * is the same 404 as a missing one, answered without asking the store. On PATCH a body that breaks
 * its rules is a 400, but only for an id that could name a note.
 */
function noteId(request: {
  validationError?: { validationContext?: string; message: string } | undefined;
  params: { id: string };
}): string {
  const error = request.validationError;
  if (error && (error.validationContext === 'params' || !/^[0-9]{1,19}$/.test(request.params.id))) throw noteNotFound();
  const id = BigInt(request.params.id);
  if (id > BIGINT_MAX) throw noteNotFound();
  if (error) throw new HttpError(400, error.message);
  return id.toString();
}
