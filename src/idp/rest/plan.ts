// Stage 2 of 3 of a REST request (parse → plan → SQL): what was parsed, checked against the schema
// cache as PostgREST's Plan.hs does. Tables, columns, relationships and functions are looked up
// here; a name the cache does not know is an error marked `schemaMiss`, and the caller plans once
// more against a cache read after the miss. Nothing here writes SQL: the plan names tables,
// columns and aliases, and sql.ts renders it.

import { RestError, restErrors } from './errors.js';
import { closestName, tableNotFoundHint } from './name-hints.js';
import type { EmbedPath, Filter, JsonOperation, LogicTree, OpExpr, OrderTerm, QueryParams, SelectItem } from './parse.js';
import { parseError } from './parse.js';
import { findRelationship } from './relationships.js';
import {
  type QualifiedName,
  type Relationship,
  type Routine,
  type RoutineParam,
  type SchemaSnapshot,
  type Table,
  isToOne,
} from './schema-cache.js';

/** How SQL names a row source: a table by its qualified name, anything else by an alias. */
export interface Qualifier {
  schema: string | null;
  name: string;
}

export interface ColumnRef {
  qualifier: Qualifier;
  column: string;
}

/** A column of a row source, possibly with a JSON path into it. */
export interface PlannedField {
  column: string;
  jsonPath: JsonOperation[];
  /** The JSON path needs `to_jsonb(column)` first: the column is not json or jsonb. */
  toJson: boolean;
}

export interface SelectColumn extends PlannedField {
  /** The key in the output: the alias given, else the JSON path's last key, else the column. */
  outputName: string;
  cast: string | null;
  /** `*`: every column of the source. */
  star: boolean;
}

export type Condition =
  | ({ kind: 'filter'; expr: OpExpr } & PlannedField)
  /** `embed=is.null` / `embed=not.is.null`: whether an embedded resource has a match. */
  | { kind: 'embed-null'; isNull: boolean; embed: ReadNode }
  | { kind: 'logic'; op: 'and' | 'or'; negate: boolean; children: Condition[] };

export interface PlannedOrder extends PlannedField {
  direction: 'asc' | 'desc' | null;
  nulls: 'first' | 'last' | null;
  /** A related order (`order=author(name)`): the to-one embedded resource whose column it is. */
  embed: ReadNode | null;
}

export interface Embedding {
  /** As requested: a table, a foreign key or one of its columns. */
  name: string;
  alias: string | null;
  joinType: 'inner' | 'left' | null;
  spread: boolean;
  relationship: Relationship;
  /** The name of the embedded resource's lateral subquery in its parent. */
  aggAlias: string;
  /** Many-to-many: the junction table and its alias inside the embedded resource's subquery. */
  junction: { table: QualifiedName; alias: string } | null;
  /** Equalities that tie the embedded rows to their parent row. */
  joins: Array<[ColumnRef, ColumnRef]>;
}

export interface ReadNode {
  /** A table, or the statement's own rows (of an insert, update, delete or function call). */
  source: { kind: 'table'; table: QualifiedName } | { kind: 'rows' };
  qualifier: Qualifier;
  /** `FROM … AS alias`; null for a table read under its own name. */
  alias: string | null;
  /** For messages: `column <name>.<col> does not exist`. */
  name: string;
  /** Every column of the source in order (and its type, for JSON paths); null when unknown. */
  columns: ReadonlyMap<string, { type: string }> | null;
  /** Empty with no children: every column. */
  select: SelectColumn[];
  where: Condition[];
  order: PlannedOrder[];
  limit: number | null;
  offset: number | null;
  embedding: Embedding | null;
  children: ReadNode[];
}

export interface ReadPlan {
  kind: 'read';
  root: ReadNode;
}

export interface OnConflict {
  resolution: 'merge-duplicates' | 'ignore-duplicates';
  /** The conflict target: `on_conflict`'s columns, else the primary key; empty when neither exists. */
  target: string[];
}

/** The columns a write returns for its representation: `*`, some by name, or none (`RETURNING 1`). */
export type Returning = { kind: 'all' } | { kind: 'columns'; columns: string[] } | { kind: 'none' };

export interface InsertPlan {
  kind: 'insert';
  table: Table;
  columns: string[];
  /** The rows, as one JSON array. */
  body: string;
  /** `Prefer: missing=default`: a column a row leaves out takes its default, not null. */
  applyDefaults: boolean;
  onConflict: OnConflict | null;
  returning: Returning;
  /** What is answered from the written rows (with return=representation). */
  read: ReadNode;
}

export interface UpdatePlan {
  kind: 'update';
  table: Table;
  columns: string[];
  /** The changes, as one JSON object. */
  body: string;
  applyDefaults: boolean;
  where: Condition[];
  returning: Returning;
  read: ReadNode;
}

export interface DeletePlan {
  kind: 'delete';
  table: Table;
  where: Condition[];
  returning: Returning;
  read: ReadNode;
}

export type CallArguments =
  | { kind: 'none' }
  /** A single parameter that takes the whole body (an unnamed json/jsonb one, or params=single-object). */
  | { kind: 'single'; param: RoutineParam; body: string }
  /** Named parameters, taken from the keys of a JSON object (the first one of an array). */
  | { kind: 'named'; params: RoutineParam[]; body: string; bodyIsArray: boolean };

export interface CallPlan {
  kind: 'call';
  routine: Routine;
  args: CallArguments;
  /** What is answered from the function's rows; for a scalar result its one column is `pgrst_scalar`. */
  read: ReadNode;
  readOnly: boolean;
}

export type MutationPlan = InsertPlan | UpdatePlan | DeletePlan;
export type StatementPlan = ReadPlan | MutationPlan | CallPlan;

export const SCALAR_COLUMN = 'pgrst_scalar';

// ---------------------------------------------------------------------------------------------
// Read plans

/** The parsed select tree with what applies to each of its nodes, before any name is checked. */
interface Draft {
  relation: Extract<SelectItem, { kind: 'relation' }> | null;
  fields: Array<Extract<SelectItem, { kind: 'field' }>>;
  filters: Filter[];
  logic: LogicTree[];
  order: OrderTerm[];
  limit: number | null;
  offset: number | null;
  children: Draft[];
}

function draftOf(items: SelectItem[], relation: Draft['relation']): Draft {
  const draft: Draft = { relation, fields: [], filters: [], logic: [], order: [], limit: null, offset: null, children: [] };
  for (const item of items) {
    if (item.kind === 'field') {
      if (item.aggregate !== null) throw restErrors.aggregatesNotAllowed();
      draft.fields.push(item);
    } else {
      draft.children.push(draftOf(item.children, item));
    }
  }
  return draft;
}

/** The draft an embed path leads to (`tags.limit` → the `tags` embedded resource). */
function draftAt(root: Draft, path: EmbedPath): Draft {
  let node = root;
  for (const segment of path) {
    const next = node.children.find((c) => c.relation!.name === segment || c.relation!.alias === segment);
    if (!next) throw restErrors.notEmbedded(segment);
    node = next;
  }
  return node;
}

/** The parameters of a request that shape what is read, each put on the node it names. */
function draftFromParams(params: QueryParams, opts: { rootFilters: boolean; rootOrder: boolean }): Draft {
  const root = draftOf(params.select ?? [], null);
  for (const { path, filter } of params.filters) if (path.length > 0 || opts.rootFilters) draftAt(root, path).filters.push(filter);
  for (const { path, terms } of params.order) if (path.length > 0 || opts.rootOrder) draftAt(root, path).order = terms;
  for (const { path, limit, offset } of params.ranges) {
    if (path.length === 0 && !opts.rootOrder) continue;
    const node = draftAt(root, path);
    node.limit = limit;
    node.offset = offset;
  }
  for (const { path, tree } of params.logic) if (path.length > 0 || opts.rootFilters) draftAt(root, path).logic.push(tree);
  return root;
}

interface Scope {
  snapshot: SchemaSnapshot;
  schema: string;
}

/** A row source being planned: where its rows come from and what it is called. */
interface SourceInfo {
  source: ReadNode['source'];
  qualifier: Qualifier;
  alias: string | null;
  name: string;
  columns: ReadonlyMap<string, { type: string }> | null;
  /** The table name relationships are looked up from. */
  origin: string;
  depth: number;
}

function field(info: SourceInfo, name: string, jsonPath: JsonOperation[]): PlannedField {
  const column = info.columns?.get(name);
  if (info.columns !== null && !column) throw restErrors.unknownColumn(info.name, name);
  const type = column?.type ?? '';
  return { column: name, jsonPath, toJson: jsonPath.length > 0 && type !== 'json' && type !== 'jsonb' };
}

function selectColumn(info: SourceInfo, item: Extract<SelectItem, { kind: 'field' }>): SelectColumn {
  if (item.field.name === '*') {
    return { column: '*', jsonPath: [], toJson: false, outputName: '*', cast: null, star: true };
  }
  const planned = field(info, item.field.name, item.field.jsonPath);
  // A JSON path's column is named after its last key (PostgREST's addAliases), or after the
  // column when the path ends in an index.
  const lastKey = [...item.field.jsonPath].reverse().find((op) => !op.index)?.operand;
  const outputName = item.alias ?? (item.field.jsonPath.length > 0 ? (lastKey ?? item.field.name) : item.field.name);
  return { ...planned, outputName, cast: item.cast, star: false };
}

/** A filter on the name of an embedded resource with `is.null`: whether that resource matched. */
function embedNullFilter(filter: Filter, children: ReadNode[]): Condition | null {
  const { field: f, expr } = filter;
  if (f.jsonPath.length > 0 || expr.operation.kind !== 'is' || expr.operation.value !== 'null') return null;
  const embed = children.find((c) => c.embedding!.name === f.name || c.embedding!.alias === f.name);
  return embed ? { kind: 'embed-null', isNull: !expr.negate, embed } : null;
}

function condition(info: SourceInfo, tree: LogicTree, children: ReadNode[]): Condition {
  if (tree.kind === 'logic') {
    return { kind: 'logic', op: tree.op, negate: tree.negate, children: tree.children.map((c) => condition(info, c, children)) };
  }
  return (
    embedNullFilter(tree.filter, children) ?? {
      kind: 'filter',
      expr: tree.filter.expr,
      ...field(info, tree.filter.field.name, tree.filter.field.jsonPath),
    }
  );
}

function orderTerm(info: SourceInfo, term: OrderTerm, children: ReadNode[]): PlannedOrder {
  if (term.kind === 'field') {
    return { ...field(info, term.field.name, term.field.jsonPath), direction: term.direction, nulls: term.nulls, embed: null };
  }
  const embed = children.find((c) => c.embedding!.name === term.relation || c.embedding!.alias === term.relation);
  if (!embed) throw restErrors.notEmbedded(term.relation);
  if (!isToOne(embed.embedding!.relationship)) throw restErrors.relatedOrderNotToOne(info.origin, term.relation);
  const child = embed.embedding!;
  const childInfo = { name: child.relationship.foreignTable.name, columns: embed.columns } as SourceInfo;
  return { ...field(childInfo, term.field.name, term.field.jsonPath), direction: term.direction, nulls: term.nulls, embed };
}

function embedded(scope: Scope, parent: SourceInfo, draft: Draft): ReadNode {
  const item = draft.relation!;
  const rel = findRelationship(scope.snapshot, scope.schema, parent.origin, item.name, item.hint);
  const table = scope.snapshot.table(rel.foreignTable.schema, rel.foreignTable.name);
  if (!table) throw restErrors.unknownTable(rel.foreignTable.schema, rel.foreignTable.name);
  if (item.spread && !isToOne(rel)) throw restErrors.spreadNotToOne(rel.table.name, item.name);
  const depth = parent.depth + 1;
  const alias = `${rel.foreignTable.name}_${depth}`;
  const self: Qualifier = { schema: null, name: alias };
  const c = rel.cardinality;
  let junction: Embedding['junction'] = null;
  let joins: Array<[ColumnRef, ColumnRef]>;
  if (c.kind === 'm2m') {
    junction = { table: c.junction, alias: `${c.junction.name}_${depth}` };
    const j: Qualifier = { schema: null, name: junction.alias };
    joins = [
      ...c.targetColumns.map(([ftCol, jtCol]): [ColumnRef, ColumnRef] => [
        { qualifier: j, column: jtCol },
        { qualifier: self, column: ftCol },
      ]),
      ...c.sourceColumns.map(([tCol, jtCol]): [ColumnRef, ColumnRef] => [
        { qualifier: j, column: jtCol },
        { qualifier: parent.qualifier, column: tCol },
      ]),
    ];
  } else {
    joins = c.columns.map(([tCol, ftCol]): [ColumnRef, ColumnRef] => [
      { qualifier: self, column: ftCol },
      { qualifier: parent.qualifier, column: tCol },
    ]);
  }
  const info: SourceInfo = {
    source: { kind: 'table', table: rel.foreignTable },
    qualifier: self,
    alias,
    name: table.name,
    columns: table.columns,
    origin: table.name,
    depth,
  };
  const node = planNode(scope, info, draft);
  node.embedding = {
    name: item.name,
    alias: item.alias,
    joinType: item.joinType,
    spread: item.spread,
    relationship: rel,
    aggAlias: `${rel.table.name}_${item.alias ?? item.name}_${depth}`,
    junction,
    joins,
  };
  return node;
}

function planNode(scope: Scope, info: SourceInfo, draft: Draft): ReadNode {
  const children = draft.children.map((child) => embedded(scope, info, child));
  return {
    source: info.source,
    qualifier: info.qualifier,
    alias: info.alias,
    name: info.name,
    columns: info.columns,
    select: draft.fields.map((f) => selectColumn(info, f)),
    where: [
      ...draft.filters.map((f) => condition(info, { kind: 'filter', filter: f }, children)),
      ...draft.logic.map((t) => condition(info, t, children)),
    ],
    order: draft.order.map((t) => orderTerm(info, t, children)),
    limit: draft.limit,
    offset: draft.offset,
    embedding: null,
    children,
  };
}

/** The read of a table or view of `schema`. */
export function planRead(snapshot: SchemaSnapshot, schema: string, name: string, params: QueryParams): ReadPlan {
  const draft = draftFromParams(params, { rootFilters: true, rootOrder: true });
  const table = lookupTable(snapshot, schema, name);
  const info: SourceInfo = {
    source: { kind: 'table', table: { schema, name } },
    qualifier: { schema, name },
    alias: null,
    name,
    columns: table.columns,
    origin: name,
    depth: 0,
  };
  return { kind: 'read', root: planNode({ snapshot, schema }, info, draft) };
}

function lookupTable(snapshot: SchemaSnapshot, schema: string, name: string): Table {
  const table = snapshot.table(schema, name);
  if (!table) throw restErrors.unknownTable(schema, name, tableNotFoundHint(schema, name, snapshot.tableNames(schema)));
  return table;
}

// ---------------------------------------------------------------------------------------------
// Writes

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The read of a write's own rows, named after the table so relationships are found from it. */
function rowsRead(snapshot: SchemaSnapshot, schema: string, table: Table, params: QueryParams): ReadNode {
  const draft = draftFromParams(params, { rootFilters: false, rootOrder: false });
  const info: SourceInfo = {
    source: { kind: 'rows' },
    qualifier: { schema: null, name: table.name },
    alias: table.name,
    name: table.name,
    columns: table.columns,
    origin: table.name,
    depth: 0,
  };
  return planNode({ snapshot, schema }, info, draft);
}

/**
 * PostgREST's inferColsEmbedNeeds: `*` when the select has one; else the selected columns, the
 * columns embedded resources join on, and the primary key.
 */
function returningFor(read: ReadNode, table: Table, representation: boolean): Returning {
  if (!representation) return { kind: 'none' };
  if (read.select.some((s) => s.star) || (read.select.length === 0 && read.children.length === 0)) return { kind: 'all' };
  const joinColumns = read.children.flatMap((child) => {
    const c = child.embedding!.relationship.cardinality;
    return c.kind === 'm2m' ? c.sourceColumns.map(([t]) => t) : c.columns.map(([t]) => t);
  });
  return { kind: 'columns', columns: [...new Set([...read.select.map((s) => s.column), ...joinColumns, ...table.primaryKey])] };
}

function rootConditions(schema: string, table: Table, params: QueryParams): Condition[] {
  const info: SourceInfo = {
    source: { kind: 'table', table: { schema, name: table.name } },
    qualifier: { schema, name: table.name },
    alias: null,
    name: table.name,
    columns: table.columns,
    origin: table.name,
    depth: 0,
  };
  return [
    ...params.filters.filter((f) => f.path.length === 0).map((f) => condition(info, { kind: 'filter', filter: f.filter }, [])),
    ...params.logic.filter((l) => l.path.length === 0).map((l) => condition(info, l.tree, [])),
  ];
}

// limit/offset on a mutation would narrow which rows change; ignoring them would change more rows
// than the client asked for, so refuse instead.
function refuseRootRange(params: QueryParams): void {
  if (params.rootRange) {
    throw parseError(`${params.rootRange.name} parameter`, params.rootRange.raw, 'limit and offset are not supported on update or delete');
  }
}

export interface WriteOptions {
  representation: boolean;
  applyDefaults: boolean;
  resolution: OnConflict['resolution'] | null;
}

/**
 * INSERT of one object or an array of objects. Only keys present in the body (or named by the
 * `columns` query parameter) are listed, so every other column takes its DEFAULT; within an array,
 * a listed key missing from one row becomes NULL (or its default with `Prefer: missing=default`).
 */
export function planInsert(
  snapshot: SchemaSnapshot,
  schema: string,
  name: string,
  params: QueryParams,
  rows: unknown,
  opts: WriteOptions,
): InsertPlan {
  const table = lookupTable(snapshot, schema, name);
  const list = Array.isArray(rows) ? rows : [rows];
  if (!list.every(isPlainObject)) throw restErrors.invalidBody('expected a JSON object or an array of objects');
  const columns = params.columns ?? [...new Set(list.flatMap((row) => Object.keys(row as object)))];
  for (const c of columns) if (!table.columns.has(c)) throw restErrors.unknownBodyColumn(table.name, c);
  let onConflict: OnConflict | null = null;
  if (opts.resolution !== null) {
    const target = params.onConflict ?? table.primaryKey;
    for (const c of target) if (!table.columns.has(c)) throw restErrors.unknownColumn(table.name, c);
    onConflict = { resolution: opts.resolution, target };
  }
  const read = rowsRead(snapshot, schema, table, params);
  return {
    kind: 'insert',
    table,
    columns,
    body: JSON.stringify(list),
    applyDefaults: opts.applyDefaults,
    onConflict,
    returning: returningFor(read, table, opts.representation),
    read,
  };
}

/** PATCH: sets the body's keys on the rows matching the filters. */
export function planUpdate(
  snapshot: SchemaSnapshot,
  schema: string,
  name: string,
  params: QueryParams,
  patch: unknown,
  opts: WriteOptions,
): UpdatePlan {
  const table = lookupTable(snapshot, schema, name);
  if (!isPlainObject(patch)) throw restErrors.invalidBody('expected a JSON object or an array of objects');
  const columns = params.columns ?? Object.keys(patch);
  for (const c of columns) if (!table.columns.has(c)) throw restErrors.unknownBodyColumn(table.name, c);
  const where = rootConditions(schema, table, params);
  refuseRootRange(params);
  // PostgREST issues no UPDATE for an empty patch (there is nothing to SET) and returns no rows.
  if (columns.length > 0 && where.length === 0) throw new RestError(400, '21000', 'UPDATE requires a WHERE clause');
  const read = rowsRead(snapshot, schema, table, params);
  return {
    kind: 'update',
    table,
    columns,
    body: JSON.stringify(patch),
    applyDefaults: opts.applyDefaults,
    where,
    returning: returningFor(read, table, opts.representation),
    read,
  };
}

/** DELETE of the rows matching the filters. */
export function planDelete(snapshot: SchemaSnapshot, schema: string, name: string, params: QueryParams, opts: WriteOptions): DeletePlan {
  const table = lookupTable(snapshot, schema, name);
  const where = rootConditions(schema, table, params);
  refuseRootRange(params);
  if (where.length === 0) throw new RestError(400, '21000', 'DELETE requires a WHERE clause');
  const read = rowsRead(snapshot, schema, table, params);
  return { kind: 'delete', table, where, returning: returningFor(read, table, opts.representation), read };
}

// ---------------------------------------------------------------------------------------------
// Function calls

const isJsonType = (type: string) => type === 'json' || type === 'jsonb';

/**
 * The overload a call means, as PostgREST's findProc picks it: the one whose parameters the
 * argument names fit (every required one given, the rest optional), else the one with a single
 * unnamed json/jsonb parameter for a POST.
 */
function findRoutine(
  snapshot: SchemaSnapshot,
  schema: string,
  name: string,
  argNames: Set<string>,
  singleObject: boolean,
  isPost: boolean,
): Routine {
  const overloads = snapshot.routines(schema, name);
  const fits = (r: Routine): boolean => {
    if (singleObject) return r.params.length === 1 && isJsonType(r.params[0]!.type);
    if (r.params.length === 0) return argNames.size === 0;
    const required = r.params.filter((p) => p.required).map((p) => p.name);
    const optional = new Set(r.params.filter((p) => !p.required).map((p) => p.name));
    const rest = [...argNames].filter((a) => !optional.has(a));
    return rest.length === required.length && required.every((p) => argNames.has(p));
  };
  const singleUnnamed = (r: Routine) => isPost && r.params.length === 1 && r.params[0]!.name === '' && isJsonType(r.params[0]!.type);
  const matched = overloads.filter(fits);
  const fallback = overloads.filter((r) => !fits(r) && singleUnnamed(r));
  const candidates = matched.length > 0 ? matched : fallback;
  if (candidates.length === 1) return candidates[0]!;
  if (candidates.length > 1) {
    const list = candidates.map((r) => `${r.schema}.${r.name}(${r.params.map((p) => `${p.name} => ${p.type}`).join(', ')})`).join(', ');
    throw restErrors.ambiguousFunction(`Could not choose the best candidate function between: ${list}`);
  }
  throw noFunction(snapshot, schema, name, [...argNames].sort(), singleObject, isPost, overloads);
}

/** PGRST202 in PostgREST's words, with its hint: a near function name, or a near parameter list of an overload. */
function noFunction(
  snapshot: SchemaSnapshot,
  schema: string,
  name: string,
  args: string[],
  singleObject: boolean,
  isPost: boolean,
  overloads: Routine[],
): RestError {
  const func = `${schema}.${name}`;
  const prms = args.join(', ');
  const fmtPrms = (p: string) => (args.length === 0 ? ' without parameters' : p);
  const message = `Could not find the function ${func}${singleObject ? '' : fmtPrms(`(${prms})`)} in the schema cache`;
  const withParams = fmtPrms(` with parameter${args.length > 1 ? 's ' : ' '}${prms}`);
  const searched = singleObject
    ? ' with a single json/jsonb parameter'
    : isPost
      ? `${withParams} or with a single unnamed json/jsonb parameter`
      : withParams;
  const details = `Searched for the function ${func}${searched}, but no matches were found in the schema cache.`;
  const listed = (names: string[]) => `(${[...names].sort().join(', ')})`;
  let hint: string | null = null;
  if (!singleObject) {
    const near =
      overloads.length === 0
        ? closestName(name, snapshot.routineNames(schema))
        : closestName(
            listed(args),
            overloads.map((r) => listed(r.params.map((p) => p.name))),
          );
    if (near !== null) hint = `Perhaps you meant to call the function ${schema}.${overloads.length === 0 ? near : `${name}${near}`}`;
  }
  return restErrors.noFunction(message, details, hint);
}

/** A GET's arguments as one JSON object; a variadic parameter named more than once takes them all. */
function argumentsObject(routine: Routine, args: Array<[string, string]>): Record<string, unknown> {
  const variadic = new Set(routine.params.filter((p) => p.variadic).map((p) => p.name));
  const object: Record<string, unknown> = {};
  for (const [name, value] of args) {
    if (variadic.has(name) && Object.hasOwn(object, name)) {
      const previous = object[name];
      object[name] = Array.isArray(previous) ? [...previous, value] : [previous, value];
    } else {
      Object.defineProperty(object, name, { value, enumerable: true, writable: true, configurable: true });
    }
  }
  return object;
}

export interface CallOptions {
  method: 'GET' | 'HEAD' | 'POST';
  singleObject: boolean;
  /** The POST body (undefined: none). */
  body: unknown;
}

/** A call of `schema.name` with the body's (POST) or the query's (GET) arguments. */
export function planCall(snapshot: SchemaSnapshot, schema: string, name: string, params: QueryParams, opts: CallOptions): CallPlan {
  const isPost = opts.method === 'POST';
  const body = isPost ? (opts.body ?? {}) : null;
  const argNames = new Set(
    params.columns ??
      (isPost
        ? Array.isArray(body)
          ? body.flatMap((row) => (isPlainObject(row) ? Object.keys(row) : []))
          : isPlainObject(body)
            ? Object.keys(body)
            : []
        : params.rpcArgs.map(([n]) => n)),
  );
  const routine = findRoutine(snapshot, schema, name, argNames, opts.singleObject, isPost);
  const values = isPost ? body : argumentsObject(routine, params.rpcArgs);
  const only = routine.params.length === 1 ? routine.params[0]! : null;
  let args: CallArguments;
  if (only !== null && (opts.singleObject || only.name === '')) {
    args = { kind: 'single', param: only, body: JSON.stringify(values) };
  } else if (routine.params.length === 0) {
    args = { kind: 'none' };
  } else {
    if (!isPlainObject(values) && !(Array.isArray(values) && values.every(isPlainObject))) {
      throw restErrors.invalidBody('expected a JSON object of the function arguments');
    }
    args = {
      kind: 'named',
      params: routine.params.filter((p) => argNames.has(p.name)),
      body: JSON.stringify(values),
      bodyIsArray: Array.isArray(values),
    };
  }

  const composite = routine.returns.composite;
  // A function returning a table's rows reads as that table, so its relationships can be embedded.
  const returnsTable = composite ? snapshot.table(routine.returns.schema, routine.returns.name) : undefined;
  const rootName = returnsTable?.name ?? routine.name;
  const columns: ReadonlyMap<string, { type: string }> =
    returnsTable?.columns ??
    new Map((composite ? routine.returns.columns : [SCALAR_COLUMN]).map((c) => [c, { type: composite ? '' : routine.returns.name }]));
  const draft = draftFromParams(params, { rootFilters: true, rootOrder: true });
  if (!composite)
    draft.fields = [{ kind: 'field', field: { name: SCALAR_COLUMN, jsonPath: [] }, alias: null, cast: null, aggregate: null }];
  const info: SourceInfo = {
    source: { kind: 'rows' },
    qualifier: { schema: null, name: rootName },
    alias: rootName,
    name: rootName,
    columns,
    origin: rootName,
    depth: 0,
  };
  const read = planNode({ snapshot, schema }, info, draft);
  const readOnly = !isPost || routine.volatility !== 'volatile';
  return { kind: 'call', routine, args, read, readOnly };
}
