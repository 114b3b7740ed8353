// The three stages of a REST request without a database: parsing (names only, PostgREST's
// QueryParams.hs grammar), planning against a schema snapshot made here (Plan.hs: columns,
// relationships, functions), and the SQL (QueryBuilder.hs / SqlFragment.hs), with the rules that
// keep a request's values out of the SQL text.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RestError } from '../src/idp/rest/errors.js';
import { parseOpExpr, parseOrder, parseQueryParams, parseSelect } from '../src/idp/rest/parse.js';
import { planCall, planDelete, planInsert, planRead, planUpdate } from '../src/idp/rest/plan.js';
import {
  type Column,
  type Relationship,
  type Routine,
  relationshipsOf,
  type SchemaSnapshot,
  type Table,
} from '../src/idp/rest/schema-cache.js';
import { arrayLiteral, renderSettings, renderStatement } from '../src/idp/rest/sql.js';
import { StatementCache } from '../src/idp/rest/statement-cache.js';
import { quoteIdent } from '../src/kit/db.js';

// ---- a schema snapshot, as the cache would read it -------------------------------------------

function table(name: string, columns: Array<[string, string, string?]>, primaryKey: string[] = [], schema = 'public'): Table {
  return {
    schema,
    name,
    isView: false,
    primaryKey,
    columns: new Map(columns.map(([n, type, def]): [string, Column] => [n, { name: n, type, default: def ?? null }])),
  };
}

const TABLES = [
  table(
    'notes',
    [
      ['id', 'bigint'],
      ['user_id', 'uuid', 'auth.uid()'],
      ['title', 'text'],
      ['body', 'text'],
      ['created_at', 'timestamp with time zone', 'now()'],
      ['data', 'jsonb'],
      ['author_id', 'integer'],
      ['editor_id', 'integer'],
    ],
    ['id'],
  ),
  table(
    'people',
    [
      ['id', 'integer'],
      ['name', 'text'],
    ],
    ['id'],
  ),
  table(
    'tags',
    [
      ['id', 'integer'],
      ['name', 'text'],
    ],
    ['id'],
  ),
  table(
    'note_tags',
    [
      ['note_id', 'bigint'],
      ['tag_id', 'integer'],
    ],
    ['note_id', 'tag_id'],
  ),
  table('odd table', [
    ['we"ird', 'text'],
    ['has.dot', 'integer'],
  ]),
];

const FOREIGN_KEYS = [
  fk('notes', 'people', 'notes_author_id_fkey', [['author_id', 'id']]),
  fk('notes', 'people', 'notes_editor_id_fkey', [['editor_id', 'id']]),
  fk('note_tags', 'notes', 'note_tags_note_id_fkey', [['note_id', 'id']]),
  fk('note_tags', 'tags', 'note_tags_tag_id_fkey', [['tag_id', 'id']]),
];

function fk(t: string, ft: string, constraint: string, columns: Array<[string, string]>) {
  return { schema: 'public', table: t, foreign_schema: 'public', foreign_table: ft, constraint, columns, one_to_one: false };
}

const ROUTINES: Routine[] = [
  {
    schema: 'public',
    name: 'add',
    params: [
      { name: 'a', type: 'integer', recordType: 'integer', required: true, variadic: false },
      { name: 'b', type: 'integer', recordType: 'integer', required: false, variadic: false },
    ],
    returns: { schema: 'pg_catalog', name: 'int4', setOf: false, composite: false, columns: [] },
    volatility: 'immutable',
  },
  {
    schema: 'public',
    name: 'echo',
    params: [{ name: '', type: 'jsonb', recordType: 'jsonb', required: true, variadic: false }],
    returns: { schema: 'pg_catalog', name: 'jsonb', setOf: false, composite: false, columns: [] },
    volatility: 'volatile',
  },
  {
    schema: 'public',
    name: 'my_notes',
    params: [],
    returns: { schema: 'public', name: 'notes', setOf: true, composite: true, columns: ['id', 'title'] },
    volatility: 'stable',
  },
];

function snapshotOf(tables: Table[], relationships: Relationship[], routines: Routine[]): SchemaSnapshot {
  const byName = new Map(tables.map((t) => [`${t.schema}.${t.name}`, t]));
  return {
    version: 1,
    schemas: ['public'],
    table: (schema, name) => byName.get(`${schema}.${name}`),
    tableNames: (schema) => tables.filter((t) => t.schema === schema).map((t) => t.name),
    relationships: (schema, name) => relationships.filter((r) => r.table.schema === schema && r.table.name === name),
    relationshipOrigins: (schema) => [...new Set(relationships.filter((r) => r.table.schema === schema).map((r) => r.table.name))],
    routines: (schema, name) => routines.filter((r) => r.schema === schema && r.name === name),
    routineNames: (schema) => routines.filter((r) => r.schema === schema).map((r) => r.name),
  };
}

const tableMap = new Map(TABLES.map((t) => [`public\u0000${t.name}`, t]));
const SNAPSHOT = snapshotOf(TABLES, relationshipsOf(FOREIGN_KEYS, tableMap), ROUTINES);

const p = (query: string) => new URLSearchParams(query);
const q = (query: string) => parseQueryParams(p(query));
const read = (query: string, name = 'notes') => planRead(SNAPSHOT, 'public', name, q(query));
const json = { body: { kind: 'json', stripNulls: false }, count: null } as const;
const sqlOf = (query: string, name = 'notes') => renderStatement(read(query, name), json);

function throwsRest(fn: () => unknown, status: number, code: string, message?: string | RegExp): RestError {
  let caught: RestError | undefined;
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof RestError, `expected RestError, got ${String(err)}`);
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code, err.message);
    if (typeof message === 'string') assert.equal(err.message, message);
    else if (message) assert.match(err.message, message);
    caught = err;
    return true;
  });
  return caught!;
}

describe('RestError', () => {
  it('is an Error with PostgREST fields and a four-key JSON body', () => {
    const e = new RestError(400, 'PGRST100', 'msg');
    assert.ok(e instanceof Error);
    assert.equal(e.name, 'RestError');
    assert.deepEqual(JSON.parse(JSON.stringify(e)), { code: 'PGRST100', details: null, hint: null, message: 'msg' });
    const f = new RestError(409, '23505', 'dup', 'd', 'h');
    assert.deepEqual(f.toJSON(), { code: '23505', details: 'd', hint: 'h', message: 'dup' });
  });
});

describe('quoteIdent', () => {
  it('wraps in double quotes and doubles embedded ones', () => {
    assert.equal(quoteIdent('title'), '"title"');
    assert.equal(quoteIdent('a"b'), '"a""b"');
    assert.equal(quoteIdent('x"; drop table t; --'), '"x""; drop table t; --"');
    assert.equal(quoteIdent(''), '""');
  });
});

// ---- stage 1: parsing ------------------------------------------------------------------------

describe('parse: select', () => {
  const field = (name: string, extra: object = {}) => ({
    kind: 'field',
    field: { name, jsonPath: [] },
    alias: null,
    cast: null,
    aggregate: null,
    ...extra,
  });

  it('reads columns, quoted names with escapes, aliases, casts and JSON paths (names only, nothing checked)', () => {
    assert.deepEqual(parseSelect('id, title'), [field('id'), field('title')]);
    assert.deepEqual(parseSelect('"we\\"ird","has.dot"'), [field('we"ird'), field('has.dot')]);
    assert.deepEqual(parseSelect('heading:title'), [field('title', { alias: 'heading' })]);
    assert.deepEqual(parseSelect('id::text'), [field('id', { cast: 'text' })]);
    assert.deepEqual(parseSelect('data->a->>0'), [
      {
        ...field('data'),
        field: {
          name: 'data',
          jsonPath: [
            { arrow: '->', operand: 'a', index: false },
            { arrow: '->>', operand: '+0', index: true },
          ],
        },
      },
    ]);
    assert.deepEqual(parseSelect('nope, not here'), [field('nope'), field('not here')]);
    assert.deepEqual(parseSelect(''), []);
  });

  it('reads embedded resources with aliases, hints, join types and spreads', () => {
    assert.deepEqual(parseSelect('title,writer:people!notes_author_id_fkey!inner(name),...tags(*)'), [
      field('title'),
      {
        kind: 'relation',
        name: 'people',
        alias: 'writer',
        hint: 'notes_author_id_fkey',
        joinType: 'inner',
        spread: false,
        children: [field('name')],
      },
      { kind: 'relation', name: 'tags', alias: null, hint: null, joinType: null, spread: true, children: [field('*')] },
    ]);
  });

  it('refuses what is not the grammar with PGRST100', () => {
    for (const raw of ['id,', ',id', '"id', '""', '"id"x', 'id;drop table x', 'a(b', 'id::$a$', 'x!(y)', '*x', '"a\u0000b":title']) {
      throwsRest(() => parseSelect(raw), 400, 'PGRST100', `"failed to parse select parameter (${raw})"`);
    }
  });
});

describe('parse: order', () => {
  it('reads column, direction, nulls and related terms', () => {
    const term = (name: string, direction: string | null, nulls: string | null) => ({
      kind: 'field',
      field: { name, jsonPath: [] },
      direction,
      nulls,
    });
    assert.deepEqual(parseOrder('id'), [term('id', null, null)]);
    assert.deepEqual(parseOrder('created_at.desc, id.asc'), [term('created_at', 'desc', null), term('id', 'asc', null)]);
    assert.deepEqual(parseOrder('body.desc.nullsfirst'), [term('body', 'desc', 'first')]);
    assert.deepEqual(parseOrder('body.nullslast'), [term('body', null, 'last')]);
    assert.deepEqual(parseOrder('"has.dot".desc'), [term('has.dot', 'desc', null)]);
    assert.deepEqual(parseOrder('people(name).desc'), [
      { kind: 'relation', relation: 'people', field: { name: 'name', jsonPath: [] }, direction: 'desc', nulls: null },
    ]);
  });

  it('refuses bad syntax with PGRST100', () => {
    for (const raw of ['', 'id.', 'id.up', 'id.desc.asc', 'id.nullsfirst.desc', 'id,,title', '.desc', '"id', 'id;drop table x']) {
      throwsRest(() => parseOrder(raw), 400, 'PGRST100', `"failed to parse order (${raw})"`);
    }
  });
});

describe('parse: filters', () => {
  it('reads every operator, keeping the raw value (dots, commas and all)', () => {
    for (const op of ['eq', 'gt', 'gte', 'lt', 'lte', 'like', 'ilike', 'match', 'imatch']) {
      assert.deepEqual(parseOpExpr(`${op}.a.b,c`), { negate: false, operation: { kind: 'quant', op, quantifier: null, value: 'a.b,c' } });
    }
    for (const op of ['neq', 'cs', 'cd', 'ov', 'sl', 'sr', 'nxr', 'nxl', 'adj']) {
      assert.deepEqual(parseOpExpr(`${op}.{1,2}`), { negate: false, operation: { kind: 'simple', op, value: '{1,2}' } });
    }
    assert.deepEqual(parseOpExpr('like(any).{a*,b*}'), {
      negate: false,
      operation: { kind: 'quant', op: 'like', quantifier: 'any', value: '{a*,b*}' },
    });
    assert.deepEqual(parseOpExpr('not.fts(english).cat & dog'), {
      negate: true,
      operation: { kind: 'fts', op: 'fts', language: 'english', value: 'cat & dog' },
    });
    assert.deepEqual(parseOpExpr('wfts.x'), { negate: false, operation: { kind: 'fts', op: 'wfts', language: null, value: 'x' } });
    assert.deepEqual(parseOpExpr('isdistinct.5'), { negate: false, operation: { kind: 'isdistinct', value: '5' } });
    assert.deepEqual(parseOpExpr('eq.'), { negate: false, operation: { kind: 'quant', op: 'eq', quantifier: null, value: '' } });
  });

  it('reads in lists with quoted elements and backslash escapes, and is values in any case', () => {
    assert.deepEqual(parseOpExpr('in.(a,b,"c,d","e\\"f","(g)","")').operation, { kind: 'in', values: ['a', 'b', 'c,d', 'e"f', '(g)', ''] });
    assert.deepEqual(parseOpExpr('in.()').operation, { kind: 'in', values: [] });
    assert.deepEqual(parseOpExpr('not.in.(1,2)'), { negate: true, operation: { kind: 'in', values: ['1', '2'] } });
    for (const v of ['null', 'true', 'false', 'unknown', 'NULL']) {
      assert.deepEqual(parseOpExpr(`is.${v}`).operation, { kind: 'is', value: v.toLowerCase() });
    }
  });

  it('refuses malformed lists, is values, unknown operators and values without one', () => {
    for (const raw of ['in.1,2', 'in.(1,2', 'in.1,2)', 'in.(a(b),c)', 'in.("a"b)', 'in.("a)', 'in.(a"b)']) {
      throwsRest(() => parseOpExpr(raw), 400, 'PGRST100', `"failed to parse filter (${raw})"`);
    }
    for (const raw of [
      'is.nil',
      'is.',
      'is.1',
      'is.null;drop table x',
      'eqq.5',
      '5',
      'eq',
      'not.5',
      'not.not.eq.5',
      '',
      'EQ.5',
      'eq(some).x',
      'in(any).(1)',
    ]) {
      throwsRest(() => parseOpExpr(raw), 400, 'PGRST100', `"failed to parse filter (${raw})"`);
    }
  });

  it('keys: a column, an embed path and a JSON path; reserved keys are not filters', () => {
    const parsed = q('select=id&order=id&limit=1&offset=2&columns=x&on_conflict=id&id=gt.1&id=lt.9&people.name=eq.x&data->>a=eq.1');
    assert.deepEqual(
      parsed.filters.map((f) => [f.path, f.filter.field.name, f.filter.field.jsonPath.length]),
      [
        [[], 'id', 0],
        [[], 'id', 0],
        [['people'], 'name', 0],
        [[], 'data', 1],
      ],
    );
    assert.deepEqual(parsed.ranges, [{ path: [], limit: 1, offset: 2 }]);
    assert.deepEqual(parsed.columns, ['x']);
    assert.deepEqual(parsed.onConflict, ['id']);
    throwsRest(() => q(`${encodeURIComponent('title"; drop table x; --')}=eq.1`), 400, 'PGRST100');
    throwsRest(() => q(`${encodeURIComponent('id;drop table notes--')}=eq.1`), 400, 'PGRST100');
  });

  it('a function read keeps the parameters without an operator as its arguments', () => {
    const parsed = parseQueryParams(p('a=1&b=eq.2&select=x'), { rpcRead: true });
    assert.deepEqual(parsed.rpcArgs, [['a', '1']]);
    assert.equal(parsed.filters.length, 1);
  });

  it('limit and offset are non-negative integers', () => {
    assert.deepEqual(q('limit=10&offset=0&people.limit=2').ranges, [
      { path: [], limit: 10, offset: 0 },
      { path: ['people'], limit: 2, offset: null },
    ]);
    for (const raw of ['-1', '1.5', 'abc', '', ' 1', '1e3', '0x10', '99999999999999999999', '1;drop']) {
      throwsRest(() => q(`limit=${encodeURIComponent(raw)}`), 400, 'PGRST100', `"failed to parse limit parameter (${raw})"`);
      throwsRest(() => q(`offset=${encodeURIComponent(raw)}`), 400, 'PGRST100', `"failed to parse offset parameter (${raw})"`);
    }
  });
});

describe('parse: logic trees', () => {
  const eq = (name: string, value: string, negate = false) => ({
    kind: 'filter',
    filter: { field: { name, jsonPath: [] }, expr: { negate, operation: { kind: 'quant', op: 'eq', quantifier: null, value } } },
  });

  it('reads or/and trees, nested and negated, for the table and for embedded resources', () => {
    const parsed = q(`or=${encodeURIComponent('(id.eq.1,and(title.eq.a,body.not.eq.b),not.or(id.eq.2))')}&people.not.and=(name.eq.x)`);
    assert.deepEqual(parsed.logic, [
      {
        path: [],
        tree: {
          kind: 'logic',
          op: 'or',
          negate: false,
          children: [
            eq('id', '1'),
            { kind: 'logic', op: 'and', negate: false, children: [eq('title', 'a'), eq('body', 'b', true)] },
            { kind: 'logic', op: 'or', negate: true, children: [eq('id', '2')] },
          ],
        },
      },
      { path: ['people'], tree: { kind: 'logic', op: 'and', negate: true, children: [eq('name', 'x')] } },
    ]);
  });

  it('values: quoted (with , ) and escapes), {arrays}, in lists, is; a quote not closing a value is text', () => {
    const [tree] = q(`or=${encodeURIComponent('(title.eq."a,b)\\"c",body.eq.{1,2},id.in.(1,"2,3"),body.is.NULL,title.eq.x"y)')}`).logic;
    const children = (tree!.tree as { children: Array<{ filter: { expr: { operation: unknown } } }> }).children;
    assert.deepEqual(
      children.map((c) => c.filter.expr.operation),
      [
        { kind: 'quant', op: 'eq', quantifier: null, value: 'a,b)"c' },
        { kind: 'quant', op: 'eq', quantifier: null, value: '{1,2}' },
        { kind: 'in', values: ['1', '2,3'] },
        { kind: 'is', value: 'null' },
        { kind: 'quant', op: 'eq', quantifier: null, value: 'x"y' },
      ],
    );
  });

  it('a malformed tree is PGRST100 "failed to parse logic tree"', () => {
    for (const raw of [
      '()',
      '(id.eq.1',
      'id.eq.1',
      '(id.eqq.1)',
      '(id)',
      '(id.in.1)',
      '(xor(id.eq.1))',
      '(id.eq.1))',
      '(id.eq.1,)',
      '(,id.eq.1)',
    ]) {
      throwsRest(() => q(`or=${encodeURIComponent(raw)}`), 400, 'PGRST100', `"failed to parse logic tree (${raw})"`);
    }
  });

  it('nests up to 32 levels; deeper is PGRST100, however deep (no stack overflow)', () => {
    const nest = (levels: number) => `or=${encodeURIComponent(`(${'and('.repeat(levels - 1)}id.eq.1${')'.repeat(levels)}`)}`;
    assert.equal(q(nest(32)).logic.length, 1);
    throwsRest(() => q(nest(33)), 400, 'PGRST100');
    throwsRest(() => q(nest(5000)), 400, 'PGRST100');
    throwsRest(() => parseSelect(`${'a('.repeat(5000)}x${')'.repeat(5000)}`), 400, 'PGRST100');
  });
});

// ---- stage 2: planning -----------------------------------------------------------------------

describe('plan: names against the schema cache', () => {
  it('unknown tables are PGRST205 with the closest name as a hint, and marked as a miss', () => {
    const err = throwsRest(() => read('', 'note'), 404, 'PGRST205', "Could not find the table 'public.note' in the schema cache");
    assert.equal(err.hint, "Perhaps you meant the table 'public.notes'");
    assert.equal(err.schemaMiss, true);
  });

  it('unknown columns anywhere are 42703, marked as a miss; so are unknown body keys (PGRST204)', () => {
    for (const query of [
      'select=id,nope',
      'order=nope.desc',
      'nope=eq.1',
      'or=(nope.eq.1)',
      'select=id,people!notes_author_id_fkey(nope)',
    ]) {
      const err = throwsRest(() => read(query), 400, '42703', /column (notes|people)\.nope does not exist/);
      assert.equal(err.schemaMiss, true);
    }
    const write = { representation: false, applyDefaults: false, resolution: null };
    const err = throwsRest(
      () => planInsert(SNAPSHOT, 'public', 'notes', q(''), { title: 't', nope: 1 }, write),
      400,
      'PGRST204',
      "Could not find the 'nope' column of 'notes' in the schema cache",
    );
    assert.equal(err.schemaMiss, true);
  });

  it('relationships: a missing one is PGRST200, several are PGRST201 with their details and the hints that pick one', () => {
    const missing = throwsRest(
      () => read('select=*,tag(*)'),
      400,
      'PGRST200',
      "Could not find a relationship between 'notes' and 'tag' in the schema cache",
    );
    assert.equal(
      missing.details,
      "Searched for a foreign key relationship between 'notes' and 'tag' in the schema 'public', but no matches were found.",
    );
    assert.equal(missing.hint, "Perhaps you meant 'tags' instead of 'tag'.");
    assert.equal(missing.schemaMiss, true);
    const ambiguous = throwsRest(() => read('select=*,people(*)'), 300, 'PGRST201');
    assert.deepEqual(ambiguous.details, [
      {
        cardinality: 'many-to-one',
        embedding: 'notes with people',
        relationship: 'notes_author_id_fkey using notes(author_id) and people(id)',
      },
      {
        cardinality: 'many-to-one',
        embedding: 'notes with people',
        relationship: 'notes_editor_id_fkey using notes(editor_id) and people(id)',
      },
    ]);
    assert.equal(
      ambiguous.hint,
      "Try changing 'people' to one of the following: 'people!notes_author_id_fkey', 'people!notes_editor_id_fkey'. Find the desired relationship in the 'details' key.",
    );
    assert.equal(ambiguous.schemaMiss, false);
    // A hint, a foreign key's column as the target, or the foreign key's name picks one.
    for (const select of ['people!notes_author_id_fkey(*)', 'people!author_id(*)', 'author_id(*)', 'notes_author_id_fkey(*)']) {
      assert.equal(read(`select=${select}`).root.children[0]!.embedding!.relationship.cardinality.kind, 'm2o', select);
    }
  });

  it('one-to-many and many-to-many (through the junction) are found from either side', () => {
    const tags = read('select=id,tags(name)').root.children[0]!;
    assert.equal(tags.embedding!.relationship.cardinality.kind, 'm2m');
    assert.equal(tags.embedding!.junction?.table.name, 'note_tags');
    const notes = read('select=name,notes!notes_author_id_fkey(title)', 'people').root.children[0]!;
    assert.equal(notes.embedding!.relationship.cardinality.kind, 'o2m');
  });

  it('embedded-resource parameters must name an embedded resource (PGRST108); related orders and spreads need to-one (PGRST118, PGRST119)', () => {
    throwsRest(() => read('tags.name=eq.x'), 400, 'PGRST108', "'tags' is not an embedded resource in this request");
    throwsRest(() => read('select=*,tags(*)&order=tags(name)'), 400, 'PGRST118', "A related order on 'tags' is not possible");
    throwsRest(() => read('select=*,...tags(name)'), 400, 'PGRST119', "A spread operation on 'tags' is not possible");
    throwsRest(() => read('select=count()'), 400, 'PGRST123', 'Use of aggregate functions is not allowed');
  });

  it('an is.null filter on an embedded resource tests whether it matched', () => {
    const node = read('select=*,tags(*)&tags=not.is.null').root;
    assert.equal(node.where[0]!.kind, 'embed-null');
  });

  it('writes: bodies must be objects (PGRST102); PATCH and DELETE need a filter (21000) and take no limit/offset', () => {
    const write = { representation: false, applyDefaults: false, resolution: null };
    for (const body of [[1], [null], [[]], ['x'], null, 5]) {
      throwsRest(() => planInsert(SNAPSHOT, 'public', 'notes', q(''), body, write), 400, 'PGRST102');
    }
    throwsRest(() => planUpdate(SNAPSHOT, 'public', 'notes', q(''), { title: 'x' }, write), 400, '21000', 'UPDATE requires a WHERE clause');
    throwsRest(() => planDelete(SNAPSHOT, 'public', 'notes', q('select=id'), write), 400, '21000', 'DELETE requires a WHERE clause');
    throwsRest(() => planUpdate(SNAPSHOT, 'public', 'notes', q('id=gt.1&limit=1'), { title: 'x' }, write), 400, 'PGRST100');
    throwsRest(() => planDelete(SNAPSHOT, 'public', 'notes', q('id=gt.1&offset=1'), write), 400, 'PGRST100');
    throwsRest(() => planUpdate(SNAPSHOT, 'public', 'notes', q('id=eq.1'), [] as never, write), 400, 'PGRST102');
  });

  it('functions: the overload the arguments fit; none is PGRST202 with a hint, several PGRST203', () => {
    const call = (name: string, body: unknown, singleObject = false) =>
      planCall(SNAPSHOT, 'public', name, q(''), { method: 'POST', singleObject, body });
    assert.equal(call('add', { a: 1 }).args.kind, 'named');
    assert.equal(call('add', { a: 1, b: 2 }).readOnly, true);
    assert.equal(call('echo', [1, 2]).args.kind, 'single');
    assert.equal(call('echo', { anything: 1 }).readOnly, false);
    const missing = throwsRest(
      () => call('add', { c: 1 }),
      404,
      'PGRST202',
      'Could not find the function public.add(c) in the schema cache',
    );
    assert.equal(
      missing.details,
      'Searched for the function public.add with parameter c or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.',
    );
    assert.equal(missing.schemaMiss, true);
    const near = throwsRest(() => call('ad', {}), 404, 'PGRST202');
    assert.equal(near.hint, null, 'two letters are not 75% similar to three');
    assert.equal(throwsRest(() => call('my_note', {}), 404, 'PGRST202').hint, 'Perhaps you meant to call the function public.my_notes');
    const byGet = planCall(SNAPSHOT, 'public', 'add', parseQueryParams(p('a=1&b=2'), { rpcRead: true }), {
      method: 'GET',
      singleObject: false,
      body: undefined,
    });
    assert.deepEqual(JSON.parse((byGet.args as { body: string }).body), { a: '1', b: '2' });
  });
});

// ---- stage 3: SQL ----------------------------------------------------------------------------

describe('SQL', () => {
  it('a read aggregates the rows to JSON text in PostgreSQL; * is the table row, so a dropped column cannot break it', () => {
    const s = sqlOf('select=*&order=created_at.desc');
    assert.equal(
      s.text,
      `SELECT coalesce(json_agg(_postgrest_t), '[]')::text AS body, count(*)::int AS n, NULL::int AS total, NULL::int AS inserted ` +
        `FROM (SELECT "public"."notes".* FROM "public"."notes" ORDER BY "public"."notes"."created_at" DESC) AS _postgrest_t`,
    );
    assert.deepEqual(s.values, []);
  });

  it('filter values are bound untyped (PostgreSQL reads them as the column asks), then limit and offset', () => {
    const s = sqlOf(
      'select=id,title&id=eq.abc&title=not.in.(x,"y,z")&body=is.null&created_at=gte.2026-01-01&order=id.desc.nullslast,title&limit=5&offset=10',
    );
    assert.equal(
      s.text.slice(s.text.indexOf('FROM (') + 6, -' ) AS _postgrest_t'.length + 1),
      `SELECT "public"."notes"."id", "public"."notes"."title" FROM "public"."notes" WHERE "public"."notes"."id" = $1 ` +
        `AND NOT ("public"."notes"."title" = ANY($2)) AND "public"."notes"."body" IS NULL AND "public"."notes"."created_at" >= $3 ` +
        `ORDER BY "public"."notes"."id" DESC NULLS LAST, "public"."notes"."title" LIMIT $4 OFFSET $5`,
    );
    assert.deepEqual(s.values, ['abc', '{"x","y,z"}', '2026-01-01', '5', '10']);
  });

  it('renders each operator', () => {
    const where = (query: string) => {
      const s = sqlOf(`select=id&${query}`);
      return { where: /WHERE (.*)\) AS _postgrest_t$/.exec(s.text)?.[1]?.replaceAll('"public"."notes".', ''), values: s.values };
    };
    assert.deepEqual(where('id=neq.1'), { where: '"id" <> $1', values: ['1'] });
    assert.deepEqual(where('title=like.a*b'), { where: '"title" LIKE $1', values: ['a%b'] });
    assert.deepEqual(where('title=ilike(any).{a*,b}'), { where: '"title" ILIKE ANY($1)', values: ['{a%,b}'] });
    assert.deepEqual(where('title=match(all).{^a,b$}'), { where: '"title" ~ ALL($1)', values: ['{^a,b$}'] });
    assert.deepEqual(where('title=imatch.^a'), { where: '"title" ~* $1', values: ['^a'] });
    assert.deepEqual(where('data=cs.{"a":1}'), { where: '"data" @> $1', values: ['{"a":1}'] });
    assert.deepEqual(where('data=cd.{}'), { where: '"data" <@ $1', values: ['{}'] });
    assert.deepEqual(where('id=ov.[1,2]'), { where: '"id" && $1', values: ['[1,2]'] });
    for (const [op, sql] of [
      ['sl', '<<'],
      ['sr', '>>'],
      ['nxr', '&<'],
      ['nxl', '&>'],
      ['adj', '-|-'],
    ]) {
      assert.deepEqual(where(`id=${op}.(1,5)`), { where: `"id" ${sql} $1`, values: ['(1,5)'] });
    }
    assert.deepEqual(where('title=fts(english).cat'), { where: `"title" @@ to_tsquery($1, $2)`, values: ['english', 'cat'] });
    assert.deepEqual(where('title=plfts.a b'), { where: `"title" @@ plainto_tsquery($1)`, values: ['a b'] });
    assert.deepEqual(where('title=phfts.a b'), { where: `"title" @@ phraseto_tsquery($1)`, values: ['a b'] });
    assert.deepEqual(where('title=not.wfts.a -b'), { where: `NOT ("title" @@ websearch_to_tsquery($1))`, values: ['a -b'] });
    assert.deepEqual(where('id=isdistinct.1'), { where: '"id" IS DISTINCT FROM $1', values: ['1'] });
    assert.deepEqual(where('id=in.()'), { where: '"id" = ANY($1)', values: ['{}'] });
    assert.deepEqual(where('body=not.is.unknown'), { where: 'NOT ("body" IS UNKNOWN)', values: [] });
    assert.deepEqual(where('data->a->>0=eq.x'), { where: `"data"->$1->>$2::int = $3`, values: ['a', '+0', 'x'] });
    assert.deepEqual(where('title->>a=eq.x'), { where: `to_jsonb("title")->>$1 = $2`, values: ['a', 'x'] });
  });

  it('or/and trees render parenthesised with every value bound', () => {
    const s = sqlOf(`select=id&or=${encodeURIComponent('(title.ilike.*x*,and(id.gte.1,id.lte.2))')}&not.or=(body.like.a*)`);
    assert.match(
      s.text.replaceAll('"public"."notes".', ''),
      /WHERE \("title" ILIKE \$1 OR \("id" >= \$2 AND "id" <= \$3\)\) AND NOT \("body" LIKE \$4\)/,
    );
    assert.deepEqual(s.values, ['%x%', '1', '2', 'a%']);
  });

  it('embedding: a lateral subquery per resource, as JSON; spreads flatten; !inner filters the parent', () => {
    const s = sqlOf(
      'select=title,writer:people!notes_author_id_fkey(name),tags!inner(name),...people!editor_id(editor:name)&tags.order=name&tags.limit=2',
    );
    assert.equal(
      s.text.slice(s.text.indexOf('FROM (') + 6, -' ) AS _postgrest_t'.length + 1),
      `SELECT "public"."notes"."title", row_to_json("notes_writer_1".*)::jsonb AS "writer", ` +
        `COALESCE("notes_tags_1"."notes_tags_1", '[]') AS "tags", "notes_people_1"."editor" FROM "public"."notes" ` +
        `LEFT JOIN LATERAL (SELECT "people_1"."name" FROM "public"."people" AS "people_1" WHERE "people_1"."id" = "public"."notes"."author_id") AS "notes_writer_1" ON TRUE ` +
        `INNER JOIN LATERAL (SELECT json_agg("notes_tags_1")::jsonb AS "notes_tags_1" FROM (SELECT "tags_1"."name" FROM "public"."tags" AS "tags_1", "public"."note_tags" AS "note_tags_1" ` +
        `WHERE "note_tags_1"."tag_id" = "tags_1"."id" AND "note_tags_1"."note_id" = "public"."notes"."id" ORDER BY "tags_1"."name" LIMIT $1) AS "notes_tags_1") AS "notes_tags_1" ON "notes_tags_1" IS NOT NULL ` +
        `LEFT JOIN LATERAL (SELECT "people_1"."name" AS "editor" FROM "public"."people" AS "people_1" WHERE "people_1"."id" = "public"."notes"."editor_id") AS "notes_people_1" ON TRUE`,
    );
    assert.deepEqual(s.values, ['2']);
  });

  it('the count ignores limit and offset and builds no embedded JSON, keeping only what filters', () => {
    const s = renderStatement(read('select=id,tags!inner(name),writer:people!notes_author_id_fkey(name)&writer=is.null&limit=1'), {
      ...json,
      count: { upTo: null },
    });
    const count = /, \((SELECT count\(\*\) FROM .*) AS pgrst_source_count\)::int AS total/.exec(s.text)?.[1];
    assert.equal(
      count,
      `SELECT count(*) FROM (SELECT 1 FROM "public"."notes" WHERE ` +
        `NOT EXISTS (SELECT 1 FROM "public"."people" AS "people_1" WHERE "people_1"."id" = "public"."notes"."author_id") AND ` +
        `EXISTS (SELECT 1 FROM "public"."tags" AS "tags_1", "public"."note_tags" AS "note_tags_1" ` +
        `WHERE "note_tags_1"."tag_id" = "tags_1"."id" AND "note_tags_1"."note_id" = "public"."notes"."id"))`,
    );
    assert.match(s.text, /WHERE "notes_writer_1" IS NOT DISTINCT FROM NULL LIMIT \$1\) AS _postgrest_t$/);
    const upTo = renderStatement(read('select=id'), { ...json, count: { upTo: 1000 } });
    assert.match(upTo.text, /\(SELECT count\(\*\) FROM \(SELECT 1 FROM "public"."notes" LIMIT 1001\) AS pgrst_source_count\)/);
  });

  it('inserts take only the listed columns from one JSON parameter; missing=default fills from the catalog defaults', () => {
    const write = { representation: true, applyDefaults: false, resolution: null };
    const plain = renderStatement(
      planInsert(SNAPSHOT, 'public', 'notes', q('select=id'), [{ title: 'a' }, { body: 'b', title: 'c' }], write),
      json,
    );
    assert.match(
      plain.text,
      /^WITH pgrst_source AS \(INSERT INTO "public"."notes" \("title", "body"\) SELECT "title", "body" FROM json_populate_recordset\(NULL::"public"."notes", \$1::json\) AS pgrst_body RETURNING "public"."notes"."id"\) /,
    );
    assert.deepEqual(JSON.parse(plain.values[0]!), [{ title: 'a' }, { body: 'b', title: 'c' }]);
    const defaults = renderStatement(
      planInsert(SNAPSHOT, 'public', 'notes', q('columns=title,created_at'), [{ title: 'a' }], { ...write, applyDefaults: true }),
      json,
    );
    assert.match(
      defaults.text,
      /jsonb_agg\(jsonb_build_object\('created_at', now\(\)\) \|\| elem\) FROM jsonb_array_elements\(\$1::jsonb\)/,
    );
    const empty = renderStatement(planInsert(SNAPSHOT, 'public', 'notes', q(''), {}, { ...write, representation: false }), json);
    assert.match(empty.text, /INSERT INTO "public"."notes" SELECT {2}FROM json_populate_recordset/);
  });

  it('upserts: ON CONFLICT on the primary key or on_conflict, counting the rows really inserted', () => {
    const upsert = (query: string, body: object, resolution: 'merge-duplicates' | 'ignore-duplicates') =>
      renderStatement(
        planInsert(SNAPSHOT, 'public', 'notes', q(query), body, { representation: false, applyDefaults: false, resolution }),
        json,
      ).text;
    assert.match(
      upsert('', { id: 1, title: 't' }, 'merge-duplicates'),
      /ON CONFLICT \("id"\) DO UPDATE SET "id" = EXCLUDED."id", "title" = EXCLUDED."title" WHERE set_config\('pgrst.inserted'/,
    );
    assert.match(
      upsert('on_conflict=title,body', { title: 't' }, 'ignore-duplicates'),
      /ON CONFLICT \("title", "body"\) DO NOTHING RETURNING 1/,
    );
    assert.match(upsert('', {}, 'merge-duplicates'), /ON CONFLICT \("id"\) DO NOTHING/);
    assert.doesNotMatch(
      renderStatement(
        planInsert(
          SNAPSHOT,
          'public',
          'odd table',
          q(''),
          { 'has.dot': 1 },
          { representation: false, applyDefaults: false, resolution: 'merge-duplicates' },
        ),
        json,
      ).text,
      /ON CONFLICT/,
      'no key, no on_conflict: nothing to merge on',
    );
    throwsRest(() => upsert('on_conflict=nope', { id: 1 }, 'merge-duplicates'), 400, '42703');
  });

  it('updates and deletes: filters on the table, the body as one JSON parameter; an empty patch updates nothing', () => {
    const write = { representation: false, applyDefaults: false, resolution: null };
    const u = renderStatement(planUpdate(SNAPSHOT, 'public', 'notes', q('id=eq.1'), { title: 'n', body: null }, write), json);
    assert.match(
      u.text,
      /UPDATE "public"."notes" SET \("title", "body"\) = \(SELECT "title", "body" FROM json_populate_record\(NULL::"public"."notes", \$1::json\)\) WHERE "public"."notes"."id" = \$2 RETURNING 1/,
    );
    assert.deepEqual(u.values, ['{"title":"n","body":null}', '1']);
    assert.deepEqual(
      renderStatement(planUpdate(SNAPSHOT, 'public', 'notes', q('id=eq.1'), {}, { ...write, representation: true }), json).text,
      `SELECT '[]'::text AS body, 0 AS n, NULL::int AS total, NULL::int AS inserted`,
    );
    const d = renderStatement(planDelete(SNAPSHOT, 'public', 'notes', q('id=eq.5'), write), json);
    assert.match(d.text, /DELETE FROM "public"."notes" WHERE "public"."notes"."id" = \$1 RETURNING 1/);
  });

  it('calls: named arguments read from JSON as the parameter types; a single json argument as is', () => {
    const named = renderStatement(
      planCall(SNAPSHOT, 'public', 'add', q(''), { method: 'POST', singleObject: false, body: { a: 1 } }),
      json,
    );
    assert.match(
      named.text,
      /^WITH pgrst_source AS \(SELECT "public"."add"\("a" := pgrst_body."a"\) AS pgrst_scalar FROM json_to_record\(\$1::json\) AS pgrst_body\("a" integer\)\)/,
    );
    const single = renderStatement(planCall(SNAPSHOT, 'public', 'echo', q(''), { method: 'POST', singleObject: false, body: [1] }), json);
    assert.match(single.text, /SELECT "public"."echo"\(\$1::jsonb\) AS pgrst_scalar/);
    assert.match(single.text, /coalesce\(\(json_agg\(_postgrest_t.pgrst_scalar\)->0\)::text, 'null'\)/);
    const rows = renderStatement(
      planCall(SNAPSHOT, 'public', 'my_notes', q('select=id&id=gt.1'), { method: 'GET', singleObject: false, body: undefined }),
      json,
    );
    assert.match(rows.text, /SELECT pgrst_call.\* FROM "public"."my_notes"\(\) AS pgrst_call\)/);
    assert.match(rows.text, /FROM "pgrst_source" AS "notes" WHERE "notes"."id" > \$1/);
  });

  it('the settings: all bound, transaction-local, read-only for a read', () => {
    const s = renderSettings({
      role: 'authenticated',
      claims: { role: 'authenticated', sub: "x'y" },
      method: 'GET',
      path: '/notes',
      schema: 'api',
      readOnly: true,
    });
    assert.equal(
      s.text,
      `SELECT set_config('search_path', $1, true), set_config('role', $2, true), set_config('request.jwt.claims', $3, true), ` +
        `set_config('request.method', $4, true), set_config('request.path', $5, true), set_config('transaction_read_only', 'on', true)`,
    );
    assert.deepEqual(s.values, ['"api", "public"', 'authenticated', `{"role":"authenticated","sub":"x'y"}`, 'GET', '/notes']);
  });

  it('array literals quote every element', () => {
    assert.equal(arrayLiteral(['a', 'b,c', 'd"e', 'f\\g', 'NULL', '']), '{"a","b,c","d\\"e","f\\\\g","NULL",""}');
    assert.equal(arrayLiteral(['x\u0000y']), '{"x"}');
  });
});

describe('request values never reach the SQL text', () => {
  const evil = [
    `title"; drop table x; --`,
    `'; drop table notes; --`,
    `1 or 1=1`,
    `$$; drop table x; $$`,
    `) t; delete from notes; --`,
    `\\"); drop table x; --`,
    `x\u0000y`,
  ];
  const write = { representation: true, applyDefaults: false, resolution: null };

  it('filter values, in-list elements, JSON keys and body values are only bound', () => {
    for (const v of evil) {
      const enc = encodeURIComponent(v);
      const quoted = encodeURIComponent(`"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
      const statements = [
        sqlOf(`title=eq.${enc}&body=not.in.(${quoted},b)&data->${quoted}=eq.${enc}`),
        sqlOf(`title=fts(english).${enc}&body=like(any).${enc}`),
        renderStatement(planInsert(SNAPSHOT, 'public', 'notes', q(''), [{ title: v, body: v }], write), json),
        renderStatement(planUpdate(SNAPSHOT, 'public', 'notes', q(`title=neq.${enc}`), { title: v }, write), json),
        renderStatement(planDelete(SNAPSHOT, 'public', 'notes', q(`title=lt.${enc}`), write), json),
        renderStatement(
          planCall(SNAPSHOT, 'public', 'add', parseQueryParams(p(`a=${enc}`), { rpcRead: true }), {
            method: 'GET',
            singleObject: false,
            body: undefined,
          }),
          json,
        ),
      ];
      for (const s of statements) {
        assert.ok(!s.text.includes(v), `${JSON.stringify(v)} leaked into ${s.text}`);
        const bound = s.values.some(
          (x) => typeof x === 'string' && (x.includes(v.split('\u0000')[0]!) || x.includes(JSON.stringify(v).slice(1, -1))),
        );
        assert.ok(bound, `${JSON.stringify(v)} should be bound in ${JSON.stringify(s.values)}`);
      }
    }
  });

  it('hostile names in select, order, filter keys, columns and body keys are refused (aliases are quoted)', () => {
    for (const v of evil) {
      const enc = encodeURIComponent(v);
      const attempts: Array<() => unknown> = [
        () => sqlOf(`select=${enc}`),
        () => sqlOf(`select=${encodeURIComponent(`"${v}"`)}`),
        () => sqlOf(`order=${enc}`),
        () => sqlOf(`order=id.${enc}`),
        () => sqlOf(`${enc}=eq.1`),
        () => sqlOf(`id=${enc}`),
        () => sqlOf(`limit=${enc}`),
        () => sqlOf(`select=id::${enc}`),
        () => planInsert(SNAPSHOT, 'public', 'notes', q(''), { [v]: 1 }, write),
        () => planInsert(SNAPSHOT, 'public', 'notes', q(`columns=${enc}`), { title: 'x' }, write),
        () => planUpdate(SNAPSHOT, 'public', 'notes', q('id=eq.1'), { [v]: 1 }, write),
        () => planDelete(SNAPSHOT, 'public', 'notes', q(`${enc}=eq.1`), write),
      ];
      for (const attempt of attempts) {
        assert.throws(attempt, (err: unknown) => err instanceof RestError && err.status === 400, `${v}`);
      }
      // An alias is the request's own name for an output column: quoted, whatever it holds (but a NUL).
      if (v.includes('\u0000')) continue;
      const aliased = sqlOf(`select=${encodeURIComponent(`"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}":title`)}`);
      assert.ok(aliased.text.includes(`AS ${quoteIdent(v)}`));
    }
  });

  it('the SQL text depends only on the shape of the request, never on its values (property)', () => {
    const expected = sqlOf('title=eq.X&id=in.(1,2)&limit=1').text;
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), (a, b, c) => {
        const params = new URLSearchParams();
        params.append('title', `eq.${a}`);
        const quote = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
        params.append('id', `in.(${quote(b)},${quote(c)})`);
        params.append('limit', '1');
        const s = renderStatement(planRead(SNAPSHOT, 'public', 'notes', parseQueryParams(params)), json);
        assert.equal(s.text, expected);
        assert.deepEqual(s.values, [a, arrayLiteral([b, c]), '1']);
      }),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('title', 'body'), fc.string(), { minKeys: 1 }), (row) => {
        const s = renderStatement(planInsert(SNAPSHOT, 'public', 'notes', q(''), row, write), json);
        assert.deepEqual(JSON.parse(s.values[0]!), [{ ...row }]);
        for (const v of Object.values(row)) if (v.length > 3) assert.ok(!s.text.includes(v));
      }),
    );
  });
});

describe('the statement cache of reads', () => {
  const prepared = (text: string) => ({ plan: read(''), statement: { text, values: [] }, explain: null });

  it('keeps a read by its key for one schema version, and forgets everything when the version changes', () => {
    const cache = new StatementCache();
    assert.equal(cache.get(1, 'a'), undefined);
    cache.set(1, 'a', prepared('A'));
    assert.equal(cache.get(1, 'a')?.statement.text, 'A');
    assert.equal(cache.get(2, 'a'), undefined, 'a reloaded schema may plan it differently');
    cache.set(1, 'b', prepared('B'));
    assert.equal(cache.get(2, 'b'), undefined, 'a plan of an older version is not kept');
  });

  it('is bounded: the least recently used goes first, and oversized entries are not kept', () => {
    const cache = new StatementCache();
    cache.get(1, '');
    for (let i = 0; i < 1000; i++) cache.set(1, `k${i}`, prepared(`S${i}`));
    assert.ok(cache.get(1, 'k0'), 'used again: now the most recent');
    cache.set(1, 'k1000', prepared('S1000'));
    assert.equal(cache.get(1, 'k1'), undefined, 'the least recently used was dropped');
    assert.ok(cache.get(1, 'k0'));
    cache.set(1, 'x'.repeat(5000), prepared('long key'));
    assert.equal(cache.get(1, 'x'.repeat(5000)), undefined);
    cache.set(1, 'big', prepared('y'.repeat(20_000)));
    assert.equal(cache.get(1, 'big'), undefined);
  });
});
