// Turns a PostgREST-style request into parameterised SQL. Pure: no I/O.
//
// Safety rules, enforced everywhere below:
// - Every value that comes from the request is a bound parameter ($n); none is ever spliced into SQL.
// - Every identifier written into SQL is a column or table name taken from the catalog (TableInfo),
//   never the request's spelling of it, and is quoted with quoteIdent.
// - Type names in casts also come from the catalog and must pass sqlTypeName.

import { quoteIdent } from '../../kit/db.js';
import { RestError, restErrors } from './errors.js';

export type TableInfo = {
  schema: string;
  name: string;
  /** column name -> Postgres type name (format_type / udt_name), in table order */
  columns: Map<string, { type: string }>;
  /** The primary key's columns (empty without one): the default conflict target of an upsert. */
  primaryKey?: string[];
};

export type SqlQuery = { text: string; values: unknown[] };

export type OrderTerm = {
  column: string;
  direction: 'asc' | 'desc' | null;
  nulls: 'first' | 'last' | null;
};

export type ComparisonOp = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte' | 'like' | 'ilike';

export type Filter =
  | { column: string; negate: boolean; op: ComparisonOp; value: string }
  | { column: string; negate: boolean; op: 'in'; value: string[] }
  | { column: string; negate: boolean; op: 'is'; value: 'null' | 'true' | 'false' | 'unknown' };

export type LimitOffset = { limit: number | null; offset: number | null };

/** Query keys that are not filters. */
export const RESERVED_PARAMS: ReadonlySet<string> = new Set([
  'select',
  'order',
  'limit',
  'offset',
  'columns',
  'on_conflict',
]);

const COMPARISON_SQL: Record<ComparisonOp, string> = {
  eq: '=',
  neq: '<>',
  gt: '>',
  gte: '>=',
  lt: '<',
  lte: '<=',
  like: 'LIKE',
  ilike: 'ILIKE',
};

// PostgREST writes `*` for LIKE's `%` (a `%` is awkward in a URL); `%`, `_` and `\` keep their LIKE
// meaning, so a literal `*` cannot be matched.
const PATTERN_OPS = new Set<ComparisonOp>(['like', 'ilike']);

const IS_VALUES = new Set(['null', 'true', 'false', 'unknown']);

// PostgREST parses these keys as logic trees (`or=(a.eq.1,b.eq.2)`), not as column filters.
const LOGIC_KEYS = new Set(['or', 'and', 'not.or', 'not.and']);

// Unquoted names as PostgREST clients send them; anything else must be double-quoted.
const UNQUOTED_NAME = /^[\p{L}\p{N}_$]+$/u;

function qualifiedName(table: TableInfo): string {
  return `${quoteIdent(table.schema)}.${quoteIdent(table.name)}`;
}

// A multi-word name is only accepted if it is one of SQL's own spellings, so that a catalog type
// name with spaces (possible via udt_name of a user-created type) can never add SQL words.
const MULTI_WORD_TYPES = new Set([
  'bit varying',
  'character varying',
  'double precision',
  'time with time zone',
  'time without time zone',
  'timestamp with time zone',
  'timestamp without time zone',
]);

/** The type name to cast a parameter to, or null when it cannot be written safely. */
function sqlTypeName(type: string): string | null {
  if (!/^[a-z][a-z0-9_ ]*(\[\])?$/i.test(type)) return null;
  const base = type.replace(/\[\]$/, '');
  if (base.includes(' ') && !MULTI_WORD_TYPES.has(base.toLowerCase())) return null;
  return type;
}

// ---------------------------------------------------------------------------------------------
// Small lexing helpers

/**
 * Splits on commas that are outside double quotes. Inside quotes a backslash escapes the next
 * character (PostgREST's quoted-value rule). Returns null on an unterminated quote.
 */
function splitTopLevel(raw: string): string[] | null {
  const parts: string[] = [];
  let current = '';
  let inQuotes = false;
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (inQuotes && ch === '\\' && i + 1 < raw.length) {
      current += ch + raw[i + 1]!;
      i++;
    } else if (ch === '"') {
      inQuotes = !inQuotes;
      current += ch;
    } else if (ch === ',' && !inQuotes) {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  if (inQuotes) return null;
  parts.push(current);
  return parts;
}

/**
 * Reads a (possibly double-quoted) name starting at `pos`. An unquoted name runs until the first
 * character that is not a name character. Returns null if there is no name there.
 */
function readName(s: string, pos: number): { name: string; end: number } | null {
  if (s[pos] === '"') {
    let name = '';
    for (let i = pos + 1; i < s.length; i++) {
      const ch = s[i]!;
      if (ch === '\\' && i + 1 < s.length) {
        name += s[i + 1]!;
        i++;
      } else if (ch === '"') {
        return name === '' ? null : { name, end: i + 1 };
      } else {
        name += ch;
      }
    }
    return null;
  }
  let end = pos;
  while (end < s.length && UNQUOTED_NAME.test(s[end]!)) end++;
  return end === pos ? null : { name: s.slice(pos, end), end };
}

/** A whole string that is exactly one name, or null. */
function parseName(s: string): string | null {
  const read = readName(s, 0);
  return read !== null && read.end === s.length ? read.name : null;
}

function unknownColumn(table: TableInfo, column: string): RestError {
  return new RestError(400, '42703', `column ${table.name}.${column} does not exist`);
}

function parseError(what: string, raw: string, details: string | null = null): RestError {
  // PostgREST quotes the parser message like this, followed by a position we do not reproduce.
  return new RestError(400, 'PGRST100', `"failed to parse ${what} (${raw})"`, details);
}

// ---------------------------------------------------------------------------------------------
// Parsers

/** Column names to return. `*` (or no select) means all columns, in table order. */
export function parseSelect(select: string | null | undefined, table: TableInfo): string[] {
  if (select === undefined || select === null) return [...table.columns.keys()];
  const items = splitTopLevel(select);
  if (items === null) throw parseError('select parameter', select, 'unterminated double quote');
  const columns: string[] = [];
  for (const rawItem of items) {
    const item = rawItem.trim();
    if (item === '*') {
      for (const c of table.columns.keys()) if (!columns.includes(c)) columns.push(c);
      continue;
    }
    const name = parseName(item);
    if (name === null) {
      throw parseError(
        'select parameter',
        select,
        'only column names and * are supported (no embedding, casts, aliases or JSON paths)',
      );
    }
    if (!table.columns.has(name)) throw unknownColumn(table, name);
    if (!columns.includes(name)) columns.push(name);
  }
  return columns;
}

/** `col`, `col.asc`, `col.desc`, each optionally followed by `.nullsfirst` / `.nullslast`. */
export function parseOrder(order: string | null | undefined, table: TableInfo): OrderTerm[] {
  if (order === undefined || order === null) return [];
  const items = splitTopLevel(order);
  if (items === null) throw parseError('order', order, 'unterminated double quote');
  return items.map((rawItem) => {
    const item = rawItem.trim();
    const read = readName(item, 0);
    if (read === null) throw parseError('order', order, 'expected a column name');
    const modifiers = item.slice(read.end).split('.');
    // modifiers[0] is whatever directly follows the name: '' when the name ends the item or a dot follows.
    if (modifiers[0] !== '') throw parseError('order', order, 'expected "." after the column name');
    const rest = modifiers.slice(1);
    let direction: OrderTerm['direction'] = null;
    let nulls: OrderTerm['nulls'] = null;
    if (rest[0] === 'asc' || rest[0] === 'desc') direction = rest.shift() as 'asc' | 'desc';
    if (rest[0] === 'nullsfirst' || rest[0] === 'nullslast') {
      nulls = rest.shift() === 'nullsfirst' ? 'first' : 'last';
    }
    if (rest.length > 0) {
      throw parseError('order', order, 'expected asc, desc, nullsfirst or nullslast');
    }
    if (!table.columns.has(read.name)) throw unknownColumn(table, read.name);
    return { column: read.name, direction, nulls };
  });
}

/** `(a,b,"c,d")` -> ['a', 'b', 'c,d']; null if it is not a list. */
function parseList(raw: string): string[] | null {
  if (!raw.startsWith('(') || !raw.endsWith(')')) return null;
  const inner = raw.slice(1, -1);
  if (inner === '') return [];
  const parts = splitTopLevel(inner);
  if (parts === null) return null;
  const values: string[] = [];
  for (const part of parts) {
    if (part.startsWith('"')) {
      const read = readName(part, 0);
      // a quoted element must be the whole element; an empty "" is a legitimate empty string
      if (part === '""') values.push('');
      else if (read !== null && read.end === part.length) values.push(read.name);
      else return null;
    } else if (part.includes('(') || part.includes(')') || part.includes('"')) {
      return null;
    } else {
      values.push(part);
    }
  }
  return values;
}

/** Every non-reserved query key is a filter: `col=[not.]op.value`; `or` / `and` are logic trees. */
export function parseFilters(params: URLSearchParams, table: TableInfo): Filter[] {
  const filters: Filter[] = [];
  for (const [key, raw] of params) {
    if (RESERVED_PARAMS.has(key) || LOGIC_KEYS.has(key)) continue;
    const column = parseName(key);
    if (column === null) {
      throw parseError('tree path', key, 'only plain column names are supported (no JSON paths)');
    }
    if (!table.columns.has(column)) throw unknownColumn(table, column);
    filters.push(parseOperation(column, raw, raw, parseList));
  }
  return filters;
}

/**
 * `[not.]op.value` for `column`. `list` reads the value of `in` (the whole rest of the text in a
 * query parameter; inside a logic tree, the caller has already cut the value out).
 */
function parseOperation(column: string, expression: string, raw: string, list: (value: string) => string[] | null): Filter {
  const negate = expression.startsWith('not.');
  const expr = negate ? expression.slice('not.'.length) : expression;
  const dot = expr.indexOf('.');
  if (dot < 0) throw parseError('filter', raw, 'expected operator.value');
  const op = expr.slice(0, dot);
  const value = expr.slice(dot + 1);

  if (Object.hasOwn(COMPARISON_SQL, op)) {
    return { column, negate, op: op as ComparisonOp, value };
  }
  if (op === 'in') {
    const values = list(value);
    if (values === null) throw parseError('filter', raw, 'expected a list like (a,b,"c,d")');
    return { column, negate, op: 'in', value: values };
  }
  if (op === 'is') {
    const isValue = value.toLowerCase();
    if (!IS_VALUES.has(isValue)) {
      throw parseError('filter', raw, 'is accepts null, true, false or unknown');
    }
    return { column, negate, op: 'is', value: isValue as 'null' | 'true' | 'false' | 'unknown' };
  }
  throw parseError('filter', raw, 'supported operators: eq, neq, gt, gte, lt, lte, like, ilike, in, is');
}

function parseCount(params: URLSearchParams, name: 'limit' | 'offset'): number | null {
  const raw = params.get(name);
  if (raw === null) return null;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n)) {
    throw parseError(`${name} parameter`, raw, 'expected a non-negative integer');
  }
  return n;
}

export function parseLimitOffset(params: URLSearchParams): LimitOffset {
  return { limit: parseCount(params, 'limit'), offset: parseCount(params, 'offset') };
}

// ---------------------------------------------------------------------------------------------
// SQL rendering

/** Binds a value and returns its placeholder. */
function bind(values: unknown[], value: unknown): string {
  values.push(value);
  return `$${values.length}`;
}

function renderFilter(filter: Filter, table: TableInfo, values: unknown[]): string {
  const column = quoteIdent(filter.column);
  let sql: string;
  if (filter.op === 'is') {
    // filter.value is one of IS_VALUES (checked by parseFilters), i.e. a fixed SQL keyword.
    sql = `${column} IS ${filter.value.toUpperCase()}`;
  } else if (PATTERN_OPS.has(filter.op as ComparisonOp)) {
    // A pattern is text whatever the column; on a column without LIKE Postgres answers 42883 itself.
    sql = `${column} ${COMPARISON_SQL[filter.op as ComparisonOp]} ${bind(values, (filter.value as string).replaceAll('*', '%'))}::text`;
  } else {
    // Casting the parameter to the column's type makes Postgres reject bad input itself
    // (22P02 "invalid input syntax for type bigint"), as PostgREST does. Without a safe type
    // name, compare the text forms instead.
    const type = sqlTypeName(table.columns.get(filter.column)?.type ?? '');
    const lhs = type === null ? `${column}::text` : column;
    const param = (v: string) => `${bind(values, v)}::${type ?? 'text'}`;
    if (filter.op === 'in') {
      // `x IN ()` is invalid SQL; an empty list matches nothing, like PostgREST's `= ANY('{}')`.
      sql = filter.value.length === 0 ? 'false' : `${lhs} IN (${filter.value.map(param).join(', ')})`;
    } else {
      sql = `${lhs} ${COMPARISON_SQL[filter.op]} ${param(filter.value)}`;
    }
  }
  return filter.negate ? `NOT (${sql})` : sql;
}

function renderCondition(condition: Condition, table: TableInfo, values: unknown[]): string {
  if (!('logic' in condition)) return renderFilter(condition, table, values);
  const joined = condition.children.map((c) => renderCondition(c, table, values)).join(condition.logic === 'or' ? ' OR ' : ' AND ');
  return condition.negate ? `NOT (${joined})` : `(${joined})`;
}

function renderWhere(conditions: Condition[], table: TableInfo, values: unknown[]): string {
  if (conditions.length === 0) return '';
  return ` WHERE ${conditions.map((c) => renderCondition(c, table, values)).join(' AND ')}`;
}

function renderOrder(terms: OrderTerm[]): string {
  if (terms.length === 0) return '';
  const parts = terms.map((t) => {
    let sql = quoteIdent(t.column);
    if (t.direction !== null) sql += ` ${t.direction.toUpperCase()}`;
    if (t.nulls !== null) sql += ` NULLS ${t.nulls.toUpperCase()}`;
    return sql;
  });
  return ` ORDER BY ${parts.join(', ')}`;
}

function renderColumns(columns: string[]): string {
  return columns.map(quoteIdent).join(', ');
}

function renderReturning(returning: string[] | null): string {
  return returning === null || returning.length === 0 ? 'RETURNING 1' : `RETURNING ${renderColumns(returning)}`;
}

// Postgres renders the rows (to_json: bigint as a number, timestamptz as ISO text with offset), and
// the ::text keeps node-pg from parsing it, so the body can be sent byte-for-byte as PostgREST would.
function aggregate(source: string): string {
  return `SELECT coalesce(json_agg(${source}), '[]'::json)::text AS body, count(*)::int AS n FROM ${source}`;
}

function checkColumn(table: TableInfo, key: string): void {
  if (!table.columns.has(key)) {
    throw new RestError(
      400,
      'PGRST204',
      `Could not find the '${key}' column of '${table.name}' in the schema cache`,
    );
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Result columns: `body` (JSON array text of the rows), `n` (row count) and, with `count`, `total`
 * (rows matching the filters, ignoring limit and offset: `Prefer: count=exact`).
 */
export function buildSelect(table: TableInfo, params: URLSearchParams, opts: { count?: boolean } = {}): SqlQuery {
  const columns = parseSelect(params.get('select'), table);
  const filters = parseConditions(params, table);
  const order = parseOrder(params.get('order'), table);
  const { limit, offset } = parseLimitOffset(params);
  const values: unknown[] = [];
  let inner = `SELECT ${renderColumns(columns)} FROM ${qualifiedName(table)}`;
  inner += renderWhere(filters, table, values);
  inner += renderOrder(order);
  if (limit !== null) inner += ` LIMIT ${bind(values, limit)}`;
  if (offset !== null) inner += ` OFFSET ${bind(values, offset)}`;
  const total = opts.count
    ? `, (SELECT count(*) FROM ${qualifiedName(table)}${renderWhere(filters, table, values)})::int AS total`
    : '';
  // json_agg consumes the subquery's rows in its ORDER BY order (PostgREST relies on this too).
  const text = `SELECT coalesce(json_agg(t), '[]'::json)::text AS body, count(*)::int AS n${total} FROM (${inner}) t`;
  return { text, values };
}

/**
 * INSERT of one object or an array of objects. Only keys present in the body (or named by the
 * `columns` query parameter) are listed, so every other column takes its DEFAULT; within an array,
 * a listed key missing from one row becomes NULL (PostgREST's behaviour).
 */
export function buildInsert(
  table: TableInfo,
  rows: Record<string, unknown> | Record<string, unknown>[],
  returning: string[] | null,
  columnsParam: string | null = null,
  upsert: Upsert | null = null,
): SqlQuery {
  const list = Array.isArray(rows) ? rows : [rows];
  if (!list.every(isPlainObject)) throw restErrors.invalidBody('expected a JSON object or an array of objects');

  let columns: string[];
  if (columnsParam !== null) {
    columns = parseColumnList('columns parameter', columnsParam);
    columns.forEach((c) => checkColumn(table, c));
  } else {
    const keys = new Set<string>();
    for (const row of list) for (const key of Object.keys(row)) keys.add(key);
    columns = [...keys];
    columns.forEach((c) => checkColumn(table, c));
  }

  // The rows travel as one JSON parameter; json_populate_recordset coerces each value to the
  // column type inside Postgres, which raises 22P02 / 23502 etc. itself.
  const values: unknown[] = [];
  const json = bind(values, JSON.stringify(list));
  const target = columns.length === 0 ? '' : ` (${renderColumns(columns)})`;
  const insert =
    `INSERT INTO ${qualifiedName(table)}${target} ` +
    `SELECT ${renderColumns(columns)} FROM json_populate_recordset(null::${qualifiedName(table)}, ${json}::json)` +
    (upsert === null ? '' : renderOnConflict(table, columns, upsert)) +
    ` ${renderReturning(returning)}`;
  return { text: `WITH ins AS (${insert}) ${aggregate('ins')}`, values };
}

/** `Prefer: resolution=…` with the optional `on_conflict` query parameter (raw). */
export type Upsert = { resolution: 'merge-duplicates' | 'ignore-duplicates'; onConflict: string | null };

function parseColumnList(what: string, raw: string): string[] {
  const names = splitTopLevel(raw)?.map((c) => parseName(c.trim()));
  if (names === undefined || names.some((c) => c === null)) {
    throw parseError(what, raw, 'expected a comma list of column names');
  }
  return [...new Set(names as string[])];
}

/**
 * PostgREST's upsert: the conflict target is `on_conflict`'s columns, else the primary key.
 * merge-duplicates updates the conflicting row with the columns sent; ignore-duplicates keeps it.
 * Without a target (no primary key, no on_conflict) ignore-duplicates skips any conflict and
 * merge-duplicates has nothing to merge on, so it is a plain insert.
 */
function renderOnConflict(table: TableInfo, columns: string[], upsert: Upsert): string {
  const target = upsert.onConflict === null ? table.primaryKey ?? [] : parseColumnList('on_conflict parameter', upsert.onConflict);
  target.forEach((c) => {
    if (!table.columns.has(c)) throw unknownColumn(table, c);
  });
  const conflict = target.length === 0 ? ' ON CONFLICT' : ` ON CONFLICT (${renderColumns(target)})`;
  if (upsert.resolution === 'ignore-duplicates') return `${conflict} DO NOTHING`;
  if (target.length === 0) return '';
  if (columns.length === 0) return `${conflict} DO NOTHING`;
  return `${conflict} DO UPDATE SET ${columns.map((c) => `${quoteIdent(c)} = EXCLUDED.${quoteIdent(c)}`).join(', ')}`;
}

/** PATCH: sets the body's keys on the rows matching the filters. */
export function buildUpdate(
  table: TableInfo,
  patch: Record<string, unknown>,
  params: URLSearchParams,
  returning: string[] | null,
): SqlQuery {
  if (!isPlainObject(patch)) throw restErrors.invalidBody('expected a JSON object or an array of objects');
  const columns = Object.keys(patch);
  columns.forEach((c) => checkColumn(table, c));
  const filters = parseConditions(params, table);
  rejectLimitOffset(params);
  // PostgREST issues no UPDATE for an empty patch (there is nothing to SET) and returns no rows.
  if (columns.length === 0) return { text: `SELECT '[]'::text AS body, 0 AS n`, values: [] };
  if (filters.length === 0) throw new RestError(400, '21000', 'UPDATE requires a WHERE clause');

  const values: unknown[] = [];
  const json = bind(values, JSON.stringify(patch));
  const list = renderColumns(columns);
  // The sub-select form keeps the WHERE clause's column names unambiguous (no second FROM item).
  const update =
    `UPDATE ${qualifiedName(table)} SET (${list}) = ` +
    `(SELECT ${list} FROM json_populate_record(null::${qualifiedName(table)}, ${json}::json))` +
    renderWhere(filters, table, values) +
    ` ${renderReturning(returning)}`;
  return { text: `WITH upd AS (${update}) ${aggregate('upd')}`, values };
}

/** DELETE of the rows matching the filters. */
export function buildDelete(
  table: TableInfo,
  params: URLSearchParams,
  returning: string[] | null,
): SqlQuery {
  const filters = parseConditions(params, table);
  rejectLimitOffset(params);
  if (filters.length === 0) throw new RestError(400, '21000', 'DELETE requires a WHERE clause');
  const values: unknown[] = [];
  const del = `DELETE FROM ${qualifiedName(table)}${renderWhere(filters, table, values)} ${renderReturning(returning)}`;
  return { text: `WITH del AS (${del}) ${aggregate('del')}`, values };
}

// limit/offset on a mutation would narrow which rows change; ignoring them would change more rows
// than the client asked for, so refuse instead.
function rejectLimitOffset(params: URLSearchParams): void {
  for (const name of ['limit', 'offset'] as const) {
    const raw = params.get(name);
    if (raw !== null) {
      throw parseError(`${name} parameter`, raw, 'limit and offset are not supported on update or delete');
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Logic trees: `or=(a.eq.1,b.eq.2)`, `and=(…)`, `not.or=(…)`, nested `and(…)` / `or(…)` / `not.and(…)`

const MAX_TREE_DEPTH = 32;

export type LogicNode = { logic: 'and' | 'or'; negate: boolean; children: Condition[] };
/** What a WHERE clause is made of: plain filters and logic trees, all of them ANDed. */
export type Condition = Filter | LogicNode;

/** The column filters and the logic trees of a request. */
export function parseConditions(params: URLSearchParams, table: TableInfo): Condition[] {
  const conditions: Condition[] = parseFilters(params, table);
  for (const [key, raw] of params) {
    if (!LOGIC_KEYS.has(key)) continue;
    const negate = key.startsWith('not.');
    const logic = negate ? key.slice('not.'.length) : key;
    // As PostgREST does, the key's operator and the value are read as one tree: `or` + `(…)`.
    const reader = new LogicTreeReader(`${logic}${raw}`, raw);
    const tree = reader.tree(negate);
    reader.end();
    // The whole tree is read before any name is looked up, as PostgREST parses before it plans.
    checkTreeColumns(tree, table);
    conditions.push(tree);
  }
  return conditions;
}

function checkTreeColumns(condition: Condition, table: TableInfo): void {
  if ('logic' in condition) condition.children.forEach((c) => checkTreeColumns(c, table));
  else if (!table.columns.has(condition.column)) throw unknownColumn(table, condition.column);
}

/**
 * A recursive-descent reader of PostgREST's logic-tree grammar. Inside a tree a value runs to the
 * next `,` or `)` unless it is double-quoted (`"a,b"`, backslash escaping the next character) or a
 * `{…}` array literal; `in` takes a parenthesised list.
 */
class LogicTreeReader {
  private pos = 0;

  constructor(
    private readonly text: string,
    private readonly raw: string,
  ) {}

  private fail(details: string): RestError {
    return parseError('logic tree', this.raw, details);
  }

  private spaces(): void {
    while (this.text[this.pos] === ' ' || this.text[this.pos] === '\t') this.pos++;
  }

  private expect(ch: string): void {
    this.spaces();
    if (this.text[this.pos] !== ch) throw this.fail(`expected "${ch}" at position ${this.pos + 1}`);
    this.pos++;
    this.spaces();
  }

  end(): void {
    this.spaces();
    if (this.pos !== this.text.length) throw this.fail(`unexpected "${this.text[this.pos]}" after the tree`);
  }

  /** `and(…)` / `or(…)` at the current position; `negate` when a `not.` came before it. */
  tree(negate: boolean, depth = 1): LogicNode {
    // PostgREST sets no limit; one keeps a URL of nested and( from exhausting the stack here and in
    // the SQL it would become.
    if (depth > MAX_TREE_DEPTH) throw this.fail(`logic trees may nest at most ${MAX_TREE_DEPTH} levels`);
    const rest = this.text.slice(this.pos);
    const logic = rest.startsWith('and') ? 'and' : rest.startsWith('or') ? 'or' : null;
    if (logic === null) throw this.fail('expected logic operator (and, or)');
    this.pos += logic.length;
    this.expect('(');
    const children: Condition[] = [this.item(depth)];
    this.spaces();
    while (this.text[this.pos] === ',') {
      this.pos++;
      children.push(this.item(depth));
      this.spaces();
    }
    this.expect(')');
    return { logic, negate, children };
  }

  private item(depth: number): Condition {
    this.spaces();
    const nested = /^(not\.)?(and|or)\(/.exec(this.text.slice(this.pos, this.pos + 8));
    if (nested) {
      this.pos += nested[1]?.length ?? 0;
      return this.tree(nested[1] !== undefined, depth + 1);
    }
    const name = readName(this.text, this.pos);
    if (name === null) throw this.fail('expected a column name, not. or a logic operator (and, or)');
    this.pos = name.end;
    if (this.text[this.pos] !== '.') throw this.fail(`expected "." after ${name.name}`);
    this.pos++;
    const start = this.pos;
    if (this.text.startsWith('not.', this.pos)) this.pos += 'not.'.length;
    const dot = this.text.indexOf('.', this.pos);
    if (dot < 0) throw this.fail('expected operator.value');
    const op = this.text.slice(this.pos, dot);
    this.pos = dot + 1;
    const list = op === 'in' ? this.list() : null;
    const expression = `${this.text.slice(start, dot)}.${list === null ? this.value() : '()'}`;
    try {
      return parseOperation(name.name, expression, this.raw, () => list);
    } catch (err) {
      // PostgREST reports any flaw inside the tree as a flaw of the tree.
      if (err instanceof RestError && err.code === 'PGRST100') throw this.fail(err.details ?? 'invalid filter');
      throw err;
    }
  }

  /** A single value: quoted, an array literal, or everything up to the next `,` or `)`. */
  private value(): string {
    const quoted = this.quoted();
    if (quoted !== null) return quoted;
    if (this.text[this.pos] === '{') {
      const close = this.text.indexOf('}', this.pos);
      if (close > 0 && !this.text.slice(this.pos + 1, close).includes('{')) {
        const literal = this.text.slice(this.pos, close + 1);
        this.pos = close + 1;
        return literal;
      }
    }
    return this.plain();
  }

  private plain(): string {
    const start = this.pos;
    while (this.pos < this.text.length && this.text[this.pos] !== ',' && this.text[this.pos] !== ')') this.pos++;
    return this.text.slice(start, this.pos);
  }

  /** `"…"` followed by `,` or `)`; otherwise null and nothing consumed (the quote is then plain text). */
  private quoted(): string | null {
    if (this.text[this.pos] !== '"') return null;
    let value = '';
    for (let i = this.pos + 1; i < this.text.length; i++) {
      const ch = this.text[i]!;
      if (ch === '\\' && i + 1 < this.text.length) {
        value += this.text[++i]!;
      } else if (ch === '"') {
        const next = this.text[i + 1];
        if (next !== ',' && next !== ')') return null;
        this.pos = i + 1;
        return value;
      } else {
        value += ch;
      }
    }
    return null;
  }

  /** `(a,"b,c")` for `in`. */
  private list(): string[] {
    if (this.text[this.pos] !== '(') throw this.fail('expected a list like (a,b,"c,d") after in.');
    this.pos++;
    const values: string[] = [];
    for (;;) {
      this.spaces();
      values.push(this.quoted() ?? this.plain().trim());
      if (this.text[this.pos] === ',') {
        this.pos++;
        continue;
      }
      if (this.text[this.pos] === ')') {
        this.pos++;
        return values;
      }
      throw this.fail('unterminated list');
    }
  }
}
