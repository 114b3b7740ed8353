// Function calls (`/rest/v1/rpc/<fn>`) through the real supabase-js against the real idp, as
// PostgREST 12 makes them (Plan.hs: findProc, callPlan; QueryBuilder.hs: callPlanToQuery;
// Error.hs: PGRST202 with noRpcHint, PGRST203). Functions run as the caller, so their grants and
// the row-level security of what they read apply.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createUser, sharedIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { serviceClient, userClient } from './helpers/supabase.js';

let alice: Awaited<ReturnType<typeof createUser>>;
let bob: Awaited<ReturnType<typeof createUser>>;

const ctx = sharedIdp({}, async () => {
  alice = await createUser(ctx.idp, 'rpc-alice@example.com');
  bob = await createUser(ctx.idp, 'rpc-bob@example.com');
  await ctx.db.query(`
    create table public.shelves (id int primary key, label text not null);
    create table public.things (
      id int primary key, name text not null, shelf_id int references public.shelves (id),
      owner uuid not null default auth.uid() references auth.users (id));
    alter table public.things enable row level security;
    create policy things_own on public.things for all to authenticated using ((select auth.uid()) = owner) with check ((select auth.uid()) = owner);
    grant select on public.shelves to authenticated, service_role;
    grant select, insert on public.things to authenticated, service_role;

    create function public.add_them(a int, b int default 10) returns int language sql immutable as $$ select a + b $$;
    create function public.hello() returns text language sql stable as $$ select 'hello' $$;
    create function public.numbers(n int) returns setof int language sql stable as $$ select generate_series(1, n) $$;
    create function public.my_things() returns setof public.things language sql stable as $$ select * from public.things $$;
    create function public.things_like(prefix text) returns table (id int, name text) language sql stable
      as $$ select id, name from public.things where name like prefix || '%' $$;
    create function public.first_thing() returns public.things language sql stable as $$ select * from public.things order by id limit 1 $$;
    create function public.echo_json(json) returns json language sql immutable as $$ select $1 $$;
    create function public.sum_object(body jsonb) returns int language sql immutable as $$ select (body->>'a')::int + (body->>'b')::int $$;
    create function public.add_thing(name text) returns public.things language sql volatile
      as $$ insert into public.things (id, name) values ((select coalesce(max(id), 0) + 1 from public.things), name) returning * $$;
    create function public.whoami() returns json language sql stable
      as $$ select json_build_object('uid', auth.uid(), 'role', current_user, 'path', current_setting('request.path', true)) $$;
    create function public.nothing() returns void language sql as $$ $$;
    create function public.sum_all(variadic v int[]) returns int language sql immutable as $$ select sum(x)::int from unnest(v) x $$;
    create function public.twin(a int) returns text language sql immutable as $$ select 'int' $$;
    create function public.twin(a text) returns text language sql immutable as $$ select 'text' $$;
    revoke execute on function public.hello() from public;
    grant execute on function public.hello() to authenticated, service_role;

    insert into public.shelves values (1, 'top'), (2, 'bottom');`);
  await ctx.db.query(
    `insert into public.things values (1, 'apple', 1, $1), (2, 'avocado', 2, $1), (3, 'banana', 1, $1), (4, 'bread', null, $2)`,
    [alice.id, bob.id],
  );
});

const service = () => serviceClient(ctx.idp);
const rest = (method: string, path: string, opts: Parameters<typeof idpRequest>[3] = {}) =>
  idpRequest(ctx.idp, method, `/rest/v1/${path}`, { apikey: ctx.idp.secretKey, ...opts });

describe('calling', () => {
  test('POST with named arguments; optional ones take their defaults', async () => {
    assert.deepEqual((await service().rpc('add_them', { a: 1, b: 2 })).data, 3);
    assert.deepEqual((await service().rpc('add_them', { a: 1 })).data, 11);
    assert.deepEqual((await userClient(ctx.idp, alice.token).rpc('hello')).data, 'hello');
  });

  test('GET with query arguments for a function that reads; a function that writes fails read-only (405 25006)', async () => {
    const { data, error, status } = await service().rpc('add_them', { a: 5 }, { get: true });
    assert.equal(error, null);
    assert.equal(status, 200);
    assert.equal(data, 15);
    assert.deepEqual((await service().rpc('numbers', { n: 3 }, { get: true })).data, [1, 2, 3]);
    const writes = await userClient(ctx.idp, alice.token).rpc('add_thing', { name: 'cherry' }, { get: true });
    assert.equal(writes.status, 405);
    assert.equal(writes.error?.code, '25006');
    assert.equal(writes.error?.message, 'cannot execute INSERT in a read-only transaction');
    assert.equal((await ctx.db.query(`select count(*)::int as n from public.things where name = 'cherry'`)).rows[0].n, 0);
  });

  test('POST of a volatile function writes, as the caller; a single row answers as an object', async () => {
    const { data, error, status } = await userClient(ctx.idp, bob.token).rpc('add_thing', { name: 'bagel' });
    assert.equal(error, null);
    assert.equal(status, 200);
    assert.deepEqual(data, { id: 5, name: 'bagel', shelf_id: null, owner: bob.id });
  });

  test('scalar, set of scalars, set of rows, TABLE results and a single row', async () => {
    assert.deepEqual((await service().rpc('numbers', { n: 4 })).data, [1, 2, 3, 4]);
    assert.deepEqual((await service().rpc('numbers', { n: 4 }).limit(2)).data, [1, 2]);
    const rows = await userClient(ctx.idp, alice.token).rpc('my_things').select('id, name').order('id');
    assert.deepEqual(rows.data, [
      { id: 1, name: 'apple' },
      { id: 2, name: 'avocado' },
      { id: 3, name: 'banana' },
    ]);
    const table = await userClient(ctx.idp, alice.token)
      .rpc('things_like', { prefix: 'a' })
      .select('name')
      .order('name', { ascending: false });
    assert.deepEqual(table.data, [{ name: 'avocado' }, { name: 'apple' }]);
    const single = await userClient(ctx.idp, bob.token).rpc('first_thing');
    assert.deepEqual(single.data, { id: 4, name: 'bread', shelf_id: null, owner: bob.id });
  });

  test("filters, order, limit, counts and embedding on a function's rows", async () => {
    const client = userClient(ctx.idp, alice.token);
    const filtered = await client.rpc('my_things').select('name').like('name', 'a*').gt('id', 1);
    assert.deepEqual(filtered.data, [{ name: 'avocado' }]);
    const counted = await client.rpc('my_things', {}, { count: 'exact' }).select('id').order('id').range(0, 1);
    assert.equal(counted.count, 3);
    assert.equal(counted.status, 206);
    assert.deepEqual(counted.data, [{ id: 1 }, { id: 2 }]);
    const head = await client.rpc('my_things', {}, { head: true, count: 'exact' });
    assert.equal(head.count, 3);
    assert.equal(head.data, null);
    // A function returning a table's rows embeds that table's relationships.
    const embedded = await client.rpc('my_things').select('name, shelves(label)').order('id').limit(2);
    assert.deepEqual(embedded.data, [
      { name: 'apple', shelves: { label: 'top' } },
      { name: 'avocado', shelves: { label: 'bottom' } },
    ]);
  });

  test('a single unnamed json argument takes the whole body; Prefer: params=single-object gives it to one named json parameter', async () => {
    assert.deepEqual((await service().rpc('echo_json', { any: ['thing', 1] })).data, { any: ['thing', 1] });
    // A scalar result is the value itself, also when it is an array and one object is asked for.
    const list = await rest('POST', 'rpc/echo_json', { headers: { accept: 'application/vnd.pgrst.object+json' }, body: [1, 2] });
    assert.equal(list.text, '[1,2]');
    const single = await rest('POST', 'rpc/sum_object', { headers: { prefer: 'params=single-object' }, body: { a: 2, b: 3 } });
    assert.equal(single.status, 200, single.text);
    assert.equal(single.body, 5);
    assert.equal(single.headers.get('preference-applied'), 'params=single-object');
    const without = await rest('POST', 'rpc/sum_object', { body: { a: 2, b: 3 } });
    assert.equal(without.status, 404);
  });

  test('a variadic parameter takes an array, or a repeated query parameter', async () => {
    assert.equal((await service().rpc('sum_all', { v: [1, 2, 3] })).data, 6);
    const byGet = await rest('GET', 'rpc/sum_all?v=1&v=2&v=4');
    assert.equal(byGet.body, 7);
  });

  test('void: 204 with no body; HEAD: the headers alone', async () => {
    const res = await rest('POST', 'rpc/nothing', { body: {} });
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    const head = await rest('HEAD', 'rpc/numbers?n=3');
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
    assert.equal(head.headers.get('content-range'), '0-2/*');
  });

  test("as the caller: auth.uid(), the role and request.path are the request's; grants and row-level security apply", async () => {
    assert.deepEqual((await userClient(ctx.idp, alice.token).rpc('whoami')).data, {
      uid: alice.id,
      role: 'authenticated',
      path: '/rpc/whoami',
    });
    assert.deepEqual((await userClient(ctx.idp).rpc('whoami')).data, { uid: null, role: 'anon', path: '/rpc/whoami' });
    const refused = await userClient(ctx.idp).rpc('hello');
    assert.equal(refused.status, 401);
    assert.equal(refused.error?.code, '42501');
    const bobs = (await userClient(ctx.idp, bob.token).rpc('my_things').select('name')).data as Array<{ name: string }> | null;
    assert.deepEqual(bobs?.map((r) => r.name).sort(), ['bagel', 'bread']);
  });
});

describe("errors in PostgREST's words", () => {
  test('no such function or parameters: 404 PGRST202, with a near name or parameter list as the hint', async () => {
    const byName = await service().rpc('add_thm', { a: 1 });
    assert.equal(byName.status, 404);
    assert.deepEqual(byName.error, {
      code: 'PGRST202',
      details:
        'Searched for the function public.add_thm with parameter a or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.add_them',
      message: 'Could not find the function public.add_thm(a) in the schema cache',
    });
    const byParams = await service().rpc('add_them', { a: 1, c: 2 });
    assert.deepEqual(byParams.error, {
      code: 'PGRST202',
      details:
        'Searched for the function public.add_them with parameters a, c or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
      hint: 'Perhaps you meant to call the function public.add_them(a, b)',
      message: 'Could not find the function public.add_them(a, c) in the schema cache',
    });
    const none = await rest('GET', 'rpc/add_them');
    assert.deepEqual(none.body, {
      code: 'PGRST202',
      details: 'Searched for the function public.add_them without parameters, but no matches were found in the schema cache.',
      hint: null,
      message: 'Could not find the function public.add_them without parameters in the schema cache',
    });
    const singleObject = await rest('POST', 'rpc/add_them', { headers: { prefer: 'params=single-object' }, body: { a: 1 } });
    assert.deepEqual(singleObject.body, {
      code: 'PGRST202',
      details:
        'Searched for the function public.add_them with a single json/jsonb parameter, but no matches were found in the schema cache.',
      hint: null,
      message: 'Could not find the function public.add_them in the schema cache',
    });
  });

  test('two overloads fit: 300 PGRST203', async () => {
    const { error, status } = await service().rpc('twin', { a: 1 });
    assert.equal(status, 300);
    assert.deepEqual(error, {
      code: 'PGRST203',
      details: null,
      hint: 'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
      message: 'Could not choose the best candidate function between: public.twin(a => integer), public.twin(a => text)',
    });
  });

  test("an argument of the wrong type is PostgreSQL's 22P02; other methods are 405 PGRST101", async () => {
    const bad = await service().rpc('add_them', { a: 'x' });
    assert.equal(bad.status, 400);
    assert.equal(bad.error?.code, '22P02');
    const patch = await rest('PATCH', 'rpc/add_them', { body: {} });
    assert.equal(patch.status, 405);
    assert.deepEqual(patch.body, { code: 'PGRST101', details: null, hint: null, message: 'Cannot use the PATCH method on RPC' });
  });

  test('a function created after start is found: the miss reloads the schema cache once', async () => {
    await ctx.db.query(`create function public.late(x int) returns int language sql immutable as $$ select x * 2 $$`);
    assert.equal((await service().rpc('late', { x: 21 })).data, 42);
  });
});
