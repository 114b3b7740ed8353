import { asCaller, type IdpClients } from './idp-clients.js';
import { restFailure } from './idp-errors.js';

// The only place that touches the notes table. Every call goes through the
// provider's REST API as the caller (publishable key + their token), so the
// database's row-level security decides what they see: there is no user_id
// filter here, and user_id is never sent.

export interface Note {
  id: number;
  user_id: string;
  title: string;
  body: string | null;
  created_at: string;
  updated_at: string;
}

export interface NewNote {
  title: string;
  body?: string | undefined;
}

export interface NoteChanges {
  title?: string | undefined;
  body?: string | undefined;
}

/** A page of the list: `limit` notes from `offset` on, only those matching `q` when given. */
export interface ListPage {
  limit: number;
  offset: number;
  q?: string | undefined;
}

export interface NotesStore {
  /** The caller's notes, newest first; ties on created_at broken by id so the order is stable. */
  list(accessToken: string): Promise<Note[]>;
  /** One page of list's order, and how many notes match in all. */
  listPage(accessToken: string, page: ListPage): Promise<{ notes: Note[]; total: number }>;
  create(accessToken: string, note: NewNote): Promise<Note>;
  /** The updated rows; empty when the id is missing or not the caller's (RLS hides it). */
  update(accessToken: string, id: string, changes: NoteChanges): Promise<Note[]>;
  /** The deleted rows; empty when the id is missing or not the caller's (RLS hides it). */
  delete(accessToken: string, id: string): Promise<Note[]>;
}

// Retries are off: a GET would otherwise be retried three times over 7 s on a
// network error or 503. The client gets a prompt 503 and decides itself.
export function createNotesStore(clients: IdpClients): NotesStore {
  const notes = () => clients.data.from('notes');
  return {
    async list(accessToken) {
      const query = notes().select('*').order('created_at', { ascending: false }).order('id', { ascending: false });
      const { data, error, status } = await asCaller(query, accessToken).retry(false);
      if (error) throw restFailure(error, status, 500);
      return data as Note[];
    },
    async listPage(accessToken, { limit, offset, q }) {
      // One ilike per column in an or=() tree, the value double-quoted so no character of q can
      // end it or add a filter.
      const matching = <Q extends { or(filters: string): Q }>(query: Q): Q => {
        if (q === undefined) return query;
        const pattern = quoted(containing(q));
        return query.or(`title.ilike.${pattern},body.ilike.${pattern}`);
      };
      const page = matching(notes().select('*', { count: 'exact' }))
        .order('created_at', { ascending: false })
        .order('id', { ascending: false })
        .range(offset, offset + limit - 1);
      const { data, error, status, count } = await asCaller(page, accessToken).retry(false);
      // PostgREST answers an offset past the counted rows with 416 (PGRST103) rather than an
      // empty page; the caller gets the empty page, and the total from a count alone.
      if (status === 416) {
        const counted = await asCaller(matching(notes().select('*', { count: 'exact', head: true })), accessToken).retry(false);
        if (counted.error) throw restFailure(counted.error, counted.status, 500);
        return { notes: [], total: counted.count ?? 0 };
      }
      if (error) throw restFailure(error, status, 500);
      return { notes: data as Note[], total: count ?? 0 };
    },
    async update(accessToken, id, changes) {
      const row: { title?: string; body?: string } = {};
      if (changes.title !== undefined) row.title = changes.title;
      if (changes.body !== undefined) row.body = changes.body;
      const { data, error, status } = await asCaller(notes().update(row).eq('id', id).select(), accessToken).retry(false);
      if (error) throw restFailure(error, status, 400);
      return data as Note[];
    },
    async create(accessToken, note) {
      const row: { title: string; body?: string } = { title: note.title };
      if (note.body !== undefined) row.body = note.body;
      const { data, error, status } = await asCaller(notes().insert(row).select().single(), accessToken).retry(false);
      if (error) throw restFailure(error, status, 400);
      return data as Note;
    },
    async delete(accessToken, id) {
      const { data, error, status } = await asCaller(notes().delete().eq('id', id).select(), accessToken).retry(false);
      if (error) throw restFailure(error, status, 500);
      return data as Note[];
    },
  };
}

/**
 * An ilike pattern matching any text that contains `text` literally: LIKE's own `\`, `%` and `_`
 * are escaped. PostgREST reads `*` as `%` and offers no escape for it, so a `*` in `text` can only
 * be matched as "any one character" (`_`): a search for `a*b` also finds `axb`.
 */
export function containing(text: string): string {
  return `*${text.replace(/[\\%_]/g, (c) => `\\${c}`).replaceAll('*', '_')}*`;
}

/**
 * A value inside PostgREST's `or=(…)`: double-quoted, so that `,`, `(`, `)` and `.` in it cannot end
 * it or start another filter; inside the quotes a backslash escapes the next character.
 */
export function quoted(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}
