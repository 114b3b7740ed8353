// Stage 3 of 3 of a REST request (parse → plan → SQL): the only place SQL text is written, as
// PostgREST's Query/QueryBuilder.hs and SqlFragment.hs write it.
//
// Safety rules, enforced everywhere below:
// - Every value that comes from the request is a bound parameter ($n), sent untyped so that
//   PostgreSQL reads it as the type its place asks for (as PostgREST's `unknown` encoder does);
//   none is ever spliced into SQL.
// - Every identifier is quoted with quoteIdent: catalog names, and the aliases a request chose.
// - Casts in `select` are words only (parse.ts allows letters, digits, `_` and spaces), inside
//   CAST(… AS …), where no word can end the expression.
// - Type names of function parameters and column defaults are the catalog's own SQL text
//   (regtype's output, pg_get_expr's output), written by PostgreSQL for use in SQL.

import pg from 'pg';
import { quoteIdent } from '../../kit/db.js';
import type { OpExpr, QuantOperator, SimpleOperator } from './parse.js';
import type {
  CallPlan,
  ColumnRef,
  Condition,
  DeletePlan,
  InsertPlan,
  PlannedField,
  PlannedOrder,
  Qualifier,
  ReadNode,
  Returning,
  SelectColumn,
  StatementPlan,
  UpdatePlan,
} from './plan.js';
import { SCALAR_COLUMN } from './plan.js';
import type { QualifiedName, Table } from './schema-cache.js';
import { isToOne, returnsVoid } from './schema-cache.js';

export interface SqlStatement {
  text: string;
  /** Strings or nulls only: PostgreSQL reads each as the type its place asks for. */
  values: Array<string | null>;
}

/** Collects a statement's parameters. */
class Params {
  readonly values: Array<string | null> = [];

  add(value: string | null): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

const ident = quoteIdent;

function qualified(q: Qualifier | QualifiedName): string {
  return 'schema' in q && q.schema !== null ? `${ident(q.schema)}.${ident(q.name)}` : ident(q.name);
}

function column(q: Qualifier, name: string): string {
  return name === '*' ? `${qualified(q)}.*` : `${qualified(q)}.${ident(name)}`;
}

const columnRef = (ref: ColumnRef) => column(ref.qualifier, ref.column);

function field(q: Qualifier, f: PlannedField, p: Params): string {
  const base = column(q, f.column);
  if (f.jsonPath.length === 0) return base;
  let sql = f.toJson ? `to_jsonb(${base})` : base;
  for (const op of f.jsonPath) sql += `${op.arrow}${p.add(op.operand)}${op.index ? '::int' : ''}`;
  return sql;
}

// ---------------------------------------------------------------------------------------------
// Conditions

const QUANT_SQL: Record<QuantOperator, string> = {
  eq: '=',
  gt: '>',
  gte: '>=',
  lt: '<',
  lte: '<=',
  like: 'LIKE',
  ilike: 'ILIKE',
  match: '~',
  imatch: '~*',
};

const SIMPLE_SQL: Record<SimpleOperator, string> = {
  neq: '<>',
  cs: '@>',
  cd: '<@',
  ov: '&&',
  sl: '<<',
  sr: '>>',
  nxr: '&<',
  nxl: '&>',
  adj: '-|-',
};

const FTS_SQL = { fts: 'to_tsquery', plfts: 'plainto_tsquery', phfts: 'phraseto_tsquery', wfts: 'websearch_to_tsquery' } as const;

// PostgREST writes `*` for LIKE's `%` (a `%` is awkward in a URL); `%`, `_` and `\` keep their LIKE
// meaning, so a literal `*` cannot be matched.
const likePattern = (value: string) => value.replaceAll('*', '%');

/**
 * An array literal of text elements (`{"a","b,c"}`), every element quoted, for `= ANY($n)`:
 * PostgreSQL reads it as an array of the column's type. Text after a NUL is dropped, as PostgREST
 * drops it (PostgreSQL text cannot hold one).
 */
export function arrayLiteral(values: string[]): string {
  const element = (v: string) => `"${v.split('\u0000')[0]!.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
  return `{${values.map(element).join(',')}}`;
}

function operation(lhs: string, expr: OpExpr, p: Params): string {
  const op = expr.operation;
  let sql: string;
  switch (op.kind) {
    case 'quant': {
      const value = op.op === 'like' || op.op === 'ilike' ? likePattern(op.value) : op.value;
      const param = p.add(value);
      const rhs = op.quantifier === null ? param : `${op.quantifier.toUpperCase()}(${param})`;
      sql = `${lhs} ${QUANT_SQL[op.op]} ${rhs}`;
      break;
    }
    case 'simple':
      sql = `${lhs} ${SIMPLE_SQL[op.op]} ${p.add(op.value)}`;
      break;
    case 'in':
      // `= ANY` rather than IN: an empty list is valid (and matches nothing) and the text stays the same whatever the list's length.
      sql = `${lhs} = ANY(${p.add(arrayLiteral(op.values))})`;
      break;
    case 'is':
      // op.value is one of null, true, false, unknown (checked by the parser), i.e. a fixed SQL keyword.
      sql = `${lhs} IS ${op.value.toUpperCase()}`;
      break;
    case 'isdistinct':
      sql = `${lhs} IS DISTINCT FROM ${p.add(op.value)}`;
      break;
    case 'fts': {
      const language = op.language === null ? '' : `${p.add(op.language)}, `;
      sql = `${lhs} @@ ${FTS_SQL[op.op]}(${language}${p.add(op.value)})`;
      break;
    }
  }
  return expr.negate ? `NOT (${sql})` : sql;
}

function condition(q: Qualifier, c: Condition, p: Params, forCount: boolean): string {
  switch (c.kind) {
    case 'filter':
      return operation(field(q, c, p), c.expr, p);
    case 'embed-null':
      // In the count, which has no joins, whether the embedded resource has a row is an EXISTS.
      if (forCount) return `${c.isNull ? 'NOT ' : ''}EXISTS (${countQuery(c.embed, p)})`;
      return `${ident(c.embed.embedding!.aggAlias)} IS ${c.isNull ? 'NOT ' : ''}DISTINCT FROM NULL`;
    case 'logic': {
      const joined = c.children.map((child) => condition(q, child, p, forCount)).join(c.op === 'or' ? ' OR ' : ' AND ');
      return c.negate ? `NOT (${joined})` : `(${joined})`;
    }
  }
}

function where(parts: string[]): string {
  return parts.length === 0 ? '' : ` WHERE ${parts.join(' AND ')}`;
}

// ---------------------------------------------------------------------------------------------
// Reads

export const SOURCE = 'pgrst_source';

function fromClause(node: ReadNode): string {
  if (node.source.kind === 'rows') return `${ident(SOURCE)} AS ${ident(node.alias!)}`;
  const junction = node.embedding?.junction;
  return (
    qualified(node.source.table) +
    (node.alias === null ? '' : ` AS ${ident(node.alias)}`) +
    (junction ? `, ${qualified(junction.table)} AS ${ident(junction.alias)}` : '')
  );
}

function selectColumn(q: Qualifier, s: SelectColumn, p: Params): string {
  if (s.star) return column(q, '*');
  const value = field(q, s, p);
  const sql = s.cast === null ? value : `CAST(${value} AS ${s.cast})`;
  return s.outputName === s.column && s.jsonPath.length === 0 && s.cast === null ? sql : `${sql} AS ${ident(s.outputName)}`;
}

/** An embedded resource with nothing selected anywhere below it (`author()`): joined, not shown. */
function isEmptyEmbed(node: ReadNode): boolean {
  return node.select.length === 0 && node.children.every(isEmptyEmbed);
}

/** The columns a spread embedded resource adds to its parent, by the names its own query gives them. */
function spreadColumns(node: ReadNode): string[] {
  const agg = ident(node.embedding!.aggAlias);
  if (node.select.length === 0 && node.children.length === 0) return [`${agg}.*`];
  const own = node.select.map((s) => (s.star ? `${agg}.*` : `${agg}.${ident(s.outputName)}`));
  const nested = node.children.flatMap((child) => {
    const e = child.embedding!;
    if (e.spread) return spreadColumns(child).map((c) => c.replace(ident(e.aggAlias), agg));
    return isEmptyEmbed(child) ? [] : [`${agg}.${ident(e.alias ?? e.name)}`];
  });
  return [...own, ...nested];
}

function embedSelect(child: ReadNode): string[] {
  const e = child.embedding!;
  if (e.spread) return spreadColumns(child);
  if (isEmptyEmbed(child)) return [];
  const agg = ident(e.aggAlias);
  const name = ident(e.alias ?? e.name);
  return isToOne(e.relationship) ? [`row_to_json(${agg}.*)::jsonb AS ${name}`] : [`COALESCE(${agg}.${agg}, '[]') AS ${name}`];
}

function embedJoin(child: ReadNode, p: Params): string {
  const e = child.embedding!;
  const agg = ident(e.aggAlias);
  const kind = e.joinType === 'inner' ? 'INNER' : 'LEFT';
  const sub = readQuery(child, p);
  if (isToOne(e.relationship) || e.spread) return ` ${kind} JOIN LATERAL (${sub}) AS ${agg} ON TRUE`;
  const aggregated = `SELECT json_agg(${agg})::jsonb AS ${agg} FROM (${sub}) AS ${agg}`;
  return ` ${kind} JOIN LATERAL (${aggregated}) AS ${agg} ON ${e.joinType === 'inner' ? `${agg} IS NOT NULL` : 'TRUE'}`;
}

function orderTerm(q: Qualifier, o: PlannedOrder, p: Params): string {
  const source = o.embed === null ? q : { schema: null, name: o.embed.embedding!.aggAlias };
  let sql = field(source, o, p);
  if (o.direction !== null) sql += ` ${o.direction.toUpperCase()}`;
  if (o.nulls !== null) sql += ` NULLS ${o.nulls.toUpperCase()}`;
  return sql;
}

/** The rows of a node and, as JSON columns, of the resources embedded in it. */
export function readQuery(node: ReadNode, p: Params): string {
  const q = node.qualifier;
  const own = node.select.length === 0 && node.children.length === 0 ? [column(q, '*')] : node.select.map((s) => selectColumn(q, s, p));
  const selects = [...own, ...node.children.flatMap(embedSelect)];
  const joins = node.children.map((child) => embedJoin(child, p)).join('');
  const conditions = [
    ...node.where.map((c) => condition(q, c, p, false)),
    ...(node.embedding?.joins ?? []).map(([a, b]) => `${columnRef(a)} = ${columnRef(b)}`),
  ];
  let sql = `SELECT ${selects.join(', ')} FROM ${fromClause(node)}${joins}${where(conditions)}`;
  if (node.order.length > 0) sql += ` ORDER BY ${node.order.map((o) => orderTerm(q, o, p)).join(', ')}`;
  if (node.limit !== null) sql += ` LIMIT ${p.add(String(node.limit))}`;
  if (node.offset !== null) sql += ` OFFSET ${p.add(String(node.offset))}`;
  return sql;
}

/**
 * The rows a read counts, ignoring limit and offset (PostgREST's readPlanToCountQuery): no
 * embedded columns are built, and an embedded resource only matters where it filters, through
 * `!inner` or `embed=is.null`, as an EXISTS.
 */
function countQuery(node: ReadNode, p: Params): string {
  const q = node.qualifier;
  const conditions = [
    ...node.where.map((c) => condition(q, c, p, true)),
    ...(node.embedding?.joins ?? []).map(([a, b]) => `${columnRef(a)} = ${columnRef(b)}`),
    ...node.children.filter((c) => c.embedding!.joinType === 'inner').map((c) => `EXISTS (${countQuery(c, p)})`),
  ];
  return `SELECT 1 FROM ${fromClause(node)}${where(conditions)}`;
}

// ---------------------------------------------------------------------------------------------
// Writes

function returning(table: Table, r: Returning): string {
  const q = { schema: table.schema, name: table.name };
  if (r.kind === 'none') return 'RETURNING 1';
  if (r.kind === 'all') return `RETURNING ${column(q, '*')}`;
  return `RETURNING ${r.columns.map((c) => column(q, c)).join(', ')}`;
}

/**
 * The body as one JSON parameter; with `Prefer: missing=default`, each row first takes the
 * defaults of the listed columns it leaves out (PostgREST's fromJsonBodyF).
 */
function jsonBody(table: Table, columns: string[], body: string, applyDefaults: boolean, isArray: boolean, p: Params): string {
  const param = p.add(body);
  const defaults = applyDefaults
    ? columns.flatMap((c) => {
        const def = table.columns.get(c)?.default;
        return def ? [`${pg.escapeLiteral(c)}, ${def}`] : [];
      })
    : [];
  if (defaults.length === 0) return `${param}::json`;
  const withDefaults = `jsonb_build_object(${defaults.join(', ')})`;
  return isArray
    ? `(SELECT jsonb_agg(${withDefaults} || elem) FROM jsonb_array_elements(${param}::jsonb) AS elem)::json`
    : `(${withDefaults} || ${param}::jsonb)::json`;
}

// Counts the rows an upsert inserted, as PostgREST does: one up for each row offered, one down
// for each that updated an existing row instead (both comparisons are always true).
const INSERTED = `nullif(current_setting('pgrst.inserted', true), '')::int`;
const countInserted = (step: 1 | -1) =>
  `set_config('pgrst.inserted', (coalesce(${INSERTED}, 0) ${step === 1 ? '+' : '-'} 1)::text, true) <> '${step === 1 ? '0' : '-1'}'`;

function insert(plan: InsertPlan, p: Params): string {
  const t = qualified({ schema: plan.table.schema, name: plan.table.name });
  const cols = plan.columns.map(ident).join(', ');
  const merge = plan.onConflict?.resolution === 'merge-duplicates';
  let sql =
    `INSERT INTO ${t}${cols === '' ? '' : ` (${cols})`} SELECT ${cols} ` +
    `FROM json_populate_recordset(NULL::${t}, ${jsonBody(plan.table, plan.columns, plan.body, plan.applyDefaults, true, p)}) AS pgrst_body`;
  if (merge) sql += ` WHERE ${countInserted(1)}`;
  const c = plan.onConflict;
  if (c !== null) {
    // Without a target there is nothing to merge on: ignore-duplicates skips any conflict, and
    // merge-duplicates is a plain insert.
    const target = c.target.length === 0 ? '' : ` (${c.target.map(ident).join(', ')})`;
    if (c.resolution === 'ignore-duplicates' || (c.target.length > 0 && plan.columns.length === 0)) {
      sql += ` ON CONFLICT${target} DO NOTHING`;
    } else if (c.target.length > 0) {
      const set = plan.columns.map((col) => `${ident(col)} = EXCLUDED.${ident(col)}`).join(', ');
      sql += ` ON CONFLICT${target} DO UPDATE SET ${set} WHERE ${countInserted(-1)}`;
    }
  }
  return `${sql} ${returning(plan.table, plan.returning)}`;
}

function update(plan: UpdatePlan, p: Params): string {
  const t = qualified({ schema: plan.table.schema, name: plan.table.name });
  const list = plan.columns.map(ident).join(', ');
  const q = { schema: plan.table.schema, name: plan.table.name };
  const json = jsonBody(plan.table, plan.columns, plan.body, plan.applyDefaults, false, p);
  // The sub-select form keeps the WHERE clause's column names unambiguous (no second FROM item).
  return (
    `UPDATE ${t} SET (${list}) = (SELECT ${list} FROM json_populate_record(NULL::${t}, ${json}))` +
    `${where(plan.where.map((c) => condition(q, c, p, false)))} ${returning(plan.table, plan.returning)}`
  );
}

function remove(plan: DeletePlan, p: Params): string {
  const t = qualified({ schema: plan.table.schema, name: plan.table.name });
  const q = { schema: plan.table.schema, name: plan.table.name };
  return `DELETE FROM ${t}${where(plan.where.map((c) => condition(q, c, p, false)))} ${returning(plan.table, plan.returning)}`;
}

// ---------------------------------------------------------------------------------------------
// Function calls

function call(plan: CallPlan, p: Params): string {
  const r = plan.routine;
  const fn = qualified({ schema: r.schema, name: r.name });
  // A scalar result is one column, pgrst_scalar; a row type's columns are the function's own.
  const invoke = (args: string, from: string | null) =>
    r.returns.composite
      ? `SELECT pgrst_call.* FROM ${from === null ? '' : `${from}, LATERAL `}${fn}(${args}) AS pgrst_call`
      : `SELECT ${fn}(${args}) AS ${SCALAR_COLUMN}${from === null ? '' : ` FROM ${from}`}`;
  const a = plan.args;
  switch (a.kind) {
    case 'none':
      return invoke('', null);
    case 'single':
      return invoke(`${p.add(a.body)}::${a.param.type}`, null);
    case 'named': {
      // The arguments are read from the JSON body as the parameters' types (PostgREST's fromJsonBodyF).
      const record = a.params.map((prm) => `${ident(prm.name)} ${prm.recordType}`).join(', ');
      const param = `${p.add(a.body)}::json`;
      const body = a.bodyIsArray
        ? `(SELECT * FROM json_to_recordset(${param}) AS _(${record}) LIMIT 1) AS pgrst_body`
        : `json_to_record(${param}) AS pgrst_body(${record})`;
      const args = a.params.map((prm) => `${prm.variadic ? 'VARIADIC ' : ''}${ident(prm.name)} := pgrst_body.${ident(prm.name)}`);
      return invoke(args.join(', '), body);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The statement of a request

export type BodyFormat =
  /** A JSON array of the rows (with `singular`, the one row is taken out of it by the caller). */
  | { kind: 'json'; stripNulls: boolean }
  | { kind: 'csv' }
  /** No body (HEAD, return=minimal). */
  | { kind: 'none' };

export interface RenderOptions {
  body: BodyFormat;
  /** Count the rows the read would give without limit and offset: exactly, or exactly up to `upTo`. */
  count: { upTo: number | null } | null;
}

/**
 * The statement answering one request, whose one row is `body` (the response body's text), `n`
 * (rows read or written), `total` (the count, when asked) and `inserted` (rows an upsert inserted).
 * PostgreSQL writes the JSON (to_json: bigint as a number, timestamptz as ISO text with offset);
 * as text it reaches the client byte for byte, as from PostgREST.
 */
export function renderStatement(plan: StatementPlan, opts: RenderOptions): SqlStatement {
  if (plan.kind === 'update' && plan.columns.length === 0) {
    // PostgREST issues no UPDATE for an empty patch (there is nothing to SET) and returns no rows.
    const body = opts.body.kind === 'json' && plan.returning.kind !== 'none' ? `'[]'` : `''`;
    return { text: `SELECT ${body}::text AS body, 0 AS n, NULL::int AS total, NULL::int AS inserted`, values: [] };
  }
  const p = new Params();
  const { prefix, read } = sourceOf(plan, p);
  const total = opts.count === null || read === null ? 'NULL::int' : `(${countSql(read, p, opts.count.upTo)})::int`;
  const inserted = plan.kind === 'insert' && plan.onConflict?.resolution === 'merge-duplicates' ? INSERTED : 'NULL::int';
  if (read === null) {
    // A write answering nothing: only how many rows it wrote.
    return {
      text: `${prefix}SELECT ''::text AS body, count(*)::int AS n, ${total} AS total, ${inserted} AS inserted FROM ${SOURCE}`,
      values: p.values,
    };
  }
  const rows = readQuery(read, p);
  const body = bodySql(plan, opts.body);
  const text = `${prefix}SELECT ${body} AS body, count(*)::int AS n, ${total} AS total, ${inserted} AS inserted FROM (${rows}) AS _postgrest_t`;
  return { text, values: p.values };
}

/** `EXPLAIN` of the count, whose top row estimate is `count=planned`. */
export function renderPlannedCount(plan: StatementPlan): SqlStatement {
  const p = new Params();
  const { prefix, read } = sourceOf(plan, p);
  return { text: `EXPLAIN (FORMAT JSON) ${prefix}${countQuery(read!, p)}`, values: p.values };
}

function countSql(read: ReadNode, p: Params, upTo: number | null): string {
  const counted = countQuery(read, p);
  return `SELECT count(*) FROM (${upTo === null ? counted : `${counted} LIMIT ${upTo + 1}`}) AS pgrst_source_count`;
}

/** What the statement reads from: a table, or the rows of a write or call (WITH pgrst_source). */
function sourceOf(plan: StatementPlan, p: Params): { prefix: string; read: ReadNode | null } {
  switch (plan.kind) {
    case 'read':
      return { prefix: '', read: plan.root };
    case 'call':
      return { prefix: `WITH ${SOURCE} AS (${call(plan, p)}) `, read: plan.read };
    case 'update':
      return { prefix: `WITH ${SOURCE} AS (${update(plan, p)}) `, read: plan.returning.kind === 'none' ? null : plan.read };
    case 'insert':
      return { prefix: `WITH ${SOURCE} AS (${insert(plan, p)}) `, read: plan.returning.kind === 'none' ? null : plan.read };
    case 'delete':
      return { prefix: `WITH ${SOURCE} AS (${remove(plan, p)}) `, read: plan.returning.kind === 'none' ? null : plan.read };
  }
}

function bodySql(plan: StatementPlan, format: BodyFormat): string {
  if (format.kind === 'none') return `''::text`;
  if (format.kind === 'csv') {
    // PostgREST's CSV: the first row's keys as the header, then each row's composite text without its parentheses.
    const header = `(SELECT coalesce(string_agg(k, ','), '') FROM json_object_keys(json_agg(_postgrest_t)->0) AS k)`;
    const rows = `coalesce(string_agg(substring(_postgrest_t::text, 2, length(_postgrest_t::text) - 2), E'\\n'), '')`;
    return `${header} || E'\\n' || ${rows}`;
  }
  const strip = (sql: string) => (format.stripNulls ? `json_strip_nulls(${sql})` : sql);
  if (plan.kind === 'call') {
    const r = plan.routine;
    if (returnsVoid(r)) return `''::text`;
    if (!r.returns.composite) {
      const values = `json_agg(_postgrest_t.${SCALAR_COLUMN})`;
      return r.returns.setOf ? `coalesce(${strip(values)}, '[]')::text` : `coalesce((${strip(values)}->0)::text, 'null')`;
    }
    if (!r.returns.setOf) return `coalesce((${strip('json_agg(_postgrest_t)')}->0)::text, 'null')`;
  }
  return `coalesce(${strip('json_agg(_postgrest_t)')}, '[]')::text`;
}

// ---------------------------------------------------------------------------------------------
// The transaction's settings

export interface TransactionSettings {
  role: 'anon' | 'authenticated' | 'service_role';
  /** Always includes `role`. */
  claims: Record<string, unknown>;
  method: string;
  path: string;
  /** The schema of the request, first in the search path. */
  schema: string;
  readOnly: boolean;
}

/**
 * The first statement of every REST transaction, as PostgREST's setPgLocals: the search path,
 * the request's role and claims, the method and path, all transaction-local, so nothing leaks to
 * the next request on the connection. A read also makes its transaction read-only.
 */
const SETTINGS =
  `SELECT set_config('search_path', $1, true), set_config('role', $2, true), set_config('request.jwt.claims', $3, true), ` +
  `set_config('request.method', $4, true), set_config('request.path', $5, true)`;
const READ_ONLY_SETTINGS = `${SETTINGS}, set_config('transaction_read_only', 'on', true)`;
const searchPaths = new Map<string, string>();

export function renderSettings(s: TransactionSettings): SqlStatement {
  let searchPath = searchPaths.get(s.schema);
  if (searchPath === undefined) {
    // Schemas come from IDP_REST_SCHEMAS: a handful, so each one's search path is written once.
    searchPath = [...new Set([s.schema, 'public'])].map(ident).join(', ');
    searchPaths.set(s.schema, searchPath);
  }
  return {
    text: s.readOnly ? READ_ONLY_SETTINGS : SETTINGS,
    values: [searchPath, s.role, JSON.stringify(s.claims), s.method, s.path],
  };
}
