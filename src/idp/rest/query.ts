// Turns a PostgREST-style request into parameterised SQL. Pure: no I/O.
//
// Safety rules, enforced everywhere below:
// - Every value that comes from the request is a bound parameter ($n); none is ever spliced into SQL.
// - Every identifier written into SQL is a column or table name taken from the catalog (TableInfo),
//   never the request's spelling of it, and is quoted with quoteIdent.
// - Type names in casts also come from the catalog and must pass sqlTypeName.

export class RestQueryError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public details: string | null = null,
    public hint: string | null = null,
  ) {
    super(message);
    this.name = 'RestQueryError';
  }

  /** PostgREST's error body: all four keys, missing values null. */
  toJSON(): { code: string; details: string | null; hint: string | null; message: string } {
    return { code: this.code, details: this.details, hint: this.hint, message: this.message };
  }
}

export type TableInfo = {
  schema: string;
  name: string;
  /** column name -> Postgres type name (format_type / udt_name), in table order */
  columns: Map<string, { type: string }>;
};

export type SqlQuery = { text: string; values: unknown[] };

export type OrderTerm = {
  column: string;
  direction: 'asc' | 'desc' | null;
  nulls: 'first' | 'last' | null;
};

export type ComparisonOp = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte';

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
};

const IS_VALUES = new Set(['null', 'true', 'false', 'unknown']);

// PostgREST parses these keys as logic trees, not columns; saying "column notes.or does not exist"
// would mislead a client that used .or().
const LOGIC_KEYS = new Set(['or', 'and']);

// Unquoted names as PostgREST clients send them; anything else must be double-quoted.
const UNQUOTED_NAME = /^[\p{L}\p{N}_$]+$/u;

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

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

function unknownColumn(table: TableInfo, column: string): RestQueryError {
  return new RestQueryError(400, '42703', `column ${table.name}.${column} does not exist`);
}

function parseError(what: string, raw: string, details: string | null = null): RestQueryError {
  // PostgREST quotes the parser message like this, followed by a position we do not reproduce.
  return new RestQueryError(400, 'PGRST100', `"failed to parse ${what} (${raw})"`, details);
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

/** Every non-reserved query key is a filter: `col=[not.]op.value`. */
export function parseFilters(params: URLSearchParams, table: TableInfo): Filter[] {
  const filters: Filter[] = [];
  for (const [key, raw] of params) {
    if (RESERVED_PARAMS.has(key)) continue;
    if (LOGIC_KEYS.has(key)) {
      throw parseError('logic tree', raw, 'or/and filters are not supported');
    }
    const column = parseName(key);
    if (column === null) {
      throw parseError('tree path', key, 'only plain column names are supported (no JSON paths)');
    }
    if (!table.columns.has(column)) throw unknownColumn(table, column);

    const negate = raw.startsWith('not.');
    const expr = negate ? raw.slice('not.'.length) : raw;
    const dot = expr.indexOf('.');
    if (dot < 0) throw parseError('filter', raw, 'expected operator.value');
    const op = expr.slice(0, dot);
    const value = expr.slice(dot + 1);

    if (Object.hasOwn(COMPARISON_SQL, op)) {
      filters.push({ column, negate, op: op as ComparisonOp, value });
    } else if (op === 'in') {
      const list = parseList(value);
      if (list === null) throw parseError('filter', raw, 'expected a list like (a,b,"c,d")');
      filters.push({ column, negate, op: 'in', value: list });
    } else if (op === 'is') {
      const isValue = value.toLowerCase();
      if (!IS_VALUES.has(isValue)) {
        throw parseError('filter', raw, 'is accepts null, true, false or unknown');
      }
      filters.push({ column, negate, op: 'is', value: isValue as 'null' | 'true' | 'false' | 'unknown' });
    } else {
      throw parseError('filter', raw, 'supported operators: eq, neq, gt, gte, lt, lte, in, is');
    }
  }
  return filters;
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

function renderWhere(filters: Filter[], table: TableInfo, values: unknown[]): string {
  if (filters.length === 0) return '';
  return ` WHERE ${filters.map((f) => renderFilter(f, table, values)).join(' AND ')}`;
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
    throw new RestQueryError(
      400,
      'PGRST204',
      `Could not find the '${key}' column of '${table.name}' in the schema cache`,
    );
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function invalidBody(): RestQueryError {
  return new RestQueryError(400, 'PGRST102', 'Empty or invalid json', 'expected a JSON object or an array of objects');
}

/**
 * Result columns: `body` (JSON array text of the rows), `n` (row count) and, with `count`, `total`
 * (rows matching the filters, ignoring limit and offset: `Prefer: count=exact`).
 */
export function buildSelect(table: TableInfo, params: URLSearchParams, opts: { count?: boolean } = {}): SqlQuery {
  const columns = parseSelect(params.get('select'), table);
  const filters = parseFilters(params, table);
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
): SqlQuery {
  const list = Array.isArray(rows) ? rows : [rows];
  if (!list.every(isPlainObject)) throw invalidBody();

  let columns: string[];
  if (columnsParam !== null) {
    const names = splitTopLevel(columnsParam)?.map((c) => parseName(c.trim()));
    if (names === undefined || names.some((c) => c === null)) {
      throw parseError('columns parameter', columnsParam, 'expected a comma list of column names');
    }
    columns = [...new Set(names as string[])];
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
    `SELECT ${renderColumns(columns)} FROM json_populate_recordset(null::${qualifiedName(table)}, ${json}::json) ` +
    renderReturning(returning);
  return { text: `WITH ins AS (${insert}) ${aggregate('ins')}`, values };
}

/** PATCH: sets the body's keys on the rows matching the filters. */
export function buildUpdate(
  table: TableInfo,
  patch: Record<string, unknown>,
  params: URLSearchParams,
  returning: string[] | null,
): SqlQuery {
  if (!isPlainObject(patch)) throw invalidBody();
  const columns = Object.keys(patch);
  columns.forEach((c) => checkColumn(table, c));
  const filters = parseFilters(params, table);
  rejectLimitOffset(params);
  // PostgREST issues no UPDATE for an empty patch (there is nothing to SET) and returns no rows.
  if (columns.length === 0) return { text: `SELECT '[]'::text AS body, 0 AS n`, values: [] };
  if (filters.length === 0) throw new RestQueryError(400, '21000', 'UPDATE requires a WHERE clause');

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
  const filters = parseFilters(params, table);
  rejectLimitOffset(params);
  if (filters.length === 0) throw new RestQueryError(400, '21000', 'DELETE requires a WHERE clause');
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
