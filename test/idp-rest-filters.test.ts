// Every filter operator of PostgREST 12 (QueryParams.hs: pOpExpr; SqlFragment.hs: pgFmtFilter),
// as supabase-js writes it, against the real idp: on the column itself, negated with not., and
// inside or/and trees, nested and negated.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sharedIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { serviceClient } from './helpers/supabase.js';

const ctx = sharedIdp({}, async () => {
  await ctx.db.query(`
    create table public.specimens (
      id int primary key, name text, tags text[], attrs jsonb, span int4range, notes text, score int,
      doc tsvector generated always as (to_tsvector('english', coalesce(name, '') || ' ' || coalesce(notes, ''))) stored);
    grant select on public.specimens to service_role;
    insert into public.specimens (id, name, tags, attrs, span, notes, score) values
      (1, 'Red fox', '{animal,red}', '{"legs": 4, "color": "red"}', '[1,5)', 'The quick brown fox jumps', 10),
      (2, 'Blue whale', '{animal,blue,sea}', '{"legs": 0, "color": "blue"}', '[10,20)', 'Largest animal in the ocean', null),
      (3, 'Red rose', '{plant,red}', '{"color": "red"}', '[3,8)', 'A flower with thorns', 5),
      (4, 'Oak', '{plant}', '{}', '[20,30)', 'Trees grow slowly', 10),
      (5, null, null, null, null, null, null);`);
});

const specimens = () => serviceClient(ctx.idp).from('specimens').select('id').order('id');
type Query = ReturnType<typeof specimens>;
const ids = (data: unknown) => (data as Array<{ id: number }> | null)?.map((r) => r.id);

const CASES: Array<[string, (q: Query) => Query, number[]]> = [
  // cs, cd, ov on arrays, jsonb and ranges
  ['contains an array', (q) => q.contains('tags', ['red']), [1, 3]],
  ['contains a JSON object', (q) => q.contains('attrs', { color: 'red' }), [1, 3]],
  ['contained by an array', (q) => q.containedBy('tags', ['animal', 'red', 'blue', 'sea']), [1, 2]],
  ['contained by a JSON object', (q) => q.containedBy('attrs', { color: 'red', legs: 4 }), [1, 3, 4]],
  ['overlaps an array', (q) => q.overlaps('tags', ['sea', 'plant']), [2, 3, 4]],
  ['overlaps a range', (q) => q.overlaps('span', '[4,12)'), [1, 2, 3]],
  // range operators
  ['strictly right of (sr)', (q) => q.rangeGt('span', '[1,9)'), [2, 4]],
  ['does not extend to the left of (nxl)', (q) => q.rangeGte('span', '[2,9)'), [2, 3, 4]],
  ['strictly left of (sl)', (q) => q.rangeLt('span', '[9,10)'), [1, 3]],
  ['does not extend to the right of (nxr)', (q) => q.rangeLte('span', '[0,8)'), [1, 3]],
  ['adjacent to (adj)', (q) => q.rangeAdjacent('span', '[5,10)'), [1, 2]],
  // full-text search, with a configuration, on a tsvector and on a text column
  ['fts on a tsvector', (q) => q.textSearch('doc', 'quick & fox'), [1]],
  ['fts with a configuration on text', (q) => q.textSearch('notes', 'trees', { config: 'english' }), [4]],
  ['plfts', (q) => q.textSearch('doc', 'brown fox', { type: 'plain' }), [1]],
  ['phfts', (q) => q.textSearch('doc', 'fox brown', { type: 'phrase' }), []],
  ['phfts in order', (q) => q.textSearch('doc', 'brown fox', { type: 'phrase', config: 'english' }), [1]],
  ['wfts', (q) => q.textSearch('doc', '"largest animal" -tree', { type: 'websearch' }), [2]],
  // regular expressions
  // (supabase-js's .match() is eq on several columns; the operators are written with .filter.)
  ['match', (q) => q.filter('name', 'match', '^Red'), [1, 3]],
  ['match is case-sensitive', (q) => q.filter('name', 'match', '^red'), []],
  ['imatch', (q) => q.filter('name', 'imatch', '^red'), [1, 3]],
  // isdistinct: null is a value like any other
  ['isdistinct', (q) => q.isDistinct('score', 10), [2, 3, 5]],
  // like/ilike with any/all, and the quantified comparisons
  ['like any of', (q) => q.likeAnyOf('name', ['Red*', '*whale']), [1, 2, 3]],
  ['like all of', (q) => q.likeAllOf('name', ['*e*', 'R*']), [1, 3]],
  ['ilike any of', (q) => q.ilikeAnyOf('name', ['oak', 'blue*']), [2, 4]],
  ['ilike all of', (q) => q.ilikeAllOf('name', ['*E*', '*D*']), [1, 3]],
  ['eq(any)', (q) => q.filter('score', 'eq(any)', '{5,10}'), [1, 3, 4]],
  ['gt(all)', (q) => q.filter('score', 'gt(all)', '{1,6}'), [1, 4]],
  // not. with each kind
  ['not cs', (q) => q.not('tags', 'cs', '{red}'), [2, 4]],
  ['not ov', (q) => q.not('span', 'ov', '[4,12)'), [4]],
  ['not sr', (q) => q.not('span', 'sr', '[1,9)'), [1, 3]],
  ['not adj', (q) => q.not('span', 'adj', '[5,10)'), [3, 4]],
  ['not fts', (q) => q.not('doc', 'fts', 'fox'), [2, 3, 4, 5]],
  ['not imatch', (q) => q.not('name', 'imatch', 'o'), [2]],
  ['not isdistinct', (q) => q.not('score', 'isdistinct', '10'), [1, 4]],
  ['not like(any)', (q) => q.not('name', 'like(any)', '{Red*,Oak}'), [2]],
  // or/and trees with each kind, nested and negated (inside a tree a value with a comma is quoted)
  ['or: cs and ilike', (q) => q.or('tags.cs.{sea},name.ilike.oak'), [2, 4]],
  ['or: ov, sl and nested and(match, eq)', (q) => q.or('span.sl."[0,2)",and(name.match.^Red,score.eq.5),tags.ov.{sea}'), [2, 3]],
  ['or: fts with a language, wfts, isdistinct', (q) => q.or('notes.fts(english).trees,doc.wfts.ocean,score.isdistinct.10'), [2, 3, 4, 5]],
  ['or: cd with a JSON object, like(all)', (q) => q.or('attrs.cd.{"legs":0,"color":"blue"},name.like(all).{R*,*se}'), [2, 3, 4]],
  ['or: not.and(adj, nxr), phfts', (q) => q.or('not.and(span.adj."[5,10)",span.nxr."[0,30)"),doc.phfts.quick brown'), [1, 3, 4]],
  ['and: not.cs, imatch', (q) => q.or('and(tags.not.cs.{animal},name.imatch.o)'), [3, 4]],
];

describe('every operator through supabase-js', () => {
  for (const [name, build, expected] of CASES) {
    test(name, async () => {
      const { data, error } = await build(specimens());
      assert.equal(error, null, JSON.stringify(error));
      assert.deepEqual(ids(data), expected);
    });
  }

  test('not.or and not.and as parameters, with the new operators inside', async () => {
    const q = async (query: string) =>
      ids((await idpRequest(ctx.idp, 'GET', `/rest/v1/specimens?select=id&order=id&${query}`, { apikey: ctx.idp.secretKey })).body);
    assert.deepEqual(await q(`not.or=${encodeURIComponent('(tags.cs.{red},span.sr."[15,16)")')}`), [2]);
    assert.deepEqual(await q(`not.and=${encodeURIComponent('(tags.ov.{plant},score.isdistinct.5)')}`), [1, 2, 3]);
  });

  test('values go to PostgreSQL as the column asks: a malformed one is its own error, never SQL', async () => {
    const badRange = await specimens().overlaps('span', '[1,');
    assert.equal(badRange.status, 400);
    assert.equal(badRange.error?.code, '22P02');
    const badJson = await specimens().contains('attrs', '{not json');
    assert.equal(badJson.error?.code, '22P02');
    const badTsQuery = await specimens().textSearch('doc', 'a & & b');
    assert.equal(badTsQuery.error?.code, '42601');
    const injection = await specimens().textSearch('doc', "fox'); drop table public.specimens; --", { type: 'plain' });
    assert.equal(injection.error, null);
    assert.equal((await ctx.db.query('select count(*)::int as n from public.specimens')).rows[0].n, 5);
    const badLanguage = await idpRequest(ctx.idp, 'GET', `/rest/v1/specimens?doc=fts(${encodeURIComponent("english'")}).fox`, {
      apikey: ctx.idp.secretKey,
    });
    assert.equal(badLanguage.status, 400);
    assert.equal((badLanguage.body as { code: string }).code, 'PGRST100');
  });
});

describe('each operator alone, under not., inside or=() and inside not.and=()', () => {
  // Which rows have a value in each column: a comparison with null is null, so not. keeps only those.
  const NON_NULL: Record<string, number[]> = {
    name: [1, 2, 3, 4],
    tags: [1, 2, 3, 4],
    attrs: [1, 2, 3, 4],
    span: [1, 2, 3, 4],
    notes: [1, 2, 3, 4],
    score: [1, 3, 4],
    doc: [1, 2, 3, 4, 5],
  };
  // [column, operator and value as a query parameter writes it, the rows it keeps]
  const OPERATORS: Array<[string, string, number[]]> = [
    ['score', 'eq.10', [1, 4]],
    ['score', 'neq.10', [3]],
    ['score', 'gt.5', [1, 4]],
    ['score', 'gte.5', [1, 3, 4]],
    ['score', 'lt.10', [3]],
    ['score', 'lte.5', [3]],
    ['name', 'like.Red*', [1, 3]],
    ['name', 'ilike.*OAK*', [4]],
    ['name', 'match.^B', [2]],
    ['name', 'imatch.FOX$', [1]],
    ['score', 'in.(5,10)', [1, 3, 4]],
    ['score', 'is.null', [2, 5]],
    ['score', 'isdistinct.5', [1, 2, 4, 5]],
    ['tags', 'cs.{red}', [1, 3]],
    ['tags', 'cd.{plant,red}', [3, 4]],
    ['tags', 'ov.{sea,red}', [1, 2, 3]],
    ['attrs', 'cs.{"legs":4}', [1]],
    ['span', 'sl.[6,9)', [1]],
    ['span', 'sr.[6,9)', [2, 4]],
    ['span', 'nxr.[0,8)', [1, 3]],
    ['span', 'nxl.[3,9)', [2, 3, 4]],
    ['span', 'adj.[5,10)', [1, 2]],
    ['doc', 'fts.fox', [1]],
    ['doc', 'plfts.largest ocean', [2]],
    ['doc', 'phfts.grow slowly', [4]],
    ['doc', 'wfts.flower -tree', [3]],
    ['notes', 'fts(english).thorns', [3]],
    ['name', 'like(any).{*fox,*rose}', [1, 3]],
    ['name', 'ilike(all).{r*,*E*}', [1, 3]],
    ['score', 'eq(any).{5,7}', [3]],
    ['score', 'lt(all).{11,6}', [3]],
  ];
  const get = async (query: string) => {
    const res = await idpRequest(ctx.idp, 'GET', `/rest/v1/specimens?select=id&order=id&${query}`, { apikey: ctx.idp.secretKey });
    assert.equal(res.status, 200, `${query}: ${res.text}`);
    return ids(res.body);
  };
  // Inside a tree a value with a comma or a parenthesis is quoted; a {…} list is taken as it is.
  const inTree = (expr: string) => {
    const dot = expr.indexOf('.');
    const value = expr.slice(dot + 1);
    return /[,()]/.test(value) && !value.startsWith('{') && !value.startsWith('(') ? `${expr.slice(0, dot)}."${value}"` : expr;
  };
  for (const [column, expr, kept] of OPERATORS) {
    test(`${column}=${expr}`, async () => {
      const negated = column === 'score' && expr.startsWith('isdistinct') ? [1, 2, 3, 4, 5] : NON_NULL[column]!;
      const refused = negated.filter((id) => !kept.includes(id));
      const isNull = expr === 'is.null';
      assert.deepEqual(await get(`${column}=${encodeURIComponent(expr)}`), kept, 'alone');
      assert.deepEqual(await get(`${column}=${encodeURIComponent(`not.${expr}`)}`), isNull ? [1, 3, 4] : refused, 'under not.');
      assert.deepEqual(await get(`or=${encodeURIComponent(`(${column}.${inTree(expr)},id.eq.0)`)}`), kept, 'inside or=()');
      assert.deepEqual(
        await get(`not.and=${encodeURIComponent(`(${column}.${inTree(expr)},id.gt.0)`)}`),
        isNull ? [1, 3, 4] : refused,
        'inside not.and=()',
      );
    });
  }
});
