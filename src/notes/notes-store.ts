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
}

export interface NewNote {
  title: string;
  body?: string | undefined;
}

export interface NotesStore {
  /** The caller's notes, newest first; ties on created_at broken by id so the order is stable. */
  list(accessToken: string): Promise<Note[]>;
  create(accessToken: string, note: NewNote): Promise<Note>;
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
