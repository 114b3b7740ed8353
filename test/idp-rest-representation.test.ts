// What a request asks of the answer and the transaction, through the real supabase-js against the
// real idp, as PostgREST 12 does it: CSV and nulls=stripped (MediaType.hs, SqlFragment.hs asCsvF),
// Prefer: missing=default (fromJsonBodyF), count=planned|estimated (Query.hs), tx=rollback with
// db-tx-end allowing it (optionalRollback), Accept-Profile / Content-Profile for the exposed schemas
// (ApiRequest.hs getSchema), and an upsert that only merges answering 200 (Response.hs).
import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import pg from 'pg';
import { sharedIdp, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { serviceClient, supabase } from './helpers/supabase.js';

// Another schema exposed beside public, and clients allowed to roll their transaction back.
const ctx = sharedIdp({ env: { IDP_REST_SCHEMAS: 'public,api', IDP_REST_TX_END: 'commit-allow-override' } }, async () => {
  await ctx.db.query(`
    create table public.parts (
      id int primary key, name text not null, note text, qty int not null default 7,
      made timestamptz not null default '2026-01-02T03:04:05Z', code text default 'P-' || 'x');
    grant select, insert, update, delete on public.parts to service_role;
    create schema api;
    grant usage on schema api to service_role;
    create table api.parts (id int primary key, label text not null);
    grant select, insert on api.parts to service_role;
    insert into api.parts values (1, 'from api');
    create function api.shout(word text) returns text language sql immutable as $$ select upper(word) $$;
    grant execute on function api.shout(text) to service_role;`);
});
beforeEach(async () => {
  await ctx.db.query(`truncate public.parts;
    insert into public.parts (id, name, note, qty, code) values
      (1, 'bolt', 'm6, "hex"', 40, 'B-1'), (2, 'nut', null, 12, null), (3, 'washer', 'flat', 100, 'W-3')`);
});

const parts = () => serviceClient(ctx.idp).from('parts');
const rest = (method: string, path: string, opts: Parameters<typeof idpRequest>[3] = {}) =>
  idpRequest(ctx.idp, method, `/rest/v1/${path}`, { apikey: ctx.idp.secretKey, ...opts });
const count = async () => (await ctx.db.query('select count(*)::int as n from public.parts')).rows[0].n as number;

describe('formats', () => {
  test('CSV: the keys as the header, each row as PostgreSQL writes a record', async () => {
    const { data, error, status } = await parts().select('id, name, note').order('id').csv();
    assert.equal(error, null);
    assert.equal(status, 200);
    assert.equal(data, 'id,name,note\n1,bolt,"m6, ""hex"""\n2,nut,\n3,washer,flat');
    const res = await rest('GET', 'parts?select=id&id=eq.99', { headers: { accept: 'text/csv' } });
    assert.equal(res.headers.get('content-type'), 'text/csv; charset=utf-8');
    assert.equal(res.text, '\n');
    const written = await rest('POST', 'parts?select=id,name', {
      headers: { accept: 'text/csv', prefer: 'return=representation' },
      body: [{ id: 4, name: 'pin' }],
    });
    assert.equal(written.status, 201);
    assert.equal(written.text, 'id,name\n4,pin');
  });

  test('nulls=stripped: keys whose value is null are left out, in arrays and single objects', async () => {
    const { data } = await parts().select('id, note, code').order('id').stripNulls();
    assert.deepEqual(data, [{ id: 1, note: 'm6, "hex"', code: 'B-1' }, { id: 2 }, { id: 3, note: 'flat', code: 'W-3' }]);
    const one = await parts().select('id, note').eq('id', 2).single().stripNulls();
    assert.deepEqual(one.data, { id: 2 });
    const res = await rest('GET', 'parts?select=id,note&id=eq.2', {
      headers: { accept: 'application/vnd.pgrst.array+json;nulls=stripped' },
    });
    assert.equal(res.headers.get('content-type'), 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8');
    assert.equal(res.text, '[{"id":2}]');
  });

  test('a media type that cannot be produced: 406 PGRST107; the query plan media type is not offered', async () => {
    const res = await rest('GET', 'parts', { headers: { accept: 'application/xml' } });
    assert.equal(res.status, 406);
    assert.deepEqual(res.body, {
      code: 'PGRST107',
      details: null,
      hint: null,
      message: 'None of these media types are available: application/xml',
    });
    const explained = await parts().select('id').explain();
    assert.equal(explained.status, 406);
    assert.equal(explained.error?.code, 'PGRST107');
    // Quality decides among several: the best one that can be produced.
    const weighted = await rest('GET', 'parts?select=id&id=eq.1', { headers: { accept: 'text/csv;q=0.5, application/json;q=0.9' } });
    assert.equal(weighted.headers.get('content-type'), 'application/json; charset=utf-8');
  });
});

describe('Prefer', () => {
  test('missing=default (defaultToNull: false): a column a row leaves out takes its default, not null', async () => {
    const { data, error } = await parts()
      .insert(
        [
          { id: 10, name: 'rivet', qty: 1 },
          { id: 11, name: 'clip', code: 'C-11' },
        ],
        { defaultToNull: false },
      )
      .select('id, qty, code, made');
    assert.equal(error, null);
    assert.deepEqual(data, [
      { id: 10, qty: 1, code: 'P-x', made: '2026-01-02T03:04:05+00:00' },
      { id: 11, qty: 7, code: 'C-11', made: '2026-01-02T03:04:05+00:00' },
    ]);
    // Without it, a listed column a row leaves out is null, which the NOT NULL qty refuses.
    const nulls = await parts().insert([
      { id: 12, name: 'a', qty: 1 },
      { id: 13, name: 'b' },
    ]);
    assert.equal(nulls.error?.code, '23502');
    const applied = await rest('POST', 'parts', { headers: { prefer: 'missing=default' }, body: { id: 14, name: 'c' } });
    assert.equal(applied.headers.get('preference-applied'), 'missing=default');
  });

  test("count=planned and count=estimated: the planner's estimate (estimated is exact up to 1,000 rows)", async () => {
    await ctx.db.query(`insert into public.parts (id, name) select g, 'gen' from generate_series(100, 1599) g; analyze public.parts`);
    const planned = await parts().select('id', { count: 'planned', head: true });
    assert.equal(planned.error, null);
    assert.ok(planned.count !== null && planned.count > 1000 && planned.count < 3000, `planned ${planned.count}`);
    const estimatedSmall = await parts().select('id', { count: 'estimated' }).lt('id', 100);
    assert.equal(estimatedSmall.count, 3, 'at most 1,000 rows: counted exactly');
    const estimatedLarge = await parts().select('id', { count: 'estimated', head: true });
    assert.ok(estimatedLarge.count !== null && estimatedLarge.count >= 1001, `estimated ${estimatedLarge.count}`);
    const res = await rest('GET', 'parts?select=id&limit=1', { headers: { prefer: 'count=planned' } });
    assert.equal(res.status, 206);
    assert.match(res.headers.get('content-range') ?? '', /^0-0\/\d+$/);
    assert.equal(res.headers.get('preference-applied'), 'count=planned');
  });

  test('tx=rollback (allowed by IDP_REST_TX_END=commit-allow-override): the answer of the write, nothing kept', async () => {
    const { data, error, status } = await parts().insert({ id: 20, name: 'ghost' }).select('id, name').rollback();
    assert.equal(error, null);
    assert.equal(status, 201);
    assert.deepEqual(data, [{ id: 20, name: 'ghost' }]);
    assert.equal(await count(), 3);
    const update = await rest('PATCH', 'parts?id=eq.1', {
      headers: { prefer: 'tx=rollback, return=representation' },
      body: { qty: 0 },
    });
    assert.deepEqual(update.body, [{ id: 1, name: 'bolt', note: 'm6, "hex"', qty: 0, made: '2026-01-02T03:04:05+00:00', code: 'B-1' }]);
    assert.equal(update.headers.get('preference-applied'), 'return=representation, tx=rollback');
    assert.equal((await ctx.db.query('select qty from public.parts where id = 1')).rows[0].qty, 40);
    // A single object asked for and rolled back: both apply.
    const single = await parts().delete().eq('id', 2).select().rollback().single();
    assert.equal(single.error, null);
    assert.equal(await count(), 3);
    const commit = await rest('POST', 'parts', { headers: { prefer: 'tx=commit' }, body: { id: 21, name: 'kept' } });
    assert.equal(commit.status, 201);
    assert.equal(await count(), 4);
  });

  test('IDP_REST_TX_END=rollback: every request is rolled back, tx=commit refused without -allow-override', async () => {
    const rollsBack = await startIdp({ env: { IDP_REST_TX_END: 'rollback' } });
    const other = new pg.Client({ connectionString: rollsBack.databaseUrl });
    await other.connect();
    try {
      await other.query('create table public.drafts (id int primary key); grant select, insert on public.drafts to service_role');
      const post = (prefer?: string) =>
        idpRequest(rollsBack, 'POST', '/rest/v1/drafts', {
          apikey: rollsBack.secretKey,
          headers: prefer ? { prefer } : {},
          body: { id: 1 },
        });
      assert.equal((await post()).status, 201);
      const commit = await post('tx=commit');
      assert.equal(commit.status, 201);
      assert.equal(commit.headers.get('preference-applied'), null, 'the client may not choose');
      assert.equal((await other.query('select count(*)::int as n from public.drafts')).rows[0].n, 0);
    } finally {
      await other.end();
      await rollsBack.close();
    }
  });

  test('an upsert that only merges existing rows answers 200; one that inserts answers 201', async () => {
    const merged = await parts().upsert({ id: 1, name: 'BOLT' }).select('id, name');
    assert.equal(merged.status, 200);
    assert.deepEqual(merged.data, [{ id: 1, name: 'BOLT' }]);
    const mixed = await parts().upsert([
      { id: 2, name: 'NUT' },
      { id: 30, name: 'new' },
    ]);
    assert.equal(mixed.status, 201);
    const ignored = await parts().upsert({ id: 3, name: 'x' }, { ignoreDuplicates: true });
    assert.equal(ignored.status, 201, 'ignore-duplicates answers 201 as PostgREST does');
  });
});

describe('profiles: Accept-Profile and Content-Profile', () => {
  test('another exposed schema for reads, writes and calls; the answer names it in Content-Profile', async () => {
    const api = supabase(ctx.idp, ctx.idp.secretKey).schema('api');
    const read = await api.from('parts').select('*');
    assert.equal(read.error, null);
    assert.deepEqual(read.data, [{ id: 1, label: 'from api' }]);
    const res = await rest('GET', 'parts', { headers: { 'accept-profile': 'api' } });
    assert.equal(res.headers.get('content-profile'), 'api');
    assert.equal((await rest('GET', 'parts?select=id&id=eq.1')).headers.get('content-profile'), null);
    const written = await api.from('parts').insert({ id: 2, label: 'written' }).select('label').single();
    assert.deepEqual(written.data, { label: 'written' });
    assert.equal((await ctx.db.query('select count(*)::int as n from api.parts')).rows[0].n, 2);
    assert.equal((await api.rpc('shout', { word: 'hi' })).data, 'HI');
    // The default schema has no such function: calls are resolved in the profile's schema.
    assert.equal((await serviceClient(ctx.idp).rpc('shout', { word: 'hi' })).status, 404);
  });

  test('a schema that is not exposed: 406 PGRST106 naming those that are', async () => {
    const res = await rest('GET', 'parts', { headers: { 'accept-profile': 'auth' } });
    assert.equal(res.status, 406);
    assert.deepEqual(res.body, {
      code: 'PGRST106',
      details: null,
      hint: 'Only the following schemas are exposed: public, api',
      message: 'Invalid schema: auth',
    });
    const write = await rest('POST', 'parts', { headers: { 'content-profile': 'nope' }, body: { id: 1 } });
    assert.equal(write.status, 406);
  });
});
