// Per-user isolation as one data table: channel (the notes service, or the
// idp's REST API driven with supabase-js as any client could) × role × operation
// × whose note. The caller is user B; "other" notes belong to user A. Every row
// checks the outcome and that A's note is untouched when it should be.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signUp, storedNote, type TestUser, sharedNotes } from './helpers/notes.js';
import { userClient } from './helpers/supabase.js';
import { request } from './helpers/http.js';

type Channel = 'notes' | 'rest';
type Role = 'authenticated' | 'anon';
type Operation = 'select' | 'insert' | 'update' | 'delete';
type Owner = 'own' | 'other';

type Outcome =
  /** Did it, to the target note (read it, created it as the caller, changed it, removed it). */
  | { allowed: true; status: number }
  /** No error, and the target was neither seen nor changed. */
  | { hidden: true; status: number }
  /** Insert of a note "as A" that ends up owned by the caller: notes drops user_id. */
  | { ownedByCaller: true; status: number }
  /** Refused with this status (and PostgreSQL error code, for REST). */
  | { refused: true; status: number; code?: string; message?: string };

interface Row {
  channel: Channel;
  role: Role;
  op: Operation;
  owner: Owner;
  expect: Outcome;
}

const NO_GRANT = 'permission denied for table notes';

// prettier-ignore
const TABLE: Row[] = [
  // The notes service: B acting with B's token; anon sends no token.
  { channel: 'notes', role: 'authenticated', op: 'select', owner: 'own', expect: { allowed: true, status: 200 } },
  { channel: 'notes', role: 'authenticated', op: 'select', owner: 'other', expect: { hidden: true, status: 200 } },
  { channel: 'notes', role: 'anon', op: 'select', owner: 'other', expect: { refused: true, status: 401, message: 'Missing bearer token' } },
  { channel: 'notes', role: 'authenticated', op: 'insert', owner: 'own', expect: { allowed: true, status: 201 } },
  { channel: 'notes', role: 'authenticated', op: 'insert', owner: 'other', expect: { ownedByCaller: true, status: 201 } },
  { channel: 'notes', role: 'anon', op: 'insert', owner: 'other', expect: { refused: true, status: 401, message: 'Missing bearer token' } },
  // PATCH /notes/:id: the caller's own note only; another user's is the 404 of a missing one.
  { channel: 'notes', role: 'authenticated', op: 'update', owner: 'own', expect: { allowed: true, status: 200 } },
  {
    channel: 'notes',
    role: 'authenticated',
    op: 'update',
    owner: 'other',
    expect: { refused: true, status: 404, message: 'Note not found' },
  },
  { channel: 'notes', role: 'anon', op: 'update', owner: 'other', expect: { refused: true, status: 401, message: 'Missing bearer token' } },
  { channel: 'notes', role: 'authenticated', op: 'delete', owner: 'own', expect: { allowed: true, status: 200 } },
  {
    channel: 'notes',
    role: 'authenticated',
    op: 'delete',
    owner: 'other',
    expect: { refused: true, status: 404, message: 'Note not found' },
  },
  { channel: 'notes', role: 'anon', op: 'delete', owner: 'other', expect: { refused: true, status: 401, message: 'Missing bearer token' } },
  // The idp's REST API directly: publishable key plus B's token, or the publishable key alone.
  { channel: 'rest', role: 'authenticated', op: 'select', owner: 'own', expect: { allowed: true, status: 200 } },
  { channel: 'rest', role: 'authenticated', op: 'select', owner: 'other', expect: { hidden: true, status: 200 } },
  { channel: 'rest', role: 'anon', op: 'select', owner: 'other', expect: { refused: true, status: 401, code: '42501', message: NO_GRANT } },
  { channel: 'rest', role: 'authenticated', op: 'insert', owner: 'own', expect: { allowed: true, status: 201 } },
  // user_id is not a column users may write (no grant), so this is refused before RLS is asked.
  {
    channel: 'rest',
    role: 'authenticated',
    op: 'insert',
    owner: 'other',
    expect: { refused: true, status: 403, code: '42501', message: NO_GRANT },
  },
  { channel: 'rest', role: 'anon', op: 'insert', owner: 'other', expect: { refused: true, status: 401, code: '42501', message: NO_GRANT } },
  { channel: 'rest', role: 'authenticated', op: 'update', owner: 'own', expect: { allowed: true, status: 200 } },
  { channel: 'rest', role: 'authenticated', op: 'update', owner: 'other', expect: { hidden: true, status: 200 } },
  { channel: 'rest', role: 'anon', op: 'update', owner: 'other', expect: { refused: true, status: 401, code: '42501', message: NO_GRANT } },
  { channel: 'rest', role: 'authenticated', op: 'delete', owner: 'own', expect: { allowed: true, status: 200 } },
  { channel: 'rest', role: 'authenticated', op: 'delete', owner: 'other', expect: { hidden: true, status: 200 } },
  { channel: 'rest', role: 'anon', op: 'delete', owner: 'other', expect: { refused: true, status: 401, code: '42501', message: NO_GRANT } },
];

interface Observed {
  status: number;
  code?: string;
  message?: string;
  /** The operation reached the target: read it, or changed / removed it. */
  touchedTarget: boolean;
  /** For inserts: the owner of the created row. */
  insertedOwner?: string;
}

let victim: TestUser; // A
let caller: TestUser; // B
const ctx = sharedNotes({}, async () => {
  victim = await signUp(ctx.notes.url, 'victim');
  caller = await signUp(ctx.notes.url, 'caller');
});

async function attempt(row: Row, target: { id: number; title: string }): Promise<Observed> {
  const token = row.role === 'anon' ? undefined : caller.token;
  // An own note is inserted the way clients do it, without user_id (the column default is the
  // caller); a note "as A" names A's id.
  const ownerField = row.owner === 'own' ? {} : { user_id: victim.id };
  const before = await storedNote(ctx.idp, target.id);
  const changed = async () => {
    const now = await storedNote(ctx.idp, target.id);
    return JSON.stringify(now) !== JSON.stringify(before);
  };

  if (row.channel === 'notes') {
    switch (row.op) {
      case 'select': {
        const res = await request(ctx.notes.url, 'GET', '/notes', { token });
        const seen = res.status === 200 && res.body.some((n: { id: number }) => n.id === target.id);
        return { status: res.status, message: res.body?.message, touchedTarget: seen };
      }
      case 'insert': {
        const res = await request(ctx.notes.url, 'POST', '/notes', { token, body: { title: 'inserted', ...ownerField } });
        return { status: res.status, message: res.body?.message, touchedTarget: false, insertedOwner: res.body?.user_id };
      }
      case 'update': {
        const res = await request(ctx.notes.url, 'PATCH', `/notes/${target.id}`, { token, body: { title: 'changed' } });
        return { status: res.status, message: res.body?.message, touchedTarget: await changed() };
      }
      case 'delete': {
        const res = await request(ctx.notes.url, 'DELETE', `/notes/${target.id}`, { token });
        return { status: res.status, message: res.body?.message, touchedTarget: await changed() };
      }
    }
  }

  const client = userClient(ctx.idp, token);
  switch (row.op) {
    case 'select': {
      const { data, error, status } = await client.from('notes').select('*').eq('id', target.id);
      return { status, code: error?.code, message: error?.message, touchedTarget: (data ?? []).length > 0 };
    }
    case 'insert': {
      const { data, error, status } = await client
        .from('notes')
        .insert({ title: 'inserted', ...ownerField })
        .select()
        .single();
      return {
        status,
        code: error?.code,
        message: error?.message,
        touchedTarget: false,
        insertedOwner: (data as { user_id?: string } | null)?.user_id,
      };
    }
    case 'update': {
      const { error, status } = await client.from('notes').update({ title: 'changed' }).eq('id', target.id).select();
      return { status, code: error?.code, message: error?.message, touchedTarget: await changed() };
    }
    case 'delete': {
      const { error, status } = await client.from('notes').delete().eq('id', target.id).select();
      return { status, code: error?.code, message: error?.message, touchedTarget: await changed() };
    }
  }
}

test('isolation: role × operation × owner, through notes and directly against the idp REST API', async (t) => {
  for (const row of TABLE) {
    await t.test(`${row.channel}: ${row.role} ${row.op} ${row.owner} note`, async () => {
      const owner = row.owner === 'own' ? caller : victim;
      const created = await request(ctx.notes.url, 'POST', '/notes', { token: owner.token, body: { title: `target of ${row.op}` } });
      assert.equal(created.status, 201);
      const target = created.body as { id: number; title: string };

      const seen = await attempt(row, target);
      const { expect } = row;
      assert.equal(seen.status, expect.status);
      if ('allowed' in expect) {
        if (row.op === 'insert') assert.equal(seen.insertedOwner, caller.id);
        else assert.equal(seen.touchedTarget, true, 'the operation should have reached the note');
      } else {
        assert.equal(seen.touchedTarget, false, 'the note was read or changed');
        if ('ownedByCaller' in expect) assert.equal(seen.insertedOwner, caller.id);
        if ('refused' in expect) {
          if (expect.code) assert.equal(seen.code, expect.code);
          if (expect.message) assert.equal(seen.message, expect.message);
          assert.equal(seen.insertedOwner, undefined);
        }
      }
      // Whatever B or anon did, A's notes are A's and unchanged unless A's own row said so.
      if (row.owner === 'other') {
        const stored = await storedNote(ctx.idp, target.id);
        assert.ok(stored, "A's note must still exist");
        assert.equal(stored.user_id, victim.id);
        assert.equal(stored.title, target.title);
      }
    });
  }

  // Nothing was ever inserted as A by anyone else.
  const asVictim = await request(ctx.notes.url, 'GET', '/notes', { token: victim.token });
  assert.ok(asVictim.body.every((n: { title: string }) => n.title.startsWith('target of')));
});

test('anon reads nothing at all from the REST API, with or without filters', async () => {
  const anon = userClient(ctx.idp);
  const all = await anon.from('notes').select('*');
  assert.equal(all.data, null);
  assert.equal(all.error?.code, '42501');
  assert.equal(all.status, 401);
});

test("B listing through the REST API sees exactly B's notes, never A's", async () => {
  const mine = await request(ctx.notes.url, 'POST', '/notes', { token: caller.token, body: { title: 'only mine' } });
  await request(ctx.notes.url, 'POST', '/notes', { token: victim.token, body: { title: 'only A' } });
  const { data, error } = await userClient(ctx.idp, caller.token).from('notes').select('*');
  assert.equal(error, null);
  assert.ok(data!.length > 0);
  assert.ok(data!.every((n) => n.user_id === caller.id));
  assert.ok(data!.some((n) => n.id === mine.body.id));
});

test('interleaved requests of many users: each create lands under its caller, each list holds only its caller’s notes', async () => {
  // The service sends every user's queries through one shared supabase-js client, naming the
  // caller per query; requests in flight together must never borrow each other's token.
  const users = await Promise.all(Array.from({ length: 6 }, (_, i) => signUp(ctx.notes.url, `crowd${i}`)));
  const rounds = 8;
  const created = await Promise.all(
    users.flatMap((user) =>
      Array.from({ length: rounds }, async (_, r) => {
        const res = await request(ctx.notes.url, 'POST', '/notes', { token: user.token, body: { title: `${user.id} ${r}` } });
        return { user, res };
      }),
    ),
  );
  for (const { user, res } of created) {
    assert.equal(res.status, 201);
    assert.equal(res.body.user_id, user.id);
    assert.ok(res.body.title.startsWith(user.id));
  }
  const lists = await Promise.all(
    users.flatMap((user) =>
      Array.from({ length: 3 }, async () => ({ user, res: await request(ctx.notes.url, 'GET', '/notes', { token: user.token }) })),
    ),
  );
  for (const { user, res } of lists) {
    assert.equal(res.status, 200);
    assert.equal(res.body.length, rounds);
    assert.ok(res.body.every((n: { user_id: string; title: string }) => n.user_id === user.id && n.title.startsWith(user.id)));
  }
});
