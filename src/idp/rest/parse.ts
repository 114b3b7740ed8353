// Stage 1 of 3 of a REST request (parse → plan → SQL): the query string read as PostgREST reads it
// (ApiRequest/QueryParams.hs). Parsing knows names only; whether a table, column, relationship or
// function exists is for the planner (plan.ts) to decide against the schema cache.
//
// Every error here is 400 PGRST100 `"failed to parse <what> (<raw>)"`, with what was expected in
// details. Where PostgREST would silently ignore text after a valid prefix (a filter key such as
// `id;drop`, a list such as `in.(a(b),c)`), this parser refuses the whole parameter instead.

import { RestError } from './errors.js';

/** `->` (a JSON value) or `->>` (text), then a key, or an array index written as `+1` / `-1`. */
export interface JsonOperation {
  arrow: '->' | '->>';
  operand: string;
  index: boolean;
}

/** A column of some table of the request, possibly followed by a JSON path (`data->a->>b`). */
export interface Field {
  name: string;
  jsonPath: JsonOperation[];
}

export type AggregateFunction = 'count' | 'sum' | 'avg' | 'max' | 'min';

export type SelectItem =
  | {
      kind: 'field';
      /** `*` for every column. */
      field: Field;
      alias: string | null;
      cast: string | null;
      aggregate: AggregateFunction | null;
    }
  | {
      kind: 'relation';
      /** A table, a foreign key's name or one of its columns (the planner finds the relationship). */
      name: string;
      alias: string | null;
      hint: string | null;
      joinType: 'inner' | 'left' | null;
      /** `...name(cols)`: the related row's columns become the parent's own. */
      spread: boolean;
      children: SelectItem[];
    };

export type QuantOperator = 'eq' | 'gt' | 'gte' | 'lt' | 'lte' | 'like' | 'ilike' | 'match' | 'imatch';
export type SimpleOperator = 'neq' | 'cs' | 'cd' | 'ov' | 'sl' | 'sr' | 'nxr' | 'nxl' | 'adj';
export type FtsOperator = 'fts' | 'plfts' | 'phfts' | 'wfts';
export type IsValue = 'null' | 'true' | 'false' | 'unknown';

export type Operation =
  | { kind: 'quant'; op: QuantOperator; quantifier: 'any' | 'all' | null; value: string }
  | { kind: 'simple'; op: SimpleOperator; value: string }
  | { kind: 'in'; values: string[] }
  | { kind: 'is'; value: IsValue }
  | { kind: 'isdistinct'; value: string }
  | { kind: 'fts'; op: FtsOperator; language: string | null; value: string };

export interface OpExpr {
  negate: boolean;
  operation: Operation;
}

/** `field=[not.]op.value`. */
export interface Filter {
  field: Field;
  expr: OpExpr;
}

export type LogicTree = { kind: 'filter'; filter: Filter } | { kind: 'logic'; op: 'and' | 'or'; negate: boolean; children: LogicTree[] };

export type OrderTerm =
  | { kind: 'field'; field: Field; direction: 'asc' | 'desc' | null; nulls: 'first' | 'last' | null }
  | { kind: 'relation'; relation: string; field: Field; direction: 'asc' | 'desc' | null; nulls: 'first' | 'last' | null };

/** Where a parameter applies: [] for the requested table, else the embedded resources by name or alias. */
export type EmbedPath = string[];

export interface QueryParams {
  /** null: no `select` (every column). */
  select: SelectItem[] | null;
  filters: Array<{ path: EmbedPath; filter: Filter }>;
  logic: Array<{ path: EmbedPath; tree: LogicTree }>;
  order: Array<{ path: EmbedPath; terms: OrderTerm[] }>;
  ranges: Array<{ path: EmbedPath; limit: number | null; offset: number | null }>;
  /** `columns=a,b`: the columns an insert takes from its body. */
  columns: string[] | null;
  /** `on_conflict=a,b`: the conflict target of an upsert. */
  onConflict: string[] | null;
  /** A function's arguments in a GET/HEAD call: the parameters that carry no operator, in order. */
  rpcArgs: Array<[name: string, value: string]>;
  /** The first limit or offset given for the requested table itself, as written (updates and deletes refuse one). */
  rootRange: { name: 'limit' | 'offset'; raw: string } | null;
}

// Keys that are never filters, and the last dot-separated parts that mark a key as a modifier of
// the table or of an embedded resource (`order`, `tags.order`, `not.or`, `tags.not.and`).
const RESERVED = new Set(['select', 'columns', 'on_conflict']);
const RESERVED_EMBEDDABLE = new Set(['order', 'limit', 'offset', 'and', 'or']);

// Logic trees may nest this deep. PostgREST sets no limit; one keeps a URL of nested and( from
// exhausting the stack here and in the SQL it would become.
export const MAX_TREE_DEPTH = 32;

export function parseError(what: string, raw: string, details: string | null = null): RestError {
  // PostgREST quotes the parser message like this, followed by a position we do not reproduce.
  return new RestError(400, 'PGRST100', `"failed to parse ${what} (${raw})"`, details);
}

// ---------------------------------------------------------------------------------------------
// A cursor over one parameter's text

const IDENTIFIER_CHAR = /[\p{L}\p{N}_ $]/u;
// A JSON key may hold anything but the characters that end it.
const JSON_KEY_CHAR = /[^(\-:.,>)]/;

// What fail() throws inside attempt(), where the failure is only a reason to try another reading:
// no error object with a stack trace (that made up a tenth of the CPU of a simple read).
const BACKTRACK = new RestError(400, 'PGRST100', 'backtrack');

class Reader {
  pos = 0;
  private trying = 0;

  constructor(
    readonly text: string,
    private readonly failure: (details: string) => RestError,
  ) {}

  fail(details: string): RestError {
    return this.trying > 0 ? BACKTRACK : this.failure(details);
  }

  get atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  peek(offset = 0): string | undefined {
    return this.text[this.pos + offset];
  }

  startsWith(s: string): boolean {
    return this.text.startsWith(s, this.pos);
  }

  eat(s: string): boolean {
    if (!this.startsWith(s)) return false;
    this.pos += s.length;
    return true;
  }

  expect(s: string): void {
    if (!this.eat(s)) throw this.fail(`expected "${s}" at position ${this.pos + 1}`);
  }

  spaces(): void {
    while (this.peek() === ' ' || this.peek() === '\t') this.pos++;
  }

  /** Tries `read`; on failure puts the cursor back and returns null. */
  attempt<T>(read: () => T): T | null {
    const start = this.pos;
    this.trying += 1;
    try {
      return read();
    } catch (err) {
      if (!(err instanceof RestError)) throw err;
      this.pos = start;
      return null;
    } finally {
      this.trying -= 1;
    }
  }

  /** `"…"` with `\` escaping the next character; null (nothing consumed) when not at a quote. */
  quoted(): string | null {
    if (this.peek() !== '"') return null;
    let value = '';
    for (let i = this.pos + 1; i < this.text.length; i++) {
      const ch = this.text[i]!;
      if (ch === '\\' && i + 1 < this.text.length) {
        value += this.text[++i]!;
      } else if (ch === '"') {
        this.pos = i + 1;
        return value;
      } else {
        value += ch;
      }
    }
    throw this.fail('unterminated double quote');
  }

  /** Characters matching `allowed`, then stripped of surrounding spaces. */
  run(allowed: RegExp): string {
    const start = this.pos;
    while (!this.atEnd && allowed.test(this.text[this.pos]!)) this.pos++;
    return this.text.slice(start, this.pos).trim();
  }

  /** Words of `allowed` joined by `-` (a `-` before `>` begins a JSON arrow, not a word). */
  dashed(allowed: RegExp, what: string): string {
    const words: string[] = [];
    for (;;) {
      const word = this.run(allowed);
      if (word === '') throw this.fail(`expected ${what} at position ${this.pos + 1}`);
      words.push(word);
      if (this.peek() === '-' && this.peek(1) !== '>') {
        this.pos++;
        continue;
      }
      return words.join('-');
    }
  }

  /** A column, table or alias name: double-quoted, or letters, digits, `_`, `$` and spaces. */
  name(): string {
    const quoted = this.quoted();
    if (quoted !== null) {
      if (quoted === '') throw this.fail('a name may not be empty');
      // No name can hold one, and in SQL text it would end the statement (an alias is written as given).
      if (quoted.includes('\u0000')) throw this.fail('a name may not contain a NUL character');
      return quoted;
    }
    return this.dashed(IDENTIFIER_CHAR, 'a name');
  }

  jsonPath(): JsonOperation[] {
    const path: JsonOperation[] = [];
    for (;;) {
      const arrow = this.eat('->>') ? '->>' : this.eat('->') ? '->' : null;
      if (arrow === null) return path;
      const index = /^-?\d+/.exec(this.text.slice(this.pos));
      const after = index ? this.pos + index[0].length : -1;
      const ends = (at: number) => at >= this.text.length || ['->', '::', '.', ','].some((s) => this.text.startsWith(s, at));
      if (index && ends(after)) {
        this.pos = after;
        path.push({ arrow, operand: index[0].startsWith('-') ? index[0] : `+${index[0]}`, index: true });
        continue;
      }
      const quoted = this.quoted();
      path.push({ arrow, operand: quoted ?? this.dashed(JSON_KEY_CHAR, 'a JSON key'), index: false });
    }
  }

  field(): Field {
    this.spaces();
    const name = this.name();
    const jsonPath = this.jsonPath();
    this.spaces();
    return { name, jsonPath };
  }
}

// ---------------------------------------------------------------------------------------------
// select

const AGGREGATES: readonly AggregateFunction[] = ['count', 'sum', 'avg', 'max', 'min'];
// PostgREST also takes `$`; here a cast is words only, so that nothing in it can open a dollar-quoted
// string in the SQL it is written into.
const CAST_CHAR = /[\p{L}\p{N}_ ]/u;

/** `::type`: letters, digits, `_` and spaces (`::text`, `::double precision`). */
function readCast(r: Reader): string | null {
  if (!r.startsWith('::')) return null;
  r.pos += 2;
  const cast = r.run(CAST_CHAR);
  if (cast === '' || r.peek() === '$') throw r.fail('expected a type name (letters, digits, _ and spaces) after "::"');
  return cast;
}

function atItemEnd(r: Reader): boolean {
  return r.atEnd || r.peek() === ',' || r.peek() === ')';
}

function readEmbedParams(r: Reader): { hint: string | null; joinType: 'inner' | 'left' | null } {
  let hint: string | null = null;
  let joinType: 'inner' | 'left' | null = null;
  for (let i = 0; i < 2 && r.peek() === '!'; i++) {
    r.pos++;
    const joined = /^(inner|left)(?=[!(])/.exec(r.text.slice(r.pos));
    if (joined) {
      r.pos += joined[1]!.length;
      joinType ??= joined[1] as 'inner' | 'left';
    } else {
      hint ??= r.name();
    }
  }
  return { hint, joinType };
}

function readAlias(r: Reader): string | null {
  return r.attempt(() => {
    const alias = r.name();
    if (r.peek() !== ':' || r.peek(1) === ':') throw r.fail('not an alias');
    r.pos++;
    return alias;
  });
}

function readRelation(r: Reader, depth: number): SelectItem {
  const spread = r.eat('...');
  const alias = spread ? null : readAlias(r);
  const name = r.name();
  if (!spread && name === 'count') throw r.fail('count is a function, not a relation');
  const { hint, joinType } = readEmbedParams(r);
  if (r.peek() !== '(') throw r.fail('expected "("');
  r.pos++;
  const children = readForest(r, depth + 1);
  r.expect(')');
  return { kind: 'relation', name, alias, hint, joinType, spread, children };
}

function readFieldItem(r: Reader): SelectItem {
  if (r.peek() === '*') {
    r.pos++;
    r.spaces();
    if (!atItemEnd(r)) throw r.fail(`unexpected "${r.peek()}" after *`);
    return { kind: 'field', field: { name: '*', jsonPath: [] }, alias: null, cast: null, aggregate: null };
  }
  const alias = readAlias(r);
  if (r.eat('count()')) {
    const cast = readCast(r);
    r.spaces();
    if (!atItemEnd(r)) throw r.fail(`unexpected "${r.peek()}"`);
    return { kind: 'field', field: { name: '*', jsonPath: [] }, alias, cast, aggregate: 'count' };
  }
  const field = r.field();
  const cast = readCast(r);
  let aggregate: AggregateFunction | null = null;
  const named = /^\.(count|sum|avg|max|min)\(\)/.exec(r.text.slice(r.pos));
  if (named) {
    r.pos += named[0].length;
    aggregate = AGGREGATES.find((a) => a === named[1]) ?? null;
  }
  const aggregateCast = aggregate === null ? null : readCast(r);
  r.spaces();
  if (!atItemEnd(r)) throw r.fail(`unexpected "${r.peek()}" at position ${r.pos + 1}`);
  return { kind: 'field', field, alias, cast: aggregateCast ?? cast, aggregate };
}

function readItem(r: Reader, depth: number): SelectItem {
  r.spaces();
  const relation = r.attempt(() => readRelation(r, depth));
  const item = relation ?? readFieldItem(r);
  r.spaces();
  return item;
}

function readForest(r: Reader, depth: number): SelectItem[] {
  if (depth > MAX_TREE_DEPTH) throw r.fail(`embedded resources may nest at most ${MAX_TREE_DEPTH} levels`);
  r.spaces();
  if (r.atEnd || r.peek() === ')') return [];
  const items = [readItem(r, depth)];
  while (r.eat(',')) items.push(readItem(r, depth));
  return items;
}

/** `select`: columns (with aliases, casts and JSON paths), embedded resources and spreads. */
export function parseSelect(raw: string): SelectItem[] {
  const r = new Reader(raw, (details) => parseError('select parameter', raw, details));
  const items = readForest(r, 1);
  if (!r.atEnd) throw r.fail(`unexpected "${r.peek()}" at position ${r.pos + 1}`);
  return items;
}

// ---------------------------------------------------------------------------------------------
// order

function readDirection(r: Reader): { direction: 'asc' | 'desc' | null; nulls: 'first' | 'last' | null } {
  let direction: 'asc' | 'desc' | null = null;
  let nulls: 'first' | 'last' | null = null;
  const rest = r.text.slice(r.pos);
  const dir = /^\.(asc|desc)(?=$|[.,])/.exec(rest);
  if (dir) {
    direction = dir[1] as 'asc' | 'desc';
    r.pos += dir[0].length;
  }
  const nullsOrder = /^\.nulls(first|last)(?=$|,)/.exec(r.text.slice(r.pos));
  if (nullsOrder) {
    nulls = nullsOrder[1] as 'first' | 'last';
    r.pos += nullsOrder[0].length;
  }
  r.spaces();
  if (!r.atEnd && r.peek() !== ',') throw r.fail('expected asc, desc, nullsfirst or nullslast');
  return { direction, nulls };
}

function readOrderTerm(r: Reader): OrderTerm {
  r.spaces();
  const related = r.attempt(() => {
    const relation = r.name();
    if (!r.eat('(')) throw r.fail('not a relation');
    const field = r.field();
    r.expect(')');
    return { relation, field };
  });
  if (related) return { kind: 'relation', ...related, ...readDirection(r) };
  const field = r.field();
  return { kind: 'field', field, ...readDirection(r) };
}

/** `order`: `col`, `col.asc`, `col.desc`, each optionally `.nullsfirst`/`.nullslast`; `rel(col)` for a related column. */
export function parseOrder(raw: string): OrderTerm[] {
  const r = new Reader(raw, (details) => parseError('order', raw, details));
  const terms = [readOrderTerm(r)];
  while (r.eat(',')) terms.push(readOrderTerm(r));
  if (!r.atEnd) throw r.fail(`unexpected "${r.peek()}"`);
  return terms;
}

// ---------------------------------------------------------------------------------------------
// filters

const QUANT: ReadonlySet<string> = new Set(['eq', 'gt', 'gte', 'lt', 'lte', 'like', 'ilike', 'match', 'imatch']);
const SIMPLE: ReadonlySet<string> = new Set(['neq', 'cs', 'cd', 'ov', 'sl', 'sr', 'nxr', 'nxl', 'adj']);
const FTS: ReadonlySet<string> = new Set(['fts', 'plfts', 'phfts', 'wfts']);
const IS_VALUES: ReadonlySet<string> = new Set(['null', 'true', 'false', 'unknown']);
const OPERATORS =
  'eq, neq, gt, gte, lt, lte, like, ilike, match, imatch, in, is, isdistinct, cs, cd, ov, sl, sr, nxr, nxl, adj, fts, plfts, phfts, wfts';
const LANGUAGE = /^[\p{L}\p{N}_ $]+$/u;

/** The operator token, with its `(any)`/`(all)` or `(language)`, and what it takes. */
type OperatorToken = { op: string; modifier: string | null };

/** `[not.]op[(modifier)].` at the start of `text`: the operator and where its value begins. */
function readOperator(text: string, fail: (details: string) => RestError): { negate: boolean; token: OperatorToken; valueStart: number } {
  const match = /^(not\.)?([a-z]+)(?:\(([^()]*)\))?\./.exec(text);
  if (!match) throw fail(`expected [not.]operator.value, operators: ${OPERATORS}`);
  return { negate: match[1] !== undefined, token: { op: match[2]!, modifier: match[3] ?? null }, valueStart: match[0].length };
}

/** The operation of `token` on `value` (for `in`, `list` reads the list). */
function operation(token: OperatorToken, value: string, list: () => string[], fail: (details: string) => RestError): Operation {
  const { op, modifier } = token;
  if (QUANT.has(op)) {
    if (modifier !== null && modifier !== 'any' && modifier !== 'all') throw fail(`${op} takes (any) or (all), not (${modifier})`);
    return { kind: 'quant', op: op as QuantOperator, quantifier: modifier as 'any' | 'all' | null, value };
  }
  if (FTS.has(op)) {
    const language = modifier?.trim() ?? null;
    if (language !== null && !LANGUAGE.test(language)) throw fail('a text search configuration is a plain name');
    return { kind: 'fts', op: op as FtsOperator, language, value };
  }
  if (modifier !== null) throw fail(`${op} takes no (…)`);
  if (SIMPLE.has(op)) return { kind: 'simple', op: op as SimpleOperator, value };
  if (op === 'in') return { kind: 'in', values: list() };
  if (op === 'is') {
    const is = value.toLowerCase();
    if (!IS_VALUES.has(is)) throw fail('is accepts null, true, false or unknown');
    return { kind: 'is', value: is as IsValue };
  }
  if (op === 'isdistinct') return { kind: 'isdistinct', value };
  throw fail(`unknown operator ${op}; operators: ${OPERATORS}`);
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
      // a quoted element must be the whole element; an empty "" is a legitimate empty string
      const r = new Reader(part, () => new RestError(400, 'PGRST100', 'list'));
      const value = r.attempt(() => r.quoted());
      if (value === null || !r.atEnd) return null;
      values.push(value);
    } else if (part.includes('(') || part.includes(')') || part.includes('"')) {
      return null;
    } else {
      values.push(part);
    }
  }
  return values;
}

/** Splits on commas outside double quotes (a backslash escapes inside quotes); null on an open quote. */
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

/** A filter's value part (`eq.5`, `not.in.(1,2)`, `fts(english).cat`); in a query parameter the value is the whole rest. */
export function parseOpExpr(raw: string): OpExpr {
  const fail = (details: string) => parseError('filter', raw, details);
  const { negate, token, valueStart } = readOperator(raw, fail);
  const value = raw.slice(valueStart);
  const list = () => {
    const values = parseList(value);
    if (values === null) throw fail('expected a list like (a,b,"c,d")');
    return values;
  };
  return { negate, operation: operation(token, value, list, fail) };
}

/** A filter key: `col`, `col->a->>b`, `embed.col`, `a.b.col` (the leading names are the embed path). */
function parseTreePath(key: string): { path: EmbedPath; field: Field } {
  const r = new Reader(key, (details) => parseError('tree path', key, details));
  const names = [r.name()];
  while (r.peek() === '.') {
    r.pos++;
    names.push(r.name());
  }
  const jsonPath = r.jsonPath();
  if (!r.atEnd) throw r.fail(`unexpected "${r.peek()}" at position ${r.pos + 1}`);
  return { path: names.slice(0, -1), field: { name: names.at(-1)!, jsonPath } };
}

/** A key's dot-separated path, when it is a plain path of names (for order, limit, offset, and, or). */
function parseKeyPath(key: string): string[] {
  const r = new Reader(key, (details) => parseError('tree path', key, details));
  const names = [r.name()];
  while (r.eat('.')) names.push(r.name());
  if (!r.atEnd) throw r.fail(`unexpected "${r.peek()}"`);
  return names;
}

// ---------------------------------------------------------------------------------------------
// Logic trees: `or=(a.eq.1,b.eq.2)`, `and=(…)`, `not.or=(…)`, nested `and(…)` / `or(…)` / `not.and(…)`

/**
 * A recursive-descent reader of PostgREST's logic-tree grammar. Inside a tree a value runs to the
 * next `,` or `)` unless it is double-quoted (`"a,b"`, backslash escaping the next character) or a
 * `{…}` array literal; `in` takes a parenthesised list.
 */
class LogicTreeReader {
  private readonly r: Reader;

  constructor(
    text: string,
    private readonly raw: string,
  ) {
    this.r = new Reader(text, (details) => parseError('logic tree', raw, details));
  }

  end(): void {
    this.r.spaces();
    if (!this.r.atEnd) throw this.r.fail(`unexpected "${this.r.peek()}" after the tree`);
  }

  /** `and(…)` / `or(…)` at the current position; `negate` when a `not.` came before it. */
  tree(negate: boolean, depth = 1): LogicTree {
    const r = this.r;
    if (depth > MAX_TREE_DEPTH) throw r.fail(`logic trees may nest at most ${MAX_TREE_DEPTH} levels`);
    const op = r.eat('and') ? 'and' : r.eat('or') ? 'or' : null;
    if (op === null) throw r.fail('expected logic operator (and, or)');
    r.spaces();
    r.expect('(');
    const children: LogicTree[] = [this.item(depth)];
    r.spaces();
    while (r.eat(',')) {
      children.push(this.item(depth));
      r.spaces();
    }
    r.expect(')');
    r.spaces();
    return { kind: 'logic', op, negate, children };
  }

  private item(depth: number): LogicTree {
    const r = this.r;
    r.spaces();
    const nested = /^(not\.)?(and|or)\s*\(/.exec(r.text.slice(r.pos));
    if (nested) {
      r.pos += nested[1]?.length ?? 0;
      return this.tree(nested[1] !== undefined, depth + 1);
    }
    const field = r.attempt(() => r.field());
    if (field === null) throw r.fail('expected a column name, not. or a logic operator (and, or)');
    if (!r.eat('.')) throw r.fail(`expected "." after ${field.name}`);
    // Any flaw inside the tree is reported as a flaw of the tree, as PostgREST does.
    const fail = (details: string) => parseError('logic tree', this.raw, details);
    const { negate, token, valueStart } = readOperator(r.text.slice(r.pos), fail);
    r.pos += valueStart;
    const list = token.op === 'in' ? this.list() : null;
    const value = list === null ? this.value() : '';
    return { kind: 'filter', filter: { field, expr: { negate, operation: operation(token, value, () => list ?? [], fail) } } };
  }

  /** A single value: quoted, an array literal, or everything up to the next `,` or `)`. */
  private value(): string {
    const quoted = this.quotedValue();
    if (quoted !== null) return quoted;
    const r = this.r;
    if (r.peek() === '{') {
      const close = r.text.indexOf('}', r.pos);
      if (close > 0 && !r.text.slice(r.pos + 1, close).includes('{')) {
        const literal = r.text.slice(r.pos, close + 1);
        r.pos = close + 1;
        return literal;
      }
    }
    return this.plain();
  }

  private plain(): string {
    const r = this.r;
    const start = r.pos;
    while (!r.atEnd && r.peek() !== ',' && r.peek() !== ')') r.pos++;
    return r.text.slice(start, r.pos);
  }

  /** `"…"` followed by `,` or `)`; otherwise null and nothing consumed (the quote is then plain text). */
  private quotedValue(): string | null {
    const r = this.r;
    const start = r.pos;
    const value = r.attempt(() => r.quoted());
    if (value === null) return null;
    if (r.peek() !== ',' && r.peek() !== ')') {
      r.pos = start;
      return null;
    }
    return value;
  }

  /** `(a,"b,c")` for `in`. */
  private list(): string[] {
    const r = this.r;
    if (!r.eat('(')) throw r.fail('expected a list like (a,b,"c,d") after in.');
    const values: string[] = [];
    for (;;) {
      r.spaces();
      values.push(this.quotedValue() ?? this.plain().trim());
      if (r.eat(',')) continue;
      if (r.eat(')')) return values;
      throw r.fail('unterminated list');
    }
  }
}

/** A logic key (`or`, `not.and`, `tags.or`) and its value, read as PostgREST reads them: the operator and the value as one tree. */
function parseLogic(key: string, raw: string): { path: EmbedPath; tree: LogicTree } {
  const names = parseKeyPath(key);
  const op = names.at(-1)!;
  const negate = names.slice(0, -1).includes('not');
  const path = names.slice(0, -1).filter((n) => n !== 'not');
  const reader = new LogicTreeReader(`${op}${raw}`, raw);
  const tree = reader.tree(negate);
  reader.end();
  return { path, tree };
}

// ---------------------------------------------------------------------------------------------
// The whole query string

function parseCount(name: string, raw: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n)) throw parseError(`${name} parameter`, raw, 'expected a non-negative integer');
  return n;
}

/** `columns=a,b` / `on_conflict=a,b`: a comma list of names. */
export function parseColumnList(what: string, raw: string): string[] {
  const r = new Reader(raw, (details) => parseError(what, raw, details));
  const names: string[] = [];
  do {
    r.spaces();
    names.push(r.name());
    r.spaces();
  } while (r.eat(','));
  if (!r.atEnd) throw r.fail('expected a comma list of column names');
  return [...new Set(names)];
}

/**
 * Every parameter of a request. `rpcRead`: a GET/HEAD of a function, where a parameter whose value
 * carries no operator is one of the function's arguments rather than a filter.
 */
export function parseQueryParams(params: URLSearchParams, opts: { rpcRead?: boolean } = {}): QueryParams {
  const result: QueryParams = {
    select: null,
    filters: [],
    logic: [],
    order: [],
    ranges: [],
    columns: null,
    onConflict: null,
    rpcArgs: [],
    rootRange: null,
  };
  const ranges = new Map<string, { path: EmbedPath; limit: number | null; offset: number | null }>();
  const seen = new Set<string>();
  for (const [key, raw] of params) {
    if (RESERVED.has(key)) {
      // The first of each wins, as PostgREST's lookup does.
      if (seen.has(key)) continue;
      seen.add(key);
      if (key === 'select') result.select = parseSelect(raw);
      else if (key === 'columns') result.columns = parseColumnList('columns parameter', raw);
      else result.onConflict = parseColumnList('on_conflict parameter', raw);
      continue;
    }
    const last = key.slice(key.lastIndexOf('.') + 1);
    if (RESERVED_EMBEDDABLE.has(last)) {
      if (last === 'and' || last === 'or') {
        result.logic.push(parseLogic(key, raw));
      } else if (last === 'order') {
        result.order.push({ path: parseKeyPath(key).slice(0, -1), terms: parseOrder(raw) });
      } else {
        const path = parseKeyPath(key).slice(0, -1);
        const id = JSON.stringify(path);
        const range = ranges.get(id) ?? { path, limit: null, offset: null };
        range[last as 'limit' | 'offset'] = parseCount(last, raw);
        ranges.set(id, range);
        if (path.length === 0) result.rootRange ??= { name: last as 'limit' | 'offset', raw };
      }
      continue;
    }
    const { path, field } = parseTreePath(key);
    if (opts.rpcRead && path.length === 0 && field.jsonPath.length === 0) {
      const expr = (() => {
        try {
          return parseOpExpr(raw);
        } catch (err) {
          if (err instanceof RestError) return null;
          throw err;
        }
      })();
      if (expr === null) result.rpcArgs.push([field.name, raw]);
      else result.filters.push({ path, filter: { field, expr } });
      continue;
    }
    result.filters.push({ path, filter: { field, expr: parseOpExpr(raw) } });
  }
  result.ranges = [...ranges.values()];
  return result;
}
