// PostgREST subset over real HTTP: select, order, limit/offset, every filter operator, Prefer,
// the object Accept type (with rollback), Content-Range, error bodies and statuses, and SQL
// injection attempts in every parameter.
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { createUser, sharedIdp } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { idpRequest, type JsonReply } from './helpers/http.js';

const ITEM_COLUMNS = ['id', 'name', 'qty', 'active', 'tag', 'owner', 'odd name'];

const ctx = sharedIdp({}, async () => {
  // Created after the idp started: found by the schema cache's refresh on miss.
  await ctx.db.query(`
    create table public.items (
      id int primary key, name text not null, qty int, active boolean, tag text unique,
      owner uuid references auth.users (id), "odd name" text);
    grant select, insert, update, delete on public.items to service_role, authenticated;
    create table public.private_things (id int primary key);
    create function public.boom() returns int language plpgsql as $$
      begin raise exception 'secret internal detail' using errcode = 'XX000'; end $$;
    create view public.broken as select public.boom() as x;
    create view public.divide as select 1 / 0 as x;
    grant select on public.broken, public.divide to service_role;
    grant execute on function public.boom() to service_role;`);
});
beforeEach(async () => {
  await ctx.db.query(`truncate public.items;
    insert into public.items (id, name, qty, active, tag) values
      (1, 'apple', 5, true, 'a'), (2, 'banana', null, false, 'b'), (3, 'cherry', 10, null, 'c,d'),
      (4, 'date', 0, true, null), (5, 'elder berry', 7, false, 'it''s')`);
});

/** A request as service_role (secret key, no user JWT). */
function rest(method: string, path: string, opts: Parameters<typeof idpRequest>[3] = {}): Promise<JsonReply> {
  return idpRequest(ctx.idp, method, `/rest/v1/${path}`, { apikey: ctx.idp.secretKey, ...opts });
}
const ids = (res: JsonReply) => (res.body as Array<{ id: number }>).map((r) => r.id);
const itemCount = async () => (await ctx.db.query('select count(*)::int as n from public.items')).rows[0].n as number;

function assertRestError(res: JsonReply, status: number, code: string, message?: string, details?: string | null) {
  assert.equal(res.status, status, res.text);
  const body = res.body as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['code', 'details', 'hint', 'message'], 'all four keys');
  assert.equal(body.code, code);
  if (message !== undefined) assert.equal(body.message, message);
  if (details !== undefined) assert.equal(body.details, details);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
}

describe('select, order, limit and offset', () => {
  test('all columns in table order, with Content-Range', async () => {
    const res = await rest('GET', 'items?select=*&order=id');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(res.headers.get('content-range'), '0-4/*');
    const rows = res.body as Array<Record<string, unknown>>;
    assert.deepEqual(Object.keys(rows[0]!), ITEM_COLUMNS);
    assert.deepEqual(rows[0], { id: 1, name: 'apple', qty: 5, active: true, tag: 'a', owner: null, 'odd name': null });
    assert.deepEqual(Array.isArray((await rest('GET', 'items')).body), true, 'no select means all');
  });

  test('chosen columns, quoted names, supabase-js spacing', async () => {
    const chosen = (await rest('GET', 'items?select=name,id&order=id')).body as object[];
    assert.deepEqual(Object.keys(chosen[0]!), ['name', 'id']);
    const quoted = await rest('GET', `items?select=${encodeURIComponent('id,"odd name"')}&id=eq.1`);
    assert.deepEqual(quoted.body, [{ id: 1, 'odd name': null }]);
    const { data, error } = await supabase(ctx.idp, ctx.idp.secretKey).from('items').select('id, name').eq('id', 2);
    assert.equal(error, null);
    assert.deepEqual(data, [{ id: 2, name: 'banana' }]);
  });

  test('unknown or malformed select: 42703 / PGRST100; an embedded resource outside the exposed schemas: PGRST200', async () => {
    assertRestError(await rest('GET', 'items?select=id,nope'), 400, '42703', 'column items.nope does not exist', null);
    assertRestError(await rest('GET', 'items?select=id,'), 400, 'PGRST100');
    assertRestError(await rest('GET', 'items?select=id::te$t'), 400, 'PGRST100');
    // owner references auth.users, which REST does not expose: no relationship to embed.
    assertRestError(
      await rest('GET', 'items?select=*,owner(*)'),
      400,
      'PGRST200',
      "Could not find a relationship between 'items' and 'owner' in the schema cache",
    );
  });

  test('order: direction, nulls first/last, several terms; errors', async () => {
    assert.deepEqual(ids(await rest('GET', 'items?order=qty.desc.nullslast')), [3, 5, 1, 4, 2]);
    assert.deepEqual(ids(await rest('GET', 'items?order=qty.asc.nullsfirst')), [2, 4, 1, 5, 3]);
    assert.deepEqual(ids(await rest('GET', 'items?order=active.desc.nullslast,id.desc')), [4, 1, 5, 2, 3]);
    assert.deepEqual(ids(await rest('GET', 'items?order=name')), [1, 2, 3, 4, 5]);
    const { data } = await supabase(ctx.idp, ctx.idp.secretKey)
      .from('items')
      .select('id')
      .order('qty', { ascending: false, nullsFirst: true });
    assert.deepEqual(
      data?.map((r) => r.id),
      [2, 3, 5, 1, 4],
    );
    assertRestError(await rest('GET', 'items?order=nope.asc'), 400, '42703', 'column items.nope does not exist');
    assertRestError(await rest('GET', 'items?order=id.sideways'), 400, 'PGRST100');
  });

  test('limit/offset with Content-Range; count=exact gives the total and 206 for a partial page', async () => {
    const page = await rest('GET', 'items?order=id&limit=2&offset=1');
    assert.equal(page.status, 200);
    assert.deepEqual(ids(page), [2, 3]);
    assert.equal(page.headers.get('content-range'), '1-2/*');

    const counted = await rest('GET', 'items?order=id&limit=2&offset=1', { headers: { prefer: 'count=exact' } });
    assert.equal(counted.status, 206);
    assert.equal(counted.headers.get('content-range'), '1-2/5');
    const whole = await rest('GET', 'items?order=id', { headers: { prefer: 'count=exact' } });
    assert.equal(whole.status, 200);
    assert.equal(whole.headers.get('content-range'), '0-4/5');
    const filteredCount = await rest('GET', 'items?active=is.true&limit=1', { headers: { prefer: 'count=exact' } });
    assert.equal(filteredCount.headers.get('content-range'), '0-0/2');

    const empty = await rest('GET', 'items?id=eq.99');
    assert.deepEqual(empty.body, []);
    assert.equal(empty.headers.get('content-range'), '*/*');
    assert.equal((await rest('GET', 'items?id=eq.99', { headers: { prefer: 'count=exact' } })).headers.get('content-range'), '*/0');

    const { data, count } = await supabase(ctx.idp, ctx.idp.secretKey)
      .from('items')
      .select('id', { count: 'exact' })
      .order('id')
      .range(1, 2);
    assert.deepEqual(
      data?.map((r) => r.id),
      [2, 3],
    );
    assert.equal(count, 5);

    assertRestError(await rest('GET', 'items?limit=abc'), 400, 'PGRST100');
    assertRestError(await rest('GET', 'items?offset=-1'), 400, 'PGRST100');
  });

  test('HEAD: headers only', async () => {
    const res = await rest('HEAD', 'items?order=id');
    assert.equal(res.status, 200);
    assert.equal(res.text, '');
    assert.equal(res.headers.get('content-range'), '0-4/*');
    const { count, error } = await supabase(ctx.idp, ctx.idp.secretKey).from('items').select('*', { count: 'exact', head: true });
    assert.equal(error, null);
    assert.equal(count, 5);
  });
});

describe('filters', () => {
  const cases: Array<[string, number[]]> = [
    ['id=eq.1', [1]],
    ['id=neq.1', [2, 3, 4, 5]],
    ['qty=gt.5', [3, 5]],
    ['qty=gte.5', [1, 3, 5]],
    ['qty=lt.5', [4]],
    ['qty=lte.5', [1, 4]],
    ['id=in.(1,3)', [1, 3]],
    [`tag=in.(${encodeURIComponent('"c,d"')},a)`, [1, 3]],
    ['id=in.()', []],
    ['qty=is.null', [2]],
    ['active=is.true', [1, 4]],
    ['active=is.false', [2, 5]],
    ['active=is.null', [3]],
    ['active=is.unknown', [3]],
    ['id=not.eq.1', [2, 3, 4, 5]],
    ['id=not.in.(1,2)', [3, 4, 5]],
    ['qty=not.is.null', [1, 3, 4, 5]],
    ['id=gte.2&id=lte.3', [2, 3]],
    ['active=eq.true&qty=gt.1', [1]],
    ['name=eq.elder+berry', [5]],
    [`tag=eq.${encodeURIComponent("it's")}`, [5]],
    [`${encodeURIComponent('"odd name"')}=is.null`, [1, 2, 3, 4, 5]],
    ['name=gt.c', [3, 4, 5]],
  ];
  for (const [query, expected] of cases) {
    test(query, async () => {
      const res = await rest('GET', `items?select=id&order=id&${query}`);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(ids(res), expected);
    });
  }

  test('as supabase-js encodes them', async () => {
    const items = () => supabase(ctx.idp, ctx.idp.secretKey).from('items').select('id').order('id');
    assert.deepEqual((await items().eq('tag', 'c,d')).data, [{ id: 3 }]);
    assert.deepEqual((await items().eq('name', 'elder berry')).data, [{ id: 5 }]);
    assert.deepEqual((await items().in('tag', ['a', 'c,d'])).data, [{ id: 1 }, { id: 3 }]);
    assert.deepEqual((await items().is('qty', null)).data, [{ id: 2 }]);
    assert.deepEqual((await items().not('id', 'in', '(1,2,3)')).data, [{ id: 4 }, { id: 5 }]);
    assert.deepEqual((await items().neq('id', 1).lt('qty', 8).gte('qty', 1)).data, [{ id: 5 }]);
  });

  test('bad filters: PGRST100, 42703, 22P02', async () => {
    assertRestError(await rest('GET', 'items?id=eqq.5'), 400, 'PGRST100', '"failed to parse filter (eqq.5)"');
    assertRestError(await rest('GET', 'items?id=5'), 400, 'PGRST100');
    assertRestError(await rest('GET', 'items?id=in.(1'), 400, 'PGRST100');
    assertRestError(await rest('GET', 'items?nope=eq.1'), 400, '42703', 'column items.nope does not exist');
    assertRestError(await rest('GET', 'items?id=eq.abc'), 400, '22P02', 'invalid input syntax for type integer: "abc"');
    assertRestError(await rest('GET', 'items?active=is.maybe'), 400, 'PGRST100');
  });
});

describe('insert, update, delete', () => {
  test('POST with return=representation: 201 and the rows; minimal: 201 empty; Content-Range */*', async () => {
    const full = await rest('POST', 'items?select=*', {
      headers: { prefer: 'return=representation' },
      body: { id: 10, name: 'fig' },
    });
    assert.equal(full.status, 201);
    assert.equal(full.headers.get('content-range'), '*/*');
    assert.equal(full.headers.get('preference-applied'), 'return=representation');
    assert.deepEqual(full.body, [{ id: 10, name: 'fig', qty: null, active: null, tag: null, owner: null, 'odd name': null }]);

    const some = await rest('POST', 'items?select=id,name', {
      headers: { prefer: 'return=representation' },
      body: { id: 11, name: 'grape' },
    });
    assert.deepEqual(some.body, [{ id: 11, name: 'grape' }]);

    const minimal = await rest('POST', 'items', { body: { id: 12, name: 'kiwi' } });
    assert.equal(minimal.status, 201);
    assert.equal(minimal.text, '');
    assert.equal(minimal.headers.get('content-range'), '*/*');
    assert.equal(await itemCount(), 8);
  });

  test('POST object Accept: 201 with one object', async () => {
    const res = await rest('POST', 'items?select=*', {
      headers: { prefer: 'return=representation', accept: 'application/vnd.pgrst.object+json' },
      body: { id: 13, name: 'lime', qty: 3 },
    });
    assert.equal(res.status, 201);
    assert.equal(res.headers.get('content-type'), 'application/vnd.pgrst.object+json; charset=utf-8');
    assert.deepEqual(res.body, { id: 13, name: 'lime', qty: 3, active: null, tag: null, owner: null, 'odd name': null });
    const { data, error, status } = await supabase(ctx.idp, ctx.idp.secretKey)
      .from('items')
      .insert({ id: 14, name: 'mango' })
      .select()
      .single();
    assert.equal(error, null);
    assert.equal(status, 201);
    assert.deepEqual(data, { id: 14, name: 'mango', qty: null, active: null, tag: null, owner: null, 'odd name': null });
  });

  test('POST an array (supabase-js sends columns=); count=exact counts the rows', async () => {
    const { data, error } = await supabase(ctx.idp, ctx.idp.secretKey)
      .from('items')
      .insert([
        { id: 20, name: 'a1', qty: 1 },
        { id: 21, name: 'a2' },
      ])
      .select('id, qty');
    assert.equal(error, null);
    assert.deepEqual(data, [
      { id: 20, qty: 1 },
      { id: 21, qty: null },
    ]);
    const counted = await rest('POST', 'items', {
      headers: { prefer: 'count=exact' },
      body: [
        { id: 22, name: 'x' },
        { id: 23, name: 'y' },
      ],
    });
    assert.equal(counted.status, 201);
    assert.equal(counted.headers.get('content-range'), '*/2');
  });

  test('POST errors: PGRST204, PGRST102, 23502, 23505, 23503, 22P02, 23514', async () => {
    assertRestError(
      await rest('POST', 'items', { body: { id: 30, name: 'x', nope: 1 } }),
      400,
      'PGRST204',
      "Could not find the 'nope' column of 'items' in the schema cache",
    );
    assertRestError(
      await rest('POST', 'items', { raw: '{"id":', headers: { 'content-type': 'application/json' } }),
      400,
      'PGRST102',
      'Empty or invalid json',
    );
    assertRestError(await rest('POST', 'items', { headers: { 'content-type': 'application/json' } }), 400, 'PGRST102');
    assertRestError(await rest('POST', 'items', { body: 5 }), 400, 'PGRST102');
    assertRestError(await rest('POST', 'items', { body: [1, 2] }), 400, 'PGRST102');
    const notNull = await rest('POST', 'items', { body: { id: 30 } });
    assertRestError(notNull, 400, '23502', 'null value in column "name" of relation "items" violates not-null constraint');
    assert.match((notNull.body as { details: string }).details, /^Failing row contains/);
    assertRestError(
      await rest('POST', 'items', { body: { id: 31, name: 'x', tag: 'a' } }),
      409,
      '23505',
      'duplicate key value violates unique constraint "items_tag_key"',
      'Key (tag)=(a) already exists.',
    );
    assertRestError(await rest('POST', 'items', { body: { id: 1, name: 'x' } }), 409, '23505');
    const fk = await rest('POST', 'items', { body: { id: 32, name: 'x', owner: '00000000-0000-4000-8000-000000000000' } });
    assertRestError(fk, 409, '23503');
    assert.match((fk.body as { details: string }).details, /is not present in table "users"/);
    assertRestError(
      await rest('POST', 'items', { body: { id: 'abc', name: 'x' } }),
      400,
      '22P02',
      'invalid input syntax for type integer: "abc"',
    );
    const user = await createUser(ctx.idp, `check-${Date.now()}@example.com`);
    assertRestError(await rest('POST', 'notes', { body: { title: '', user_id: user.id } }), 400, '23514');
    assert.equal(await itemCount(), 5, 'nothing inserted');
  });

  test("a note id is the store's, always: an explicit id is refused and later inserts never collide", async () => {
    const user = await createUser(ctx.idp, `ids-${Date.now()}@example.com`);
    const asUser = { token: user.token, headers: { prefer: 'return=representation' } };
    const first = await rest('POST', 'notes', { body: { title: 'first' }, ...asUser });
    assert.equal(first.status, 201);
    const nextId = (first.body as Array<{ id: number }>)[0]!.id + 1;
    // The id the sequence hands out next: with BY DEFAULT identity this insert succeeded and the
    // following one failed with a duplicate key.
    const forged = await rest('POST', 'notes', { body: { id: nextId, title: 'forged' }, ...asUser });
    assert.equal(forged.status, 400);
    assert.equal((forged.body as { code: string }).code, '428C9');
    const next = await rest('POST', 'notes', { body: { title: 'next' }, ...asUser });
    assert.equal(next.status, 201, next.text);
  });

  test('PATCH: representation 200, minimal 204; no filter 21000; unknown column PGRST204', async () => {
    const res = await rest('PATCH', 'items?id=eq.1&select=id,qty', {
      headers: { prefer: 'return=representation' },
      body: { qty: 6 },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, [{ id: 1, qty: 6 }]);
    assert.equal(res.headers.get('content-range'), '*/*');
    const minimal = await rest('PATCH', 'items?qty=is.null', { body: { qty: 1 } });
    assert.equal(minimal.status, 204);
    assert.equal(minimal.text, '');
    assert.equal(minimal.headers.get('content-range'), '*/*');
    assert.equal((await ctx.db.query('select qty from public.items where id = 2')).rows[0].qty, 1);
    const none = await rest('PATCH', 'items?id=eq.99', { headers: { prefer: 'return=representation' }, body: { qty: 1 } });
    assert.deepEqual(none.body, []);
    assertRestError(await rest('PATCH', 'items', { body: { qty: 1 } }), 400, '21000', 'UPDATE requires a WHERE clause');
    assertRestError(await rest('PATCH', 'items?id=eq.1', { body: { nope: 1 } }), 400, 'PGRST204');
    assertRestError(await rest('PATCH', 'items?id=eq.1', { body: [{ qty: 1 }] }), 400, 'PGRST102');
    const { data, error } = await supabase(ctx.idp, ctx.idp.secretKey).from('items').update({ name: 'APPLE' }).eq('id', 1).select('name');
    assert.equal(error, null);
    assert.deepEqual(data, [{ name: 'APPLE' }]);
  });

  test('DELETE: representation 200 with rows ([] when none), minimal 204, no filter 21000', async () => {
    const res = await rest('DELETE', 'items?id=eq.1&select=*', {
      headers: { prefer: 'return=representation', 'content-type': 'application/json' },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(ids(res), [1]);
    assert.equal(res.headers.get('content-range'), '*/*');
    const none = await rest('DELETE', 'items?id=eq.1', { headers: { prefer: 'return=representation' } });
    assert.equal(none.status, 200);
    assert.deepEqual(none.body, []);
    const minimal = await rest('DELETE', 'items?id=eq.2');
    assert.equal(minimal.status, 204);
    assert.equal(minimal.text, '');
    assertRestError(await rest('DELETE', 'items'), 400, '21000', 'DELETE requires a WHERE clause');
    const { data, error } = await supabase(ctx.idp, ctx.idp.secretKey).from('items').delete().eq('id', 3).select();
    assert.equal(error, null);
    assert.deepEqual(
      data?.map((r) => r.id),
      [3],
    );
    assert.equal(await itemCount(), 2);
  });
});

describe('object Accept type', () => {
  const accept = { accept: 'application/vnd.pgrst.object+json' };

  test('GET exactly one row: an object; otherwise 406 PGRST116', async () => {
    const one = await rest('GET', 'items?id=eq.1&select=id,name', { headers: accept });
    assert.equal(one.status, 200);
    assert.deepEqual(one.body, { id: 1, name: 'apple' });
    assertRestError(
      await rest('GET', 'items?id=eq.99', { headers: accept }),
      406,
      'PGRST116',
      'Cannot coerce the result to a single JSON object',
      'The result contains 0 rows',
    );
    assertRestError(
      await rest('GET', 'items', { headers: accept }),
      406,
      'PGRST116',
      'Cannot coerce the result to a single JSON object',
      'The result contains 5 rows',
    );
    const { error, status } = await supabase(ctx.idp, ctx.idp.secretKey).from('items').select('*').eq('id', 99).single();
    assert.equal(status, 406);
    assert.equal(error?.code, 'PGRST116');
  });

  test('a mutation that does not touch exactly one row is rolled back', async () => {
    const insert = await rest('POST', 'items', {
      headers: { ...accept, prefer: 'return=representation' },
      body: [
        { id: 40, name: 'p' },
        { id: 41, name: 'q' },
      ],
    });
    assertRestError(insert, 406, 'PGRST116', undefined, 'The result contains 2 rows');
    assert.equal(await itemCount(), 5);

    assertRestError(await rest('PATCH', 'items?active=is.true', { headers: accept, body: { name: 'changed' } }), 406, 'PGRST116');
    assert.equal((await ctx.db.query(`select count(*)::int as n from public.items where name = 'changed'`)).rows[0].n, 0);

    assertRestError(
      await rest('DELETE', 'items?active=is.false', { headers: { ...accept, prefer: 'return=representation' } }),
      406,
      'PGRST116',
    );
    assert.equal(await itemCount(), 5);

    const single = await rest('POST', 'items', { headers: accept, body: { id: 42, name: 'r' } });
    assert.equal(single.status, 201);
    assert.equal(single.text, '');
    assert.equal(await itemCount(), 6, 'one row: committed');
  });
});

describe('errors', () => {
  test('unknown table 404 PGRST205; other schemas are not exposed; bad profile 406 PGRST106', async () => {
    assertRestError(await rest('GET', 'nope'), 404, 'PGRST205', "Could not find the table 'public.nope' in the schema cache", null);
    assertRestError(await rest('GET', 'users'), 404, 'PGRST205', "Could not find the table 'public.users' in the schema cache");
    assertRestError(await rest('GET', 'schema_migrations2'), 404, 'PGRST205');
    assertRestError(await rest('GET', 'items', { headers: { 'accept-profile': 'auth' } }), 406, 'PGRST106', 'Invalid schema: auth');
    assertRestError(await rest('DELETE', 'items?id=eq.1', { headers: { 'content-profile': 'auth' } }), 406, 'PGRST106');
    assert.equal((await rest('GET', 'items', { headers: { 'accept-profile': 'public' } })).status, 200);
  });

  test('a column added after start is picked up', async () => {
    await ctx.db.query('alter table public.items add column extra text');
    try {
      const res = await rest('GET', 'items?select=id,extra&id=eq.1');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, [{ id: 1, extra: null }]);
    } finally {
      await ctx.db.query('alter table public.items drop column extra');
    }
  });

  test('42501 without a grant: 403 for authenticated, 401 for anon', async () => {
    const user = await createUser(ctx.idp, `nogrant-${Date.now()}@example.com`);
    assertRestError(
      await idpRequest(ctx.idp, 'GET', '/rest/v1/private_things', { token: user.token }),
      403,
      '42501',
      'permission denied for table private_things',
    );
    assertRestError(
      await idpRequest(ctx.idp, 'GET', '/rest/v1/private_things'),
      401,
      '42501',
      'permission denied for table private_things',
    );
  });

  test('a JWT that is not one: 401 PGRST301 with WWW-Authenticate', async () => {
    const res = await idpRequest(ctx.idp, 'GET', '/rest/v1/items', { token: 'abc' });
    assertRestError(res, 401, 'PGRST301', 'Expected 3 parts in JWT; got 1');
    assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer error="invalid_token"/);
  });

  test('server-side failures are a bare 500; client-class SQL errors keep their message', async () => {
    const res = await rest('GET', 'broken');
    assertRestError(res, 500, 'XX000', 'Internal Server Error', null);
    assert.doesNotMatch(res.text, /secret|boom/);
    assertRestError(await rest('GET', 'divide'), 400, '22012', 'division by zero');
  });
});

describe('SQL injection attempts', () => {
  test("in every parameter, column name and header: 4xx or harmless, and never another user's rows", async () => {
    const alice = await createUser(ctx.idp, `alice-inj-${Date.now()}@example.com`);
    const bob = await createUser(ctx.idp, `bob-inj-${Date.now()}@example.com`);
    await ctx.db.query(`insert into public.notes (user_id, title) values ($1, 'alice note'), ($2, 'bob secret')`, [alice.id, bob.id]);
    const e = encodeURIComponent;
    const attempts: Array<{ path: string; method?: string; body?: unknown; headers?: Record<string, string> }> = [
      { path: `notes?select=${e('id;drop table notes')}` },
      { path: `notes?select=${e('id,(select title from notes)')}` },
      { path: `notes?select=${e('"id""; drop table notes; --"')}` },
      { path: `notes?select=${e('*,pg_sleep(1)')}` },
      { path: `notes?order=${e('id;drop table notes')}` },
      { path: `notes?order=${e('id desc, (select 1)')}` },
      { path: `notes?order=${e('(case when true then id end)')}` },
      { path: `notes?${e('id;drop table notes--')}=eq.1` },
      { path: `notes?${e('"id"" = 1 or ""id"')}=eq.1` },
      { path: `notes?${e('user_id::text')}=eq.x` },
      { path: `notes?id=${e('eq.1;drop table notes')}` },
      { path: `notes?id=${e('eq.1 or 1=1')}` },
      { path: `notes?title=${e("eq.x' or '1'='1")}` },
      { path: `notes?title=${e("eq.'||(select title from notes limit 1)||'")}` },
      { path: `notes?user_id=${e(`eq.${bob.id}' or true --`)}` },
      { path: `notes?id=${e('in.(1);drop table notes')}` },
      { path: `notes?id=${e('in.(1) or true')}` },
      { path: `notes?body=${e('is.null;drop table notes')}` },
      { path: `notes?body=${e('is.null or true')}` },
      { path: `notes?limit=${e('1;drop table notes')}` },
      { path: `notes?offset=${e('0 union select * from notes')}` },
      { path: `${e('notes;drop table notes')}` },
      { path: `${e('notes" where true --')}` },
      { path: `${e('pg_catalog.pg_authid')}` },
      { path: `notes?columns=${e('"title"); drop table notes; --')}`, method: 'POST', body: { title: 'x' } },
      { path: 'notes', method: 'POST', body: { "title\") values ('x'); drop table notes; --": 'x' } },
      { path: 'notes', method: 'POST', body: { title: "x'); drop table notes; --", user_id: bob.id } },
      { path: `notes?id=gt.0`, method: 'PATCH', body: { "title = 'pwned' --": 'x' } },
      { path: `notes?title=${e("eq.bob secret' or '1'='1")}`, method: 'DELETE' },
      { path: 'notes', headers: { prefer: 'return=representation; drop table notes', 'accept-profile': 'public; drop table notes' } },
      { path: 'notes', headers: { 'accept-profile': 'auth' } },
    ];
    for (const attempt of attempts) {
      const res = await idpRequest(ctx.idp, attempt.method ?? 'GET', `/rest/v1/${attempt.path}`, {
        token: alice.token,
        body: attempt.body,
        headers: attempt.headers,
      });
      const label = `${attempt.method ?? 'GET'} ${attempt.path} -> ${res.status} ${res.text}`;
      assert.ok(res.status < 500, label);
      if (res.status < 300 && res.text !== '') {
        const rows = res.body as Array<{ user_id?: string; title?: string }>;
        assert.ok(Array.isArray(rows), label);
        for (const row of rows) assert.notEqual(row.user_id, bob.id, label);
        assert.doesNotMatch(res.text, /bob secret/, label);
      }
    }
    const left = await ctx.db.query('select user_id, title from public.notes where user_id = $1', [bob.id]);
    assert.deepEqual(
      left.rows.map((r) => r.title),
      ['bob secret'],
      "bob's note untouched",
    );
    assert.equal(await itemCount(), 5, 'other tables intact');
    assert.equal((await ctx.db.query(`select count(*)::int as n from public.notes where title = 'pwned'`)).rows[0].n, 0);
  });
});
