import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  buildDelete,
  buildInsert,
  buildSelect,
  buildUpdate,
  parseConditions,
  parseFilters,
  parseLimitOffset,
  parseOrder,
  parseSelect,
  type TableInfo,
} from '../src/idp/rest/query.js';
import { RestError } from '../src/idp/rest/errors.js';
import { quoteIdent } from '../src/kit/db.js';

const notes: TableInfo = {
  schema: 'public',
  name: 'notes',
  columns: new Map([
    ['id', { type: 'bigint' }],
    ['user_id', { type: 'uuid' }],
    ['title', { type: 'text' }],
    ['body', { type: 'text' }],
    ['created_at', { type: 'timestamp with time zone' }],
  ]),
};

// Catalog names and types a request could never choose, to check quoting and the type-name guard.
const odd: TableInfo = {
  schema: 'my"schema',
  name: 'odd table',
  columns: new Map([
    ['we"ird', { type: 'text' }],
    ['has.dot', { type: 'integer' }],
    ['email', { type: 'character varying(255)' }],
    ['tags', { type: 'text[]' }],
    ['evil_type', { type: 'bigint; drop table x' }],
    ['spacey_type', { type: 'int or true' }],
    ['price', { type: 'double precision' }],
    ['flag', { type: 'boolean' }],
  ]),
};

const p = (query: string) => new URLSearchParams(query);

function throwsRest(fn: () => unknown, status: number, code: string, message?: string | RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof RestError, `expected RestError, got ${String(err)}`);
    assert.equal(err.status, status);
    assert.equal(err.code, code);
    if (typeof message === 'string') assert.equal(err.message, message);
    else if (message) assert.match(err.message, message);
    return true;
  });
}

const ALL = ['id', 'user_id', 'title', 'body', 'created_at'];

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

describe('parseSelect', () => {
  it('missing or * means every column in table order', () => {
    assert.deepEqual(parseSelect(undefined, notes), ALL);
    assert.deepEqual(parseSelect(null, notes), ALL);
    assert.deepEqual(parseSelect('*', notes), ALL);
    assert.deepEqual(parseSelect(' * ', notes), ALL);
  });

  it('takes a comma list, trimming whitespace and dropping repeats', () => {
    assert.deepEqual(parseSelect('id,title', notes), ['id', 'title']);
    assert.deepEqual(parseSelect(' id , title ', notes), ['id', 'title']);
    assert.deepEqual(parseSelect('title,id,title', notes), ['title', 'id']);
    assert.deepEqual(parseSelect('title,*', notes), ['title', 'id', 'user_id', 'body', 'created_at']);
  });

  it('accepts double-quoted names, including commas, dots and escaped quotes', () => {
    assert.deepEqual(parseSelect('"id","title"', notes), ['id', 'title']);
    assert.deepEqual(parseSelect('"we\\"ird","has.dot"', odd), ['we"ird', 'has.dot']);
  });

  it('rejects unknown columns with 42703', () => {
    throwsRest(() => parseSelect('id,foo', notes), 400, '42703', 'column notes.foo does not exist');
    throwsRest(() => parseSelect('"Title"', notes), 400, '42703', 'column notes.Title does not exist');
    throwsRest(() => parseSelect('title"; drop table x; --', notes), 400, 'PGRST100');
    throwsRest(() => parseSelect('"title\\"; drop table x; --"', notes), 400, '42703');
  });

  it('rejects embedding, casts, aliases, JSON paths and junk with PGRST100', () => {
    for (const raw of [
      'id,author(name)',
      'id::text',
      'x:id',
      'body->>a',
      'body->a',
      '...author(name)',
      '',
      'id,',
      ',id',
      'id title',
      '"id',
      '""',
      'count()',
      '"id"x',
    ]) {
      throwsRest(() => parseSelect(raw, notes), 400, 'PGRST100', `"failed to parse select parameter (${raw})"`);
    }
  });
});

describe('parseOrder', () => {
  it('returns nothing when absent', () => {
    assert.deepEqual(parseOrder(undefined, notes), []);
    assert.deepEqual(parseOrder(null, notes), []);
  });

  it('parses column, direction and nulls placement', () => {
    assert.deepEqual(parseOrder('id', notes), [{ column: 'id', direction: null, nulls: null }]);
    assert.deepEqual(parseOrder('id.asc', notes), [{ column: 'id', direction: 'asc', nulls: null }]);
    assert.deepEqual(parseOrder('created_at.desc,id.asc', notes), [
      { column: 'created_at', direction: 'desc', nulls: null },
      { column: 'id', direction: 'asc', nulls: null },
    ]);
    assert.deepEqual(parseOrder('body.desc.nullsfirst', notes), [{ column: 'body', direction: 'desc', nulls: 'first' }]);
    assert.deepEqual(parseOrder('body.asc.nullslast', notes), [{ column: 'body', direction: 'asc', nulls: 'last' }]);
    assert.deepEqual(parseOrder('body.nullslast', notes), [{ column: 'body', direction: null, nulls: 'last' }]);
    assert.deepEqual(parseOrder(' title.desc , id ', notes), [
      { column: 'title', direction: 'desc', nulls: null },
      { column: 'id', direction: null, nulls: null },
    ]);
    assert.deepEqual(parseOrder('"has.dot".desc', odd), [{ column: 'has.dot', direction: 'desc', nulls: null }]);
  });

  it('rejects unknown columns with 42703', () => {
    throwsRest(() => parseOrder('foo.desc', notes), 400, '42703', 'column notes.foo does not exist');
    throwsRest(() => parseOrder('id,"nope"', notes), 400, '42703', 'column notes.nope does not exist');
  });

  it('rejects bad syntax with PGRST100', () => {
    for (const raw of [
      '',
      'id.',
      'id.up',
      'id.desc.asc',
      'id.nullsfirst.desc',
      'id.desc.nullsfirst.nullslast',
      'id desc',
      'id,,title',
      '.desc',
      '"id',
      'id;drop table x',
      'title"; drop table x; --',
      'id->a.desc',
    ]) {
      throwsRest(() => parseOrder(raw, notes), 400, 'PGRST100', `"failed to parse order (${raw})"`);
    }
  });
});

describe('parseFilters', () => {
  it('parses every comparison operator, keeping the raw value (dots, commas and all)', () => {
    for (const op of ['eq', 'neq', 'gt', 'gte', 'lt', 'lte'] as const) {
      assert.deepEqual(parseFilters(p(`title=${op}.a.b,c`), notes), [
        { column: 'title', negate: false, op, value: 'a.b,c' },
      ]);
    }
    assert.deepEqual(parseFilters(p('title=eq.'), notes), [{ column: 'title', negate: false, op: 'eq', value: '' }]);
  });

  it('supports the not. prefix', () => {
    assert.deepEqual(parseFilters(p('id=not.eq.5'), notes), [{ column: 'id', negate: true, op: 'eq', value: '5' }]);
    assert.deepEqual(parseFilters(p('body=not.is.null'), notes), [
      { column: 'body', negate: true, op: 'is', value: 'null' },
    ]);
    assert.deepEqual(parseFilters(p('id=not.in.(1,2)'), notes), [
      { column: 'id', negate: true, op: 'in', value: ['1', '2'] },
    ]);
  });

  it('parses in lists with quoted elements and backslash escapes', () => {
    const [f] = parseFilters(p('title=in.(a,b,"c,d","e\\"f","(g)","")'), notes);
    assert.deepEqual(f, { column: 'title', negate: false, op: 'in', value: ['a', 'b', 'c,d', 'e"f', '(g)', ''] });
    assert.deepEqual(parseFilters(p('id=in.()'), notes)[0], { column: 'id', negate: false, op: 'in', value: [] });
    assert.deepEqual(parseFilters(p('id=in.(1)'), notes)[0], { column: 'id', negate: false, op: 'in', value: ['1'] });
  });

  it('rejects malformed in lists', () => {
    for (const raw of ['in.1,2', 'in.(1,2', 'in.1,2)', 'in.(a(b),c)', 'in.("a"b)', 'in.("a)', 'in.(a"b)']) {
      throwsRest(() => parseFilters(p(`title=${encodeURIComponent(raw)}`), notes), 400, 'PGRST100', `"failed to parse filter (${raw})"`);
    }
  });

  it('accepts only null, true, false and unknown for is (any case)', () => {
    for (const v of ['null', 'true', 'false', 'unknown']) {
      assert.deepEqual(parseFilters(p(`body=is.${v}`), notes), [{ column: 'body', negate: false, op: 'is', value: v }]);
    }
    assert.deepEqual(parseFilters(p('body=is.NULL'), notes)[0], { column: 'body', negate: false, op: 'is', value: 'null' });
    for (const v of ['nil', '', '1', 'null;drop table x']) {
      throwsRest(() => parseFilters(p(`body=is.${encodeURIComponent(v)}`), notes), 400, 'PGRST100', `"failed to parse filter (is.${v})"`);
    }
  });

  it('rejects unknown operators and values without an operator', () => {
    for (const raw of ['eqq.5', 'cs.{1}', 'fts.x', '5', 'eq', 'not.5', 'not.not.eq.5', '', 'EQ.5']) {
      throwsRest(() => parseFilters(p(`id=${encodeURIComponent(raw)}`), notes), 400, 'PGRST100', `"failed to parse filter (${raw})"`);
    }
  });

  it('rejects unknown columns with 42703', () => {
    throwsRest(() => parseFilters(p('foo=eq.1'), notes), 400, '42703', 'column notes.foo does not exist');
    throwsRest(() => parseFilters(p('"nope"=eq.1'), notes), 400, '42703', 'column notes.nope does not exist');
    throwsRest(() => parseFilters(p(`${encodeURIComponent('"x\\"; drop table notes; --"')}=eq.1`), notes), 400, '42703');
  });

  it('rejects keys that are not plain names with PGRST100, and leaves or/and to parseConditions', () => {
    throwsRest(() => parseFilters(p('body->>a=eq.1'), notes), 400, 'PGRST100', '"failed to parse tree path (body->>a)"');
    throwsRest(() => parseFilters(p(`${encodeURIComponent('title"; drop table x; --')}=eq.1`), notes), 400, 'PGRST100');
    assert.deepEqual(parseFilters(p('or=(id.eq.1,id.eq.2)&and=(id.eq.1)&not.or=(id.eq.3)'), notes), []);
  });

  it('parses like and ilike, keeping the pattern as written', () => {
    assert.deepEqual(parseFilters(p('title=like.a*&body=not.ilike.*B%25'), notes), [
      { column: 'title', negate: false, op: 'like', value: 'a*' },
      { column: 'body', negate: true, op: 'ilike', value: '*B%' },
    ]);
  });
});

describe('parseConditions (logic trees)', () => {
  const eq = (column: string, value: string, negate = false) => ({ column, negate, op: 'eq', value });

  it('reads or/and trees, nested and negated, after the plain filters', () => {
    assert.deepEqual(parseConditions(p(`id=gt.0&or=${encodeURIComponent('(id.eq.1,and(title.eq.a,body.not.eq.b),not.or(id.eq.2))')}`), notes), [
      { column: 'id', negate: false, op: 'gt', value: '0' },
      {
        logic: 'or',
        negate: false,
        children: [eq('id', '1'), { logic: 'and', negate: false, children: [eq('title', 'a'), eq('body', 'b', true)] }, { logic: 'or', negate: true, children: [eq('id', '2')] }],
      },
    ]);
    assert.deepEqual(parseConditions(p('not.and=(id.eq.1)'), notes), [{ logic: 'and', negate: true, children: [eq('id', '1')] }]);
  });

  it('values: quoted (with , ) and escapes), {arrays}, in lists, is; a quote not closing a value is text', () => {
    const [tree] = parseConditions(p(`or=${encodeURIComponent('(title.eq."a,b)\\"c",body.eq.{1,2},id.in.(1,"2,3"),body.is.NULL,title.eq.x"y)')}`), notes) as unknown as [{ children: unknown[] }];
    assert.deepEqual(tree.children, [
      eq('title', 'a,b)"c'),
      eq('body', '{1,2}'),
      { column: 'id', negate: false, op: 'in', value: ['1', '2,3'] },
      { column: 'body', negate: false, op: 'is', value: 'null' },
      eq('title', 'x"y'),
    ]);
  });

  it('a malformed tree is PGRST100 "failed to parse logic tree"; then unknown columns are 42703', () => {
    for (const raw of ['()', '(id.eq.1', 'id.eq.1', '(id.eqq.1)', '(id)', '(id.in.1)', '(xor(id.eq.1))', '(id.eq.1))', '(id.eq.1,)', '(,id.eq.1)']) {
      throwsRest(() => parseConditions(p(`or=${encodeURIComponent(raw)}`), notes), 400, 'PGRST100', `"failed to parse logic tree (${raw})"`);
    }
    throwsRest(() => parseConditions(p('and=(nope.eq.1)'), notes), 400, '42703', 'column notes.nope does not exist');
  });

  it('nests up to 32 levels; deeper is PGRST100, however deep (no stack overflow)', () => {
    const nest = (levels: number) => `or=${encodeURIComponent(`(${'and('.repeat(levels - 1)}id.eq.1${')'.repeat(levels)}`)}`;
    assert.equal(parseConditions(p(nest(32)), notes).length, 1);
    throwsRest(() => parseConditions(p(nest(33)), notes), 400, 'PGRST100');
    throwsRest(() => parseConditions(p(nest(5000)), notes), 400, 'PGRST100');
  });

  it('renders as parenthesised SQL with every value bound', () => {
    const q = buildSelect(notes, p(`select=id&or=${encodeURIComponent('(title.ilike.*x*,and(id.gte.1,id.lte.2))')}&not.or=(body.like.a*)`));
    assert.match(q.text, /WHERE \("title" ILIKE \$1::text OR \("id" >= \$2::bigint AND "id" <= \$3::bigint\)\) AND NOT \("body" LIKE \$4::text\)/);
    assert.deepEqual(q.values, ['%x%', '1', '2', 'a%']);
  });

  it('skips reserved keys, keeps repeated keys, accepts quoted keys', () => {
    const params = p('select=id&order=id&limit=1&offset=2&columns=x&on_conflict=id&id=gt.1&id=lt.9&%22has.dot%22=eq.3');
    assert.deepEqual(parseFilters(params, { ...odd, columns: new Map([...notes.columns, ['has.dot', { type: 'integer' }]]) }), [
      { column: 'id', negate: false, op: 'gt', value: '1' },
      { column: 'id', negate: false, op: 'lt', value: '9' },
      { column: 'has.dot', negate: false, op: 'eq', value: '3' },
    ]);
  });
});

describe('parseLimitOffset', () => {
  it('reads non-negative integers, null when absent', () => {
    assert.deepEqual(parseLimitOffset(p('')), { limit: null, offset: null });
    assert.deepEqual(parseLimitOffset(p('limit=10&offset=0')), { limit: 10, offset: 0 });
    assert.deepEqual(parseLimitOffset(p('limit=0')), { limit: 0, offset: null });
  });

  it('rejects anything else with PGRST100', () => {
    for (const raw of ['-1', '1.5', 'abc', '', ' 1', '1e3', '0x10', '99999999999999999999', '1;drop']) {
      throwsRest(() => parseLimitOffset(p(`limit=${encodeURIComponent(raw)}`)), 400, 'PGRST100', `"failed to parse limit parameter (${raw})"`);
      throwsRest(() => parseLimitOffset(p(`offset=${encodeURIComponent(raw)}`)), 400, 'PGRST100', `"failed to parse offset parameter (${raw})"`);
    }
  });
});

describe('buildSelect', () => {
  it('aggregates the rows to JSON text in Postgres', () => {
    const q = buildSelect(notes, p('select=*&order=created_at.desc'));
    assert.equal(
      q.text,
      `SELECT coalesce(json_agg(t), '[]'::json)::text AS body, count(*)::int AS n FROM (` +
        `SELECT "id", "user_id", "title", "body", "created_at" FROM "public"."notes" ORDER BY "created_at" DESC) t`,
    );
    assert.deepEqual(q.values, []);
  });

  it('binds filter values cast to the column type, then limit and offset', () => {
    const q = buildSelect(
      notes,
      p('select=id,title&id=eq.abc&title=not.in.(x,"y,z")&body=is.null&created_at=gte.2026-01-01&order=id.desc.nullslast,title&limit=5&offset=10'),
    );
    assert.equal(
      q.text,
      `SELECT coalesce(json_agg(t), '[]'::json)::text AS body, count(*)::int AS n FROM (` +
        `SELECT "id", "title" FROM "public"."notes" WHERE "id" = $1::bigint AND NOT ("title" IN ($2::text, $3::text)) ` +
        `AND "body" IS NULL AND "created_at" >= $4::timestamp with time zone ` +
        `ORDER BY "id" DESC NULLS LAST, "title" LIMIT $5 OFFSET $6) t`,
    );
    assert.deepEqual(q.values, ['abc', 'x', 'y,z', '2026-01-01', 5, 10]);
  });

  it('renders each operator and negation', () => {
    const where = (query: string) => {
      const q = buildSelect(notes, p(`select=id&${query}`));
      return { where: /WHERE (.*)\) t$/.exec(q.text)?.[1], values: q.values };
    };
    assert.deepEqual(where('id=neq.1'), { where: '"id" <> $1::bigint', values: ['1'] });
    assert.deepEqual(where('id=gt.1'), { where: '"id" > $1::bigint', values: ['1'] });
    assert.deepEqual(where('id=gte.1'), { where: '"id" >= $1::bigint', values: ['1'] });
    assert.deepEqual(where('id=lt.1'), { where: '"id" < $1::bigint', values: ['1'] });
    assert.deepEqual(where('id=lte.1'), { where: '"id" <= $1::bigint', values: ['1'] });
    assert.deepEqual(where('id=not.eq.1'), { where: 'NOT ("id" = $1::bigint)', values: ['1'] });
    assert.deepEqual(where('id=in.()'), { where: 'false', values: [] });
    assert.deepEqual(where('id=not.in.()'), { where: 'NOT (false)', values: [] });
    assert.deepEqual(where('body=is.true'), { where: '"body" IS TRUE', values: [] });
    assert.deepEqual(where('body=is.FALSE'), { where: '"body" IS FALSE', values: [] });
    assert.deepEqual(where('body=not.is.unknown'), { where: 'NOT ("body" IS UNKNOWN)', values: [] });
  });

  it('quotes catalog names and only writes safe catalog type names, else compares as text', () => {
    const q = buildSelect(
      odd,
      p(
        'select=%22we%5C%22ird%22&%22we%5C%22ird%22=eq.a&email=eq.b&tags=eq.{c}&evil_type=eq.d&spacey_type=eq.e&price=lt.1.5&flag=eq.true&%22has.dot%22=in.(1,2)',
      ),
    );
    assert.equal(
      q.text,
      `SELECT coalesce(json_agg(t), '[]'::json)::text AS body, count(*)::int AS n FROM (` +
        `SELECT "we""ird" FROM "my""schema"."odd table" WHERE "we""ird" = $1::text AND "email"::text = $2::text ` +
        `AND "tags" = $3::text[] AND "evil_type"::text = $4::text AND "spacey_type"::text = $5::text ` +
        `AND "price" < $6::double precision AND "flag" = $7::boolean AND "has.dot" IN ($8::integer, $9::integer)) t`,
    );
    assert.deepEqual(q.values, ['a', 'b', '{c}', 'd', 'e', '1.5', 'true', '1', '2']);
  });

  it('propagates parser errors', () => {
    throwsRest(() => buildSelect(notes, p('select=nope')), 400, '42703');
    throwsRest(() => buildSelect(notes, p('order=nope')), 400, '42703');
    throwsRest(() => buildSelect(notes, p('id=eqq.1')), 400, 'PGRST100');
    throwsRest(() => buildSelect(notes, p('limit=x')), 400, 'PGRST100');
  });
});

describe('buildInsert', () => {
  const aggregate = `SELECT coalesce(json_agg(ins), '[]'::json)::text AS body, count(*)::int AS n FROM ins`;

  it('inserts only the keys present so the other columns take their defaults', () => {
    const q = buildInsert(notes, { title: 't', body: 'b' }, ['id', 'user_id', 'title', 'body', 'created_at']);
    assert.equal(
      q.text,
      `WITH ins AS (INSERT INTO "public"."notes" ("title", "body") SELECT "title", "body" ` +
        `FROM json_populate_recordset(null::"public"."notes", $1::json) ` +
        `RETURNING "id", "user_id", "title", "body", "created_at") ${aggregate}`,
    );
    assert.deepEqual(q.values, ['[{"title":"t","body":"b"}]']);
  });

  it('uses the union of keys for an array and RETURNING 1 without representation', () => {
    const rows = [{ title: 'a' }, { body: 'b', title: 'c' }];
    const q = buildInsert(notes, rows, null);
    assert.equal(
      q.text,
      `WITH ins AS (INSERT INTO "public"."notes" ("title", "body") SELECT "title", "body" ` +
        `FROM json_populate_recordset(null::"public"."notes", $1::json) RETURNING 1) ${aggregate}`,
    );
    assert.deepEqual(JSON.parse(q.values[0] as string), rows);
  });

  it('takes the column list from the columns parameter when given, ignoring other keys', () => {
    const q = buildInsert(notes, [{ title: 'a', extra: 1 }], ['id'], '"title","body"');
    assert.match(q.text, /^WITH ins AS \(INSERT INTO "public"\."notes" \("title", "body"\) SELECT "title", "body" FROM/);
    assert.match(q.text, /RETURNING "id"\)/);
    throwsRest(() => buildInsert(notes, [{ title: 'a' }], null, 'title,nope'), 400, 'PGRST204', "Could not find the 'nope' column of 'notes' in the schema cache");
    throwsRest(() => buildInsert(notes, [{ title: 'a' }], null, 'title,'), 400, 'PGRST100', '"failed to parse columns parameter (title,)"');
    throwsRest(() => buildInsert(notes, [{ title: 'a' }], null, '"title'), 400, 'PGRST100');
  });

  it('lists no columns for an empty object, so every column takes its default', () => {
    const q = buildInsert(notes, {}, null);
    assert.match(q.text, /^WITH ins AS \(INSERT INTO "public"\."notes" SELECT {2}FROM json_populate_recordset/);
    assert.deepEqual(q.values, ['[{}]']);
    assert.deepEqual(buildInsert(notes, [], null).values, ['[]']);
  });

  it('rejects unknown keys with PGRST204', () => {
    throwsRest(() => buildInsert(notes, { title: 't', foo: 1 }, null), 400, 'PGRST204', "Could not find the 'foo' column of 'notes' in the schema cache");
    throwsRest(() => buildInsert(notes, [{ title: 't' }, { 'title"; drop table x; --': 1 }], null), 400, 'PGRST204');
  });

  it('rejects bodies that are not objects with PGRST102', () => {
    for (const body of [[1], [null], [[]], ['x'], null, 5]) {
      throwsRest(() => buildInsert(notes, body as never, null), 400, 'PGRST102');
    }
  });
});

describe('buildInsert with an upsert', () => {
  const keyed: TableInfo = { ...notes, primaryKey: ['id'] };
  const tail = (q: { text: string }) => q.text.slice(q.text.indexOf('$1::json)') + '$1::json)'.length, q.text.indexOf(' RETURNING'));

  it('merge-duplicates: ON CONFLICT on the primary key, updating the columns sent', () => {
    assert.equal(tail(buildInsert(keyed, { id: 1, title: 't' }, null, null, { resolution: 'merge-duplicates', onConflict: null })), ' ON CONFLICT ("id") DO UPDATE SET "id" = EXCLUDED."id", "title" = EXCLUDED."title"');
  });

  it('ignore-duplicates: DO NOTHING; on_conflict names the target', () => {
    assert.equal(tail(buildInsert(keyed, { title: 't' }, null, null, { resolution: 'ignore-duplicates', onConflict: 'title, body' })), ' ON CONFLICT ("title", "body") DO NOTHING');
    assert.equal(tail(buildInsert(notes, { title: 't' }, null, null, { resolution: 'ignore-duplicates', onConflict: null })), ' ON CONFLICT DO NOTHING');
  });

  it('merge without any target is a plain insert; unknown or malformed on_conflict is refused', () => {
    assert.equal(tail(buildInsert(notes, { title: 't' }, null, null, { resolution: 'merge-duplicates', onConflict: null })), '');
    throwsRest(() => buildInsert(keyed, { title: 't' }, null, null, { resolution: 'merge-duplicates', onConflict: 'nope' }), 400, '42703');
    throwsRest(() => buildInsert(keyed, { title: 't' }, null, null, { resolution: 'merge-duplicates', onConflict: 'id;drop' }), 400, 'PGRST100');
  });
});

describe('buildUpdate', () => {
  it('sets the body keys from one JSON parameter, filters after it', () => {
    const q = buildUpdate(notes, { title: 'n', body: null }, p('id=eq.1&select=id'), ['id', 'title']);
    assert.equal(
      q.text,
      `WITH upd AS (UPDATE "public"."notes" SET ("title", "body") = ` +
        `(SELECT "title", "body" FROM json_populate_record(null::"public"."notes", $1::json)) ` +
        `WHERE "id" = $2::bigint RETURNING "id", "title") ` +
        `SELECT coalesce(json_agg(upd), '[]'::json)::text AS body, count(*)::int AS n FROM upd`,
    );
    assert.deepEqual(q.values, ['{"title":"n","body":null}', '1']);
    assert.match(buildUpdate(notes, { title: 'n' }, p('id=eq.1'), null).text, /RETURNING 1\)/);
  });

  it('rejects unknown keys with PGRST204', () => {
    throwsRest(() => buildUpdate(notes, { nope: 1 }, p('id=eq.1'), null), 400, 'PGRST204', "Could not find the 'nope' column of 'notes' in the schema cache");
  });

  it('requires a filter (safeupdate)', () => {
    throwsRest(() => buildUpdate(notes, { title: 'x' }, p(''), null), 400, '21000', 'UPDATE requires a WHERE clause');
    throwsRest(() => buildUpdate(notes, { title: 'x' }, p('select=*&order=id'), null), 400, '21000');
  });

  it('does nothing for an empty patch', () => {
    assert.deepEqual(buildUpdate(notes, {}, p('id=eq.1'), ['id']), { text: `SELECT '[]'::text AS body, 0 AS n`, values: [] });
  });

  it('refuses limit/offset rather than changing more rows than asked', () => {
    throwsRest(() => buildUpdate(notes, { title: 'x' }, p('id=gt.1&limit=1'), null), 400, 'PGRST100');
  });

  it('rejects a non-object patch with PGRST102', () => {
    throwsRest(() => buildUpdate(notes, [] as never, p('id=eq.1'), null), 400, 'PGRST102');
  });
});

describe('buildDelete', () => {
  it('deletes the filtered rows', () => {
    const q = buildDelete(notes, p('id=eq.5&select=*'), ALL);
    assert.equal(
      q.text,
      `WITH del AS (DELETE FROM "public"."notes" WHERE "id" = $1::bigint ` +
        `RETURNING "id", "user_id", "title", "body", "created_at") ` +
        `SELECT coalesce(json_agg(del), '[]'::json)::text AS body, count(*)::int AS n FROM del`,
    );
    assert.deepEqual(q.values, ['5']);
    assert.match(buildDelete(notes, p('id=eq.5'), null).text, /RETURNING 1\)/);
  });

  it('requires a filter (safeupdate)', () => {
    throwsRest(() => buildDelete(notes, p(''), null), 400, '21000', 'DELETE requires a WHERE clause');
    throwsRest(() => buildDelete(notes, p('select=id'), null), 400, '21000');
  });

  it('refuses limit/offset and propagates filter errors', () => {
    throwsRest(() => buildDelete(notes, p('id=gt.1&offset=1'), null), 400, 'PGRST100');
    throwsRest(() => buildDelete(notes, p('nope=eq.1'), null), 400, '42703');
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

  it('filter values, in-list elements and body values are only bound', () => {
    for (const v of evil) {
      const enc = encodeURIComponent(v);
      const quoted = encodeURIComponent(`"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`);
      const queries = [
        buildSelect(notes, p(`title=eq.${enc}&body=not.in.(${quoted},b)`)),
        buildInsert(notes, [{ title: v, body: v }], ['id']),
        buildUpdate(notes, { title: v }, p(`title=neq.${enc}`), ['id']),
        buildDelete(notes, p(`title=lt.${enc}`), null),
      ];
      for (const q of queries) {
        assert.ok(!q.text.includes(v), `${JSON.stringify(v)} leaked into ${q.text}`);
        // bound as is, or inside the JSON body parameter
        const bound = q.values.some((x) => typeof x === 'string' && (x === v || x.includes(JSON.stringify(v))));
        assert.ok(bound, `${JSON.stringify(v)} should be bound in ${JSON.stringify(q.values)}`);
      }
    }
  });

  it('hostile names in select, order, filter keys, columns and body keys are rejected', () => {
    for (const v of evil) {
      const enc = encodeURIComponent(v);
      const attempts: Array<() => unknown> = [
        () => buildSelect(notes, p(`select=${enc}`)),
        () => buildSelect(notes, p(`select=${encodeURIComponent(`"${v}"`)}`)),
        () => buildSelect(notes, p(`order=${enc}`)),
        () => buildSelect(notes, p(`order=id.${enc}`)),
        () => buildSelect(notes, p(`${enc}=eq.1`)),
        () => buildSelect(notes, p(`id=${enc}`)),
        () => buildSelect(notes, p(`limit=${enc}`)),
        () => buildInsert(notes, { [v]: 1 }, null),
        () => buildInsert(notes, { title: 'x' }, null, v),
        () => buildUpdate(notes, { [v]: 1 }, p('id=eq.1'), null),
        () => buildDelete(notes, p(`${enc}=eq.1`), null),
      ];
      for (const attempt of attempts) {
        assert.throws(attempt, (err: unknown) => err instanceof RestError && err.status === 400);
      }
    }
  });

  it('the SQL text depends only on the shape of the request, never on its values (property)', () => {
    const expected = buildSelect(notes, p('title=eq.X&id=in.(1,2)&limit=1')).text;
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), (a, b, c) => {
        const params = new URLSearchParams();
        params.append('title', `eq.${a}`);
        const quote = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
        params.append('id', `in.(${quote(b)},${quote(c)})`);
        params.append('limit', '1');
        const q = buildSelect(notes, params);
        assert.equal(q.text, expected);
        assert.deepEqual(q.values, [a, b, c, 1]);
      }),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('title', 'body'), fc.string(), { minKeys: 1 }), (row) => {
        const q = buildInsert(notes, row, null);
        assert.deepEqual(JSON.parse(q.values[0] as string), [{ ...row }]);
        for (const v of Object.values(row)) if (v.length > 3) assert.ok(!q.text.includes(v));
      }),
    );
  });
});
