// PostgREST features beyond plain filters, through the real supabase-js against the real idp (and raw
// HTTP where supabase-js cannot say it): or/and logic trees, like/ilike, counts, upserts,
// max-affected, Prefer handling, the JWT clock skew and errors' exact words.
import assert from 'node:assert/strict';
import { createPrivateKey } from 'node:crypto';
import { beforeEach, describe, test } from 'node:test';
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { withLowSSignature } from '../src/kit/jws.js';
import { createUser, TEST_SIGNING_KEY, sharedIdp } from './helpers/idp.js';
import { serviceClient, userClient } from './helpers/supabase.js';
import { idpRequest, type JsonReply } from './helpers/http.js';

const ctx = sharedIdp({}, async () => {
  await ctx.db.query(`
    create table public.words (
      id int primary key, word text not null, note text, code text unique, hits int not null default 0);
    grant select, insert, update, delete on public.words to service_role;`);
});
beforeEach(async () => {
  await ctx.db.query(`truncate public.words;
    insert into public.words (id, word, note, code) values
      (1, 'Apple', 'red fruit', 'a'), (2, 'banana', '50% yellow', 'b'), (3, 'cherry', 'small, red', 'c'),
      (4, 'date', 'a_b (dried)', 'd'), (5, 'elderberry', null, 'e'), (6, 'fig*', 'star', 'f')`);
});

const words = () => serviceClient(ctx.idp).from('words');
const ids = (data: unknown) => (data as Array<{ id: number }>).map((r) => r.id);
const rest = (method: string, path: string, opts: Parameters<typeof idpRequest>[3] = {}) =>
  idpRequest(ctx.idp, method, `/rest/v1/${path}`, { apikey: ctx.idp.secretKey, ...opts });
// supabase-js offers maxAffected() only when the database type declares PostgREST 13; the idp is untyped here.
const strict = <Q>(query: Q, rows: number): Q => (query as unknown as { maxAffected(n: number): Q }).maxAffected(rows);
const count = async () => (await ctx.db.query('select count(*)::int as n from public.words')).rows[0].n as number;

function assertRestError(
  res: JsonReply,
  status: number,
  body: { code: string; message: string; details?: string | null; hint?: string | null },
) {
  assert.equal(res.status, status, res.text);
  assert.deepEqual(res.body, { details: null, hint: null, ...body });
}

describe('like and ilike', () => {
  test('`*` stands for `%`; like is case-sensitive, ilike is not', async () => {
    assert.deepEqual(ids((await words().select('id').ilike('word', 'a*').order('id')).data), [1]);
    assert.deepEqual(ids((await words().select('id').like('word', 'a*').order('id')).data), []);
    assert.deepEqual(ids((await words().select('id').like('word', '*rr*').order('id')).data), [3, 5]);
    // `%` written directly works too (supabase-js users often write it).
    assert.deepEqual(ids((await words().select('id').ilike('word', '%PP%')).data), [1]);
    assert.deepEqual(ids((await words().select('id').not('word', 'ilike', '*e*').order('id')).data), [2, 6]);
  });

  test('`_`, `%` and `\\` keep their LIKE meaning; a literal `*` cannot be matched', async () => {
    assert.deepEqual(ids((await words().select('id').like('note', '*\\%*')).data), [2]);
    assert.deepEqual(ids((await words().select('id').like('note', 'a\\_b*')).data), [4]);
    assert.deepEqual(ids((await words().select('id').like('word', 'd_te')).data), [4]);
    // `fig\*` is `fig\%` once `*` is read: a literal `%`, which `fig*` does not contain.
    assert.deepEqual(ids((await words().select('id').like('word', 'fig\\*')).data), []);
  });

  test('on a column without LIKE: 404 42883 as PostgREST (the operator does not exist)', async () => {
    const res = await rest('GET', 'words?hits=like.1*');
    assert.equal(res.status, 404, res.text);
    assert.equal((res.body as { code: string }).code, '42883');
  });
});

describe('or and and', () => {
  test('supabase-js .or(), with and() nested and not. inside', async () => {
    assert.deepEqual(ids((await words().select('id').or('id.eq.1,word.eq.date').order('id')).data), [1, 4]);
    assert.deepEqual(ids((await words().select('id').or('id.gt.4,and(id.gte.2,id.lte.3)').order('id')).data), [2, 3, 5, 6]);
    assert.deepEqual(ids((await words().select('id').or('note.is.null,id.not.in.(1,2,3,4,5)').order('id')).data), [5, 6]);
    assert.deepEqual(ids((await words().select('id').or('word.ilike.*an*,note.ilike.*RED*').order('id')).data), [1, 2, 3]);
    // Combined with plain filters: every one applies.
    assert.deepEqual(ids((await words().select('id').or('id.eq.1,id.eq.2,id.eq.3').neq('id', 2).order('id')).data), [1, 3]);
  });

  test('quoted values keep , ( ) and " and \\ inside', async () => {
    assert.deepEqual(ids((await words().select('id').or('note.eq."small, red",id.eq.99')).data), [3]);
    assert.deepEqual(ids((await words().select('id').or('note.ilike."*(dried)*"')).data), [4]);
    assert.deepEqual(ids((await words().select('id').or('note.ilike."*50\\\\%*"')).data), [2]);
    assert.deepEqual(ids((await words().select('id').or('code.in.("a","c"),id.eq.6').order('id')).data), [1, 3, 6]);
  });

  test('and=, not.or=, not.and= as query parameters', async () => {
    const q = async (query: string) => ids((await rest('GET', `words?select=id&order=id&${query}`)).body);
    assert.deepEqual(await q('and=(id.gte.2,id.lte.4)'), [2, 3, 4]);
    assert.deepEqual(await q('not.or=(id.eq.1,id.eq.2)'), [3, 4, 5, 6]);
    assert.deepEqual(await q('not.and=(id.gte.2,id.lte.5)'), [1, 6]);
    assert.deepEqual(await q('or=(id.eq.1,not.and(id.gt.1,id.lt.6))'), [1, 6]);
    assert.deepEqual(await q(`or=${encodeURIComponent('( id.eq.1 , id.eq.2 )')}`), [1, 2]);
  });

  test('PATCH and DELETE take them too', async () => {
    const { data } = await words().update({ hits: 1 }).or('id.eq.1,id.eq.2').select('id');
    assert.deepEqual(ids(data).sort(), [1, 2]);
    const deleted = await words().delete().or('word.like.c*,word.like.d*').select('id');
    assert.deepEqual(ids(deleted.data).sort(), [3, 4]);
    assert.equal(await count(), 4);
  });

  test('malformed trees: 400 PGRST100; an unknown column: 42703; values are parameters, never SQL', async () => {
    for (const bad of [
      'or=()',
      'or=(id.eq.1',
      'or=id.eq.1',
      'or=(id.eqq.1)',
      'or=(id)',
      'or=(id.in.1,2)',
      'or=(xor(id.eq.1))',
      'or=(id.eq.1))',
    ]) {
      const res = await rest('GET', `words?${bad}`);
      assert.equal(res.status, 400, `${bad}: ${res.text}`);
      assert.equal((res.body as { code: string }).code, 'PGRST100', bad);
      assert.match((res.body as { message: string }).message, /^"failed to parse logic tree/);
    }
    const unknown = await rest('GET', 'words?or=(nope.eq.1,id.eq.2)');
    assertRestError(unknown, 400, { code: '42703', message: 'column words.nope does not exist' });
    const injection = await words().select('id').or(`word.eq.x'; drop table public.words; --,id.eq.1`);
    assert.deepEqual(ids(injection.data), [1]);
    assert.equal(await count(), 6);
  });
});

describe('counts', () => {
  test('supabase-js { count: "exact" }: the total beside a page, Content-Range 0-1/6 and */0', async () => {
    const page = await words().select('id', { count: 'exact' }).order('id').range(0, 1);
    assert.equal(page.count, 6);
    assert.equal(page.status, 206);
    assert.deepEqual(ids(page.data), [1, 2]);
    const filtered = await words().select('id', { count: 'exact' }).or('id.eq.1,id.eq.3');
    assert.equal(filtered.count, 2);
    const head = await words().select('*', { count: 'exact', head: true }).ilike('word', '*e*');
    assert.equal(head.count, 4);
    assert.equal(head.data, null);
    const none = await rest('GET', 'words?id=eq.99', { headers: { prefer: 'count=exact' } });
    assert.equal(none.headers.get('content-range'), '*/0');
    const some = await rest('GET', 'words?order=id&limit=2', {
      headers: { prefer: 'count=exact, return=representation, handling=lenient' },
    });
    assert.equal(some.headers.get('content-range'), '0-1/6');
    // A read reports what a read applies.
    assert.equal(some.headers.get('preference-applied'), 'count=exact, handling=lenient');
    assert.equal((await rest('GET', 'words?order=id')).headers.get('preference-applied'), null);
  });

  test('an offset past the counted rows is 416 PGRST103, as PostgREST; at the end, or without a count, an empty page', async () => {
    const past = await rest('GET', 'words?order=id&offset=7', { headers: { prefer: 'count=exact' } });
    assertRestError(past, 416, {
      code: 'PGRST103',
      message: 'Requested range not satisfiable',
      details: 'An offset of 7 was requested, but there are only 6 rows.',
    });
    assert.equal(past.headers.get('content-range'), '*/6');
    const viaJs = await words().select('id', { count: 'exact' }).order('id').range(10, 11);
    assert.equal(viaJs.status, 416);
    assert.equal(viaJs.error?.code, 'PGRST103');
    const atEnd = await rest('GET', 'words?order=id&offset=6', { headers: { prefer: 'count=exact' } });
    assert.equal(atEnd.status, 206);
    assert.deepEqual(atEnd.body, []);
    assert.equal(atEnd.headers.get('content-range'), '*/6');
    const uncounted = await rest('GET', 'words?order=id&offset=7');
    assert.equal(uncounted.status, 200);
    assert.deepEqual(uncounted.body, []);
  });
});

describe('upserts', () => {
  test('merge-duplicates on the primary key: inserts new rows and updates the columns sent', async () => {
    const { data, error, status } = await words()
      .upsert([
        { id: 1, word: 'apricot' },
        { id: 7, word: 'grape' },
      ])
      .select('id, word, note');
    assert.equal(error, null);
    assert.equal(status, 201);
    assert.deepEqual(data, [
      { id: 1, word: 'apricot', note: 'red fruit' },
      { id: 7, word: 'grape', note: null },
    ]);
    assert.equal(await count(), 7);
  });

  test('ignore-duplicates keeps the existing row and answers only the inserted ones', async () => {
    const { data, error } = await words()
      .upsert(
        [
          { id: 1, word: 'apricot' },
          { id: 8, word: 'kiwi' },
        ],
        { ignoreDuplicates: true },
      )
      .select('id, word');
    assert.equal(error, null);
    assert.deepEqual(data, [{ id: 8, word: 'kiwi' }]);
    assert.equal((await ctx.db.query('select word from public.words where id = 1')).rows[0].word, 'Apple');
  });

  test('on_conflict names another unique column; one without a unique constraint is refused', async () => {
    const { data, error } = await words().upsert({ id: 9, word: 'avocado', code: 'a' }, { onConflict: 'code' }).select('id, word, code');
    assert.equal(error, null);
    // The row with code 'a' is updated, its id included (id was sent).
    assert.deepEqual(data, [{ id: 9, word: 'avocado', code: 'a' }]);
    assert.equal(await count(), 6);
    const bad = await words().upsert({ id: 10, word: 'x' }, { onConflict: 'word' });
    assert.equal(bad.status, 400);
    assert.equal(bad.error?.code, '42P10');
    const unknown = await words().upsert({ id: 10, word: 'x' }, { onConflict: 'nope' });
    assert.equal(unknown.error?.code, '42703');
    assert.equal(await count(), 6);
  });

  test('without resolution a duplicate is still 409 23505; Preference-Applied names the resolution', async () => {
    const dup = await words().insert({ id: 1, word: 'again' });
    assert.equal(dup.status, 409);
    assert.equal(dup.error?.code, '23505');
    const res = await rest('POST', 'words', {
      headers: { prefer: 'resolution=merge-duplicates,return=minimal' },
      body: { id: 2, word: 'Banana' },
    });
    // Every row already existed and was merged: PostgREST answers 200 (Response.hs: 201 only when
    // pgrst.inserted counted a new row).
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('preference-applied'), 'resolution=merge-duplicates, return=minimal');
  });

  test("as a user, row-level security still decides: an upsert cannot take over another user's note", async () => {
    const alice = await createUser(ctx.idp, 'upsert-alice@example.com');
    const bob = await createUser(ctx.idp, 'upsert-bob@example.com');
    const { rows } = await ctx.db.query(`insert into public.notes (user_id, title) values ($1, 'alice') returning id`, [alice.id]);
    // id is the store's: naming it is refused before any conflict is looked at.
    const takeover = await userClient(ctx.idp, bob.token).from('notes').upsert({ id: rows[0].id, title: 'bob' });
    assert.ok(takeover.error);
    assert.equal((await ctx.db.query('select title from public.notes where id = $1', [rows[0].id])).rows[0].title, 'alice');
  });
});

describe('max-affected (handling=strict)', () => {
  test('supabase-js .maxAffected(): within the limit it applies; beyond it 400 PGRST124 and nothing changed', async () => {
    const ok = await strict(words().update({ hits: 5 }).lte('id', 2), 2).select('id');
    assert.equal(ok.error, null);
    assert.deepEqual(ids(ok.data).sort(), [1, 2]);

    const tooMany = await strict(words().update({ hits: 9 }).lte('id', 3), 2);
    assert.equal(tooMany.status, 400);
    assert.deepEqual(tooMany.error, {
      code: 'PGRST124',
      details: 'The query affects 3 rows',
      hint: null,
      message: 'Query result exceeds max-affected preference constraint',
    });
    assert.equal((await ctx.db.query('select count(*)::int as n from public.words where hits = 9')).rows[0].n, 0);

    const del = await strict(words().delete().gte('id', 1), 5);
    assert.equal(del.error?.code, 'PGRST124');
    assert.equal(await count(), 6);
  });

  test('without handling=strict it is ignored, as PostgREST ignores it', async () => {
    const res = await rest('DELETE', 'words?id=lte.3', { headers: { prefer: 'max-affected=1' } });
    assert.equal(res.status, 204);
    assert.equal(await count(), 3);
  });

  test('Preference-Applied lists handling=strict and max-affected', async () => {
    const res = await rest('PATCH', 'words?id=eq.1', { headers: { prefer: 'handling=strict, max-affected=1' }, body: { hits: 1 } });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('preference-applied'), 'handling=strict, max-affected=1');
  });
});

describe('Prefer handling', () => {
  test('handling=strict with an unknown or unsupported preference: 400 PGRST122, nothing changed', async () => {
    const res = await rest('GET', 'words', { headers: { prefer: 'handling=strict, foo, bar' } });
    assertRestError(res, 400, {
      code: 'PGRST122',
      message: 'Invalid preferences given with handling=strict',
      details: 'Invalid preferences: foo, bar',
    });
    for (const unsupported of ['return=headers-only', 'timezone=UTC', 'Return=Minimal']) {
      const write = await rest('DELETE', 'words?id=eq.1', { headers: { prefer: `handling=strict,${unsupported}` } });
      assertRestError(write, 400, {
        code: 'PGRST122',
        message: 'Invalid preferences given with handling=strict',
        details: `Invalid preferences: ${unsupported}`,
      });
    }
    assert.equal(await count(), 6);
  });

  test('lenient (the default, or said): unknown preferences are ignored and not applied', async () => {
    for (const prefer of ['foo, return=representation', 'handling=lenient, foo, return=representation']) {
      const res = await rest('PATCH', 'words?id=eq.1&select=id', { headers: { prefer }, body: { hits: 2 } });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, [{ id: 1 }]);
      assert.doesNotMatch(res.headers.get('preference-applied') ?? '', /foo/);
    }
  });

  test('tx=commit and tx=rollback are accepted and ignored (PostgREST without db-tx-end overrides)', async () => {
    const res = await rest('DELETE', 'words?id=eq.1', { headers: { prefer: 'handling=strict, tx=rollback' } });
    assert.equal(res.status, 204);
    assert.equal(await count(), 5);
  });

  test('the first of a kind wins, as in PostgREST', async () => {
    const res = await rest('PATCH', 'words?id=eq.1&select=id', {
      headers: { prefer: 'return=representation, return=minimal' },
      body: { hits: 3 },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, [{ id: 1 }]);
  });
});

describe("errors in PostgREST's words", () => {
  test('an unknown table: 404 PGRST205, with a hint naming a near miss (and none when nothing is close)', async () => {
    const near = await userClient(ctx.idp).from('note').select('*');
    assert.equal(near.status, 404);
    assert.deepEqual(near.error, {
      code: 'PGRST205',
      details: null,
      hint: "Perhaps you meant the table 'public.notes'",
      message: "Could not find the table 'public.note' in the schema cache",
    });
    const far = await rest('GET', 'zzzzzz');
    assertRestError(far, 404, { code: 'PGRST205', message: "Could not find the table 'public.zzzzzz' in the schema cache" });
    const typo = await rest('GET', 'wrods');
    assert.equal(
      (typo.body as { hint: string | null }).hint,
      null,
      'two swapped letters of five are 60% similar: below the 75% PostgREST asks',
    );
    const longer = await rest('GET', 'wordss');
    assert.equal((longer.body as { hint: string | null }).hint, "Perhaps you meant the table 'public.words'");
  });

  test('a bad signature: 401 PGRST301 as PostgREST words it, with WWW-Authenticate', async () => {
    const user = await createUser(ctx.idp, 'sig@example.com');
    const [h, p, s] = user.token.split('.') as [string, string, string];
    const flipped = `${h}.${p}.${s[0] === 'A' ? 'B' : 'A'}${s.slice(1)}`;
    const res = await idpRequest(ctx.idp, 'GET', '/rest/v1/notes', { token: flipped });
    assertRestError(res, 401, {
      code: 'PGRST301',
      message: 'No suitable key or wrong key type',
      details: 'None of the keys was able to decode the JWT',
    });
    assert.equal(
      res.headers.get('www-authenticate'),
      'Bearer error="invalid_token", error_description="No suitable key or wrong key type"',
    );
    const two = await idpRequest(ctx.idp, 'GET', '/rest/v1/notes', { token: `${h}.${p}` });
    assertRestError(two, 401, { code: 'PGRST301', message: 'Expected 3 parts in JWT; got 2' });
  });
});

describe('JWT clock skew', () => {
  const key = createPrivateKey(TEST_SIGNING_KEY);
  async function tokenWith(claims: Record<string, unknown>, base: string): Promise<string> {
    const header = decodeProtectedHeader(base);
    return withLowSSignature(
      await new SignJWT({ ...decodeJwt(base), ...claims })
        .setProtectedHeader({ alg: 'ES256', kid: header.kid as string, typ: 'JWT' })
        .sign(key),
    );
  }

  test('REST accepts a token up to 30 s past exp, as PostgREST does; Auth does not', async () => {
    const user = await createUser(ctx.idp, 'skew@example.com');
    const now = Math.floor(Date.now() / 1000);
    const justExpired = await tokenWith({ exp: now - 20 }, user.token);
    assert.equal((await idpRequest(ctx.idp, 'GET', '/rest/v1/notes', { token: justExpired })).status, 200);
    assert.equal((await idpRequest(ctx.idp, 'GET', '/auth/v1/user', { token: justExpired })).status, 403);
    const longExpired = await tokenWith({ exp: now - 40 }, user.token);
    assertRestError(await idpRequest(ctx.idp, 'GET', '/rest/v1/notes', { token: longExpired }), 401, {
      code: 'PGRST303',
      message: 'JWT expired',
    });
  });
});
