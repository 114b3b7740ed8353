// Which columns of public.notes a signed-in user may write through the REST API: title and body
// only. id, user_id and created_at are the store's (identity, auth.uid() default, now()), so a
// client can neither backdate a note nor rewrite its owner or id, whatever RLS would say.
// Driven with supabase-js as any third-party client would, against the real idp and PostgreSQL.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createUser, sharedIdp } from './helpers/idp.js';
import { userClient } from './helpers/supabase.js';

let alice: Awaited<ReturnType<typeof createUser>>;

const ctx = sharedIdp({}, async () => {
  alice = await createUser(ctx.idp, `grants-${Date.now()}@example.com`);
});

const NO_GRANT = 'permission denied for table notes';
const noteCount = async () => (await ctx.db.query('SELECT count(*)::int AS n FROM public.notes')).rows[0].n as number;
const stored = async (id: number) =>
  (await ctx.db.query('SELECT id, user_id, title, body, created_at FROM public.notes WHERE id = $1', [id])).rows[0] as
    | { id: number; user_id: string; title: string; body: string | null; created_at: Date }
    | undefined;

describe('notes: the columns a user may write', () => {
  test('insert and update of title and body work, and the store fills id, user_id and created_at', async () => {
    const asAlice = userClient(ctx.idp, alice.token);
    const before = Date.now();
    const created = await asAlice.from('notes').insert({ title: 'first', body: 'draft' }).select().single();
    assert.equal(created.error, null);
    assert.equal(created.status, 201);
    assert.equal(created.data.user_id, alice.id);
    assert.ok(Math.abs(new Date(created.data.created_at).getTime() - before) < 60_000, "created_at is the store's now()");

    const updated = await asAlice.from('notes').update({ title: 'second', body: null }).eq('id', created.data.id).select().single();
    assert.equal(updated.error, null);
    assert.equal(updated.status, 200);
    assert.equal(updated.data.title, 'second');
    assert.equal(updated.data.body, null);
    assert.equal(updated.data.created_at, created.data.created_at);
  });

  test('an insert naming created_at or user_id is refused with 403 42501, and nothing is stored', async () => {
    const asAlice = userClient(ctx.idp, alice.token);
    const count = await noteCount();
    for (const forged of [{ created_at: '2000-01-01T00:00:00Z' }, { user_id: alice.id }]) {
      const res = await asAlice
        .from('notes')
        .insert({ title: 'backdated', ...forged })
        .select()
        .single();
      assert.equal(res.status, 403, JSON.stringify(forged));
      assert.equal(res.error?.code, '42501');
      assert.equal(res.error?.message, NO_GRANT);
      assert.equal(res.data, null);
    }
    assert.equal(await noteCount(), count, 'nothing inserted');
  });

  test('an update of created_at, user_id or id is refused with 403 42501, and the note is unchanged', async () => {
    const asAlice = userClient(ctx.idp, alice.token);
    const created = await asAlice.from('notes').insert({ title: 'keep me' }).select().single();
    assert.equal(created.error, null);
    const original = await stored(created.data.id);
    const other = await createUser(ctx.idp, `grants-other-${Date.now()}@example.com`);
    const changes: Array<Record<string, string>> = [
      { created_at: '2000-01-01T00:00:00Z' },
      { user_id: alice.id },
      { user_id: other.id },
      { title: 'x', created_at: '2000-01-01T00:00:00Z' },
    ];
    for (const change of changes) {
      const res: { status: number; error: { code: string; message: string } | null } = await asAlice
        .from('notes')
        .update(change)
        .eq('id', created.data.id)
        .select();
      assert.equal(res.status, 403, JSON.stringify(change));
      assert.equal(res.error?.code, '42501');
      assert.equal(res.error?.message, NO_GRANT);
    }
    // id is GENERATED ALWAYS: PostgreSQL's rewriter refuses it before any privilege check.
    const id = await asAlice.from('notes').update({ id: 1 }).eq('id', created.data.id).select();
    assert.equal(id.status, 400);
    assert.equal(id.error?.code, '428C9');
    assert.deepEqual(await stored(created.data.id), original);
  });

  test('service_role keeps every column (it is the administrator)', async () => {
    const res = await fetch(`${ctx.idp.url}/rest/v1/notes`, {
      method: 'POST',
      headers: { apikey: ctx.idp.secretKey, 'content-type': 'application/json', prefer: 'return=representation' },
      body: JSON.stringify({ title: 'imported', user_id: alice.id, created_at: '2020-05-01T00:00:00Z' }),
    });
    assert.equal(res.status, 201);
    const [row] = (await res.json()) as Array<{ created_at: string }>;
    assert.equal(new Date(row!.created_at).toISOString(), '2020-05-01T00:00:00.000Z');
  });
});
