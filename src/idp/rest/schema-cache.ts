import pg from 'pg';
import { type Pool, withTransaction } from '../../kit/db.js';

// What the exposed schemas hold, read from the catalog as PostgREST's SchemaCache.hs reads it:
// tables and views with their columns and primary keys, the relationships their foreign keys make
// (many-to-one, one-to-one, their one-to-many inverses, many-to-many through a junction table whose
// primary key holds both foreign keys), and the functions a request may call.
//
// The whole snapshot is replaced at once: at start, on `NOTIFY pgrst, 'reload schema'` (a LISTEN
// connection, as PostgREST listens), and when the planner misses a table, column, relationship or
// function (it may have been created since). Misses reload at most once per MISS_RELOAD_INTERVAL_MS,
// every request that missed waiting for one load that began after its miss, so a stream of
// requests for names that do not exist costs at most a few catalog reads a second.

export interface QualifiedName {
  schema: string;
  name: string;
}

export interface Column {
  name: string;
  /** format_type without modifiers, e.g. `character varying`, `jsonb`, `integer[]`. */
  type: string;
  /** The column default as SQL (the catalog's own text), for `Prefer: missing=default`; null without one. */
  default: string | null;
}

export interface Table {
  schema: string;
  name: string;
  isView: boolean;
  /** In table order. */
  columns: Map<string, Column>;
  /** The primary key's columns (empty without one): the default conflict target of an upsert. */
  primaryKey: string[];
}

/** [column of the relationship's table, column of its foreign table]. */
export type ColumnPair = [string, string];

export type Cardinality =
  | { kind: 'm2o' | 'o2m'; constraint: string; columns: ColumnPair[] }
  | { kind: 'o2o'; constraint: string; columns: ColumnPair[]; isParent: boolean }
  | {
      kind: 'm2m';
      junction: QualifiedName;
      constraint1: string;
      constraint2: string;
      /** [table column, junction column] */
      sourceColumns: ColumnPair[];
      /** [foreign table column, junction column] */
      targetColumns: ColumnPair[];
    };

export interface Relationship {
  table: QualifiedName;
  foreignTable: QualifiedName;
  isSelf: boolean;
  cardinality: Cardinality;
  foreignTableIsView: boolean;
}

export const isToOne = (rel: Relationship): boolean => rel.cardinality.kind === 'm2o' || rel.cardinality.kind === 'o2o';

export interface RoutineParam {
  /** '' for an unnamed parameter. */
  name: string;
  /** As SQL writes it (regtype's text, quoted where needed). */
  type: string;
  /** The type an argument is read as from JSON (`character` and `bit` without their length of 1). */
  recordType: string;
  required: boolean;
  variadic: boolean;
}

export interface Routine {
  schema: string;
  name: string;
  params: RoutineParam[];
  returns: {
    schema: string;
    name: string;
    setOf: boolean;
    /** A row type (a table's, a composite type, or OUT / TABLE parameters) rather than a scalar. */
    composite: boolean;
    /** The row's columns when composite (in order), to check select and filters against. */
    columns: string[];
  };
  volatility: 'immutable' | 'stable' | 'volatile';
}

export const returnsVoid = (r: Routine): boolean =>
  !r.returns.setOf && !r.returns.composite && r.returns.schema === 'pg_catalog' && r.returns.name === 'void';

export interface SchemaSnapshot {
  /** Grows by one per load, so a request can tell whether a reload happened since it planned. */
  version: number;
  schemas: readonly string[];
  table(schema: string, name: string): Table | undefined;
  tableNames(schema: string): string[];
  /** The relationships from `schema.name` to tables of the same schema, sorted as PostgREST sorts them. */
  relationships(schema: string, name: string): Relationship[];
  /** The names of the tables that have relationships in `schema`. */
  relationshipOrigins(schema: string): string[];
  routines(schema: string, name: string): Routine[];
  routineNames(schema: string): string[];
}

const key = (schema: string, name: string) => `${schema}\u0000${name}`;

export const MISS_RELOAD_INTERVAL_MS = 200;
/** The channel PostgREST listens on (`db-channel`). */
export const NOTIFY_CHANNEL = 'pgrst';

interface TableRow {
  schema: string;
  name: string;
  is_view: boolean;
  primary_key: string[];
  columns: Array<{ name: string; type: string; default: string | null }>;
}

interface ForeignKeyRow {
  schema: string;
  table: string;
  foreign_schema: string;
  foreign_table: string;
  constraint: string;
  columns: ColumnPair[];
  one_to_one: boolean;
}

interface RoutineRow {
  schema: string;
  name: string;
  params: RoutineParam[];
  return_schema: string;
  return_name: string;
  returns_set: boolean;
  returns_composite: boolean;
  return_columns: string[];
  volatility: 'i' | 's' | 'v';
}

// pg_catalog rather than information_schema: the latter hides what the connected role has no
// privilege on. Partitions are left out, as PostgREST leaves them out.
const TABLES_SQL = `
SELECT n.nspname AS schema, c.relname AS name, c.relkind IN ('v', 'm') AS is_view,
  coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord)
            FROM pg_catalog.pg_index i
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
            WHERE i.indrelid = c.oid AND i.indisprimary), '{}') AS primary_key,
  coalesce((SELECT json_agg(json_build_object(
              'name', a.attname,
              'type', format_type(a.atttypid, NULL),
              'default', CASE
                WHEN a.attgenerated = 's' OR a.attidentity = 'a' THEN NULL
                WHEN a.attidentity = 'd' THEN format('nextval(%L::regclass)', pg_get_serial_sequence(c.oid::regclass::text, a.attname))
                WHEN t.typbasetype <> 0 AND ad.adbin IS NULL THEN pg_get_expr(t.typdefaultbin, 0)
                ELSE pg_get_expr(ad.adbin, ad.adrelid) END) ORDER BY a.attnum)
            FROM pg_catalog.pg_attribute a
            JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
            LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
            WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '[]') AS columns
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY ($1) AND c.relkind IN ('r', 'v', 'm', 'f', 'p') AND NOT c.relispartition`;

// Foreign keys between tables of the exposed schemas (PostgREST's allM2OandO2ORels): one-to-one when
// the foreign key's columns are exactly a primary key or unique constraint of its table.
const FOREIGN_KEYS_SQL = `
SELECT ns1.nspname AS schema, tab.relname AS table, ns2.nspname AS foreign_schema, other.relname AS foreign_table,
  con.conname AS constraint,
  (SELECT json_agg(json_build_array(cols.attname, refs.attname) ORDER BY k.ord)
   FROM unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(col, ref, ord)
   JOIN pg_catalog.pg_attribute cols ON cols.attrelid = con.conrelid AND cols.attnum = k.col
   JOIN pg_catalog.pg_attribute refs ON refs.attrelid = con.confrelid AND refs.attnum = k.ref) AS columns,
  EXISTS (SELECT 1 FROM pg_catalog.pg_constraint u
          WHERE u.conrelid = con.conrelid AND u.contype IN ('p', 'u')
            AND u.conkey @> con.conkey AND u.conkey <@ con.conkey) AS one_to_one
FROM pg_catalog.pg_constraint con
JOIN pg_catalog.pg_class tab ON tab.oid = con.conrelid
JOIN pg_catalog.pg_namespace ns1 ON ns1.oid = tab.relnamespace
JOIN pg_catalog.pg_class other ON other.oid = con.confrelid
JOIN pg_catalog.pg_namespace ns2 ON ns2.oid = other.relnamespace
WHERE con.contype = 'f' AND con.conparentid = 0 AND ns1.nspname = ANY ($1) AND ns2.nspname = ANY ($1)
ORDER BY con.conrelid, con.conname`;

// Functions of the exposed schemas (PostgREST's funcsSqlQuery): only those a request can call,
// i.e. every input parameter named, or a single unnamed json/jsonb one. Types are written as
// regtype's text, which quotes what needs quoting, so they can be used in SQL as they are.
const ROUTINES_SQL = `
WITH RECURSIVE base_types AS (
  SELECT oid, typbasetype, coalesce(nullif(typbasetype, 0), oid) AS base FROM pg_catalog.pg_type
  UNION
  SELECT t.oid, b.typbasetype, coalesce(nullif(b.typbasetype, 0), b.oid)
  FROM base_types t JOIN pg_catalog.pg_type b ON t.typbasetype = b.oid
),
resolved AS (SELECT oid, base FROM base_types WHERE typbasetype = 0),
arguments AS (
  SELECT p.oid,
    json_agg(json_build_object(
      'name', coalesce(a.name, ''),
      'type', a.type::regtype::text,
      -- What json_to_record reads the argument as: character and bit without their length of 1.
      'recordType', CASE a.type
        WHEN 'bit'::regtype THEN 'bit varying'
        WHEN 'bit[]'::regtype THEN 'bit varying[]'
        WHEN 'character'::regtype THEN 'character varying'
        WHEN 'character[]'::regtype THEN 'character varying[]'
        ELSE a.type::regtype::text END,
      'required', a.idx <= (p.pronargs - p.pronargdefaults),
      'variadic', coalesce(a.mode = 'v', false)) ORDER BY a.idx) AS params,
    CASE count(*) - count(a.name)
      WHEN 0 THEN true
      WHEN 1 THEN (array_agg(a.type))[1] IN ('json'::regtype, 'jsonb'::regtype)
      ELSE false END AS callable
  FROM pg_catalog.pg_proc p,
       unnest(p.proargnames, p.proargtypes, p.proargmodes) WITH ORDINALITY AS a(name, type, mode, idx)
  WHERE a.type IS NOT NULL
  GROUP BY p.oid
)
SELECT pn.nspname AS schema, p.proname AS name, coalesce(args.params, '[]') AS params,
  tn.nspname AS return_schema, coalesce(comp.relname, t.typname) AS return_name,
  p.proretset AS returns_set,
  (t.typtype = 'c' OR coalesce(p.proargmodes::text[] && '{t,b,o}', false)) AS returns_composite,
  CASE
    WHEN coalesce(p.proargmodes::text[] && '{t,b,o}', false) THEN
      (SELECT coalesce(array_agg(o.name ORDER BY o.idx), '{}')
       FROM unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS o(name, type, mode, idx)
       WHERE o.mode IN ('t', 'b', 'o'))
    WHEN t.typtype = 'c' THEN
      (SELECT coalesce(array_agg(at.attname::text ORDER BY at.attnum), '{}')
       FROM pg_catalog.pg_attribute at WHERE at.attrelid = t.typrelid AND at.attnum > 0 AND NOT at.attisdropped)
    ELSE '{}' END AS return_columns,
  p.provolatile AS volatility
FROM pg_catalog.pg_proc p
LEFT JOIN arguments args ON args.oid = p.oid
JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
JOIN resolved bt ON bt.oid = p.prorettype
JOIN pg_catalog.pg_type t ON t.oid = bt.base
JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_class comp ON comp.oid = t.typrelid
WHERE pn.nspname = ANY ($1) AND p.prokind = 'f' AND t.oid <> 'trigger'::regtype AND coalesce(args.callable, true)`;

const VOLATILITY = { i: 'immutable', s: 'stable', v: 'volatile' } as const;

// PostgREST's order of relationships (its Ord instance): by table, foreign table, then kind.
const CARDINALITY_ORDER = { o2m: 0, m2o: 1, o2o: 2, m2m: 3 } as const;
function compareRelationships(a: Relationship, b: Relationship): number {
  const text = (r: Relationship) =>
    [r.table.schema, r.table.name, r.foreignTable.schema, r.foreignTable.name, r.isSelf ? '1' : '0'].join('\u0000');
  const byTables = text(a).localeCompare(text(b));
  if (byTables !== 0) return byTables;
  const byKind = CARDINALITY_ORDER[a.cardinality.kind] - CARDINALITY_ORDER[b.cardinality.kind];
  if (byKind !== 0) return byKind;
  const constraint = (r: Relationship) => (r.cardinality.kind === 'm2m' ? r.cardinality.junction.name : r.cardinality.constraint);
  return constraint(a).localeCompare(constraint(b));
}

/** All relationships of the foreign keys: each one both ways, plus many-to-many through junction tables. */
export function relationshipsOf(foreignKeys: ForeignKeyRow[], tables: Map<string, Table>): Relationship[] {
  const isView = (schema: string, name: string) => tables.get(key(schema, name))?.isView ?? false;
  const forward: Relationship[] = foreignKeys.map((fk) => {
    const table = { schema: fk.schema, name: fk.table };
    const foreignTable = { schema: fk.foreign_schema, name: fk.foreign_table };
    const isSelf = fk.schema === fk.foreign_schema && fk.table === fk.foreign_table;
    return {
      table,
      foreignTable,
      isSelf,
      cardinality: fk.one_to_one
        ? { kind: 'o2o', constraint: fk.constraint, columns: fk.columns, isParent: false }
        : { kind: 'm2o', constraint: fk.constraint, columns: fk.columns },
      foreignTableIsView: isView(foreignTable.schema, foreignTable.name),
    };
  });
  const swap = (cols: ColumnPair[]): ColumnPair[] => cols.map(([a, b]) => [b, a]);
  const inverse: Relationship[] = forward.map((r) => {
    const c = r.cardinality as { kind: 'm2o' | 'o2o'; constraint: string; columns: ColumnPair[] };
    return {
      table: r.foreignTable,
      foreignTable: r.table,
      isSelf: r.isSelf,
      cardinality:
        c.kind === 'o2o'
          ? { kind: 'o2o', constraint: c.constraint, columns: swap(c.columns), isParent: true }
          : { kind: 'o2m', constraint: c.constraint, columns: swap(c.columns) },
      foreignTableIsView: isView(r.table.schema, r.table.name),
    };
  });
  // A junction: a table with foreign keys to two tables, all of whose columns are in its primary key.
  const manyToMany: Relationship[] = [];
  for (const a of forward) {
    if (a.cardinality.kind !== 'm2o') continue;
    for (const b of forward) {
      if (b.cardinality.kind !== 'm2o' || a === b) continue;
      if (a.table.schema !== b.table.schema || a.table.name !== b.table.name) continue;
      if (a.cardinality.constraint === b.cardinality.constraint) continue;
      const junction = tables.get(key(a.table.schema, a.table.name));
      const pk = new Set(junction?.primaryKey ?? []);
      const used = [...a.cardinality.columns, ...b.cardinality.columns].map(([col]) => col);
      if (!used.every((col) => pk.has(col))) continue;
      const t = a.foreignTable;
      const ft = b.foreignTable;
      manyToMany.push({
        table: t,
        foreignTable: ft,
        isSelf: t.schema === ft.schema && t.name === ft.name,
        cardinality: {
          kind: 'm2m',
          junction: a.table,
          constraint1: a.cardinality.constraint,
          constraint2: b.cardinality.constraint,
          sourceColumns: swap(a.cardinality.columns),
          targetColumns: swap(b.cardinality.columns),
        },
        foreignTableIsView: isView(ft.schema, ft.name),
      });
    }
  }
  return [...forward, ...inverse, ...manyToMany].sort(compareRelationships);
}

class Snapshot implements SchemaSnapshot {
  private readonly relationshipsByOrigin = new Map<string, Relationship[]>();
  private readonly routinesByName = new Map<string, Routine[]>();

  constructor(
    readonly version: number,
    readonly schemas: readonly string[],
    private readonly tables: Map<string, Table>,
    relationships: Relationship[],
    routines: Routine[],
  ) {
    for (const r of relationships) {
      // Embedding stays within one schema, as PostgREST's relationship map is keyed.
      if (r.foreignTable.schema !== r.table.schema) continue;
      const k = key(r.table.schema, r.table.name);
      const list = this.relationshipsByOrigin.get(k) ?? [];
      list.push(r);
      this.relationshipsByOrigin.set(k, list);
    }
    for (const r of routines) {
      const k = key(r.schema, r.name);
      const list = this.routinesByName.get(k) ?? [];
      list.push(r);
      this.routinesByName.set(k, list);
    }
    // Overloads with fewer parameters first, as PostgREST orders them.
    for (const list of this.routinesByName.values()) list.sort((a, b) => a.params.length - b.params.length);
  }

  table(schema: string, name: string): Table | undefined {
    return this.tables.get(key(schema, name));
  }

  tableNames(schema: string): string[] {
    return [...this.tables.values()].filter((t) => t.schema === schema).map((t) => t.name);
  }

  relationships(schema: string, name: string): Relationship[] {
    return this.relationshipsByOrigin.get(key(schema, name)) ?? [];
  }

  relationshipOrigins(schema: string): string[] {
    return [...new Set([...this.relationshipsByOrigin.values()].flat().map((r) => r.table))]
      .filter((t) => t.schema === schema)
      .map((t) => t.name);
  }

  routines(schema: string, name: string): Routine[] {
    return this.routinesByName.get(key(schema, name)) ?? [];
  }

  routineNames(schema: string): string[] {
    return [
      ...new Set(
        [...this.routinesByName.values()]
          .flat()
          .filter((r) => r.schema === schema)
          .map((r) => r.name),
      ),
    ];
  }
}

export interface SchemaCacheOptions {
  /** The exposed schemas, the default (the first) included. */
  schemas: readonly string[];
  /** Warnings of the LISTEN connection (never a password or a query). */
  warn: (message: string) => void;
  /** Called after every load, with what triggered it (tests wait on it). */
  loaded?: (reason: string) => void;
}

export class SchemaCache {
  private snapshot: SchemaSnapshot | undefined;
  private version = 0;
  private loading: Promise<SchemaSnapshot> | undefined;
  /** A miss-triggered load that has not started yet: every miss until it starts shares it. */
  private scheduled: Promise<SchemaSnapshot> | undefined;
  private lastMissLoad = 0;
  private listener: pg.Client | undefined;
  private listenRetry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly options: SchemaCacheOptions,
  ) {}

  get schemas(): readonly string[] {
    return this.options.schemas;
  }

  /** The snapshot now; only valid after start(). */
  get current(): SchemaSnapshot {
    if (!this.snapshot) throw new Error('the schema cache is read before it was loaded');
    return this.snapshot;
  }

  /** Loads the first snapshot and starts listening for reload notifications. */
  async start(): Promise<void> {
    await this.reload('start');
    this.listen();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.listenRetry);
    this.listener?.end().catch(() => {});
    this.listener = undefined;
  }

  /** Reads the catalog again now; concurrent calls share one load. */
  reload(reason: string): Promise<SchemaSnapshot> {
    if (this.loading) return this.loading;
    const load = this.load(reason).finally(() => {
      this.loading = undefined;
    });
    this.loading = load;
    return load;
  }

  /**
   * After the planner missed a name in `seen`: a snapshot read after the miss. A newer snapshot
   * than `seen` already is one; otherwise one load, shared by every miss until it starts, begins
   * at most MISS_RELOAD_INTERVAL_MS after the previous miss-triggered one.
   */
  refreshAfterMiss(seen: SchemaSnapshot): Promise<SchemaSnapshot> {
    if (this.snapshot && this.snapshot.version > seen.version) return Promise.resolve(this.snapshot);
    if (this.scheduled) return this.scheduled;
    const wait = Math.max(0, this.lastMissLoad + MISS_RELOAD_INTERVAL_MS - Date.now());
    const scheduled = new Promise<void>((resolve) => setTimeout(resolve, wait)).then(() => {
      this.scheduled = undefined;
      this.lastMissLoad = Date.now();
      // A load already running began before the miss: wait for it, then load again.
      const running = this.loading ?? Promise.resolve();
      return running.catch(() => {}).then(() => this.reload('miss'));
    });
    this.scheduled = scheduled;
    return scheduled;
  }

  private async load(reason: string): Promise<SchemaSnapshot> {
    const schemas = [...this.options.schemas];
    // One connection of the admin pool (the auth endpoints share it), and one snapshot of the
    // catalog for the three reads, so a migration committed between them cannot split them.
    const { tables, foreignKeys, routines } = await withTransaction(this.pool, async (client) => {
      await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      return {
        tables: await client.query<TableRow>(TABLES_SQL, [schemas]),
        foreignKeys: await client.query<ForeignKeyRow>(FOREIGN_KEYS_SQL, [schemas]),
        routines: await client.query<RoutineRow>(ROUTINES_SQL, [schemas]),
      };
    });
    const tableMap = new Map<string, Table>();
    for (const row of tables.rows) {
      tableMap.set(key(row.schema, row.name), {
        schema: row.schema,
        name: row.name,
        isView: row.is_view,
        columns: new Map(row.columns.map((c) => [c.name, { name: c.name, type: c.type, default: c.default }])),
        primaryKey: row.primary_key,
      });
    }
    const routineList: Routine[] = routines.rows.map((row) => ({
      schema: row.schema,
      name: row.name,
      params: row.params,
      returns: {
        schema: row.return_schema,
        name: row.return_name,
        setOf: row.returns_set,
        composite: row.returns_composite,
        columns: row.return_columns,
      },
      volatility: VOLATILITY[row.volatility],
    }));
    this.version += 1;
    const snapshot = new Snapshot(this.version, schemas, tableMap, relationshipsOf(foreignKeys.rows, tableMap), routineList);
    this.snapshot = snapshot;
    this.options.loaded?.(reason);
    return snapshot;
  }

  // PostgREST's listener: `NOTIFY pgrst` with an empty payload or 'reload schema' reloads. A lost
  // connection is retried with a growing pause, and every reconnection reloads, since
  // notifications sent meanwhile were missed.
  private listen(attempt = 0): void {
    if (this.closed) return;
    const client = new pg.Client(this.pool.options);
    this.listener = client;
    let failed = false;
    let connected = false;
    const retry = (err: Error) => {
      if (failed || this.closed) return;
      failed = true;
      this.options.warn(`schema cache: the LISTEN connection failed (${err.message}); retrying`);
      client.end().catch(() => {});
      const next = connected ? 1 : attempt + 1;
      this.listenRetry = setTimeout(() => this.listen(next), Math.min(30_000, 1000 * 2 ** (next - 1)));
      this.listenRetry.unref();
    };
    client.on('error', retry);
    client.on('end', () => retry(new Error('connection ended')));
    client.on('notification', (msg) => {
      if (msg.channel !== NOTIFY_CHANNEL) return;
      if (msg.payload === undefined || msg.payload === '' || msg.payload === 'reload schema') {
        this.reload('notify').catch((err: Error) => this.options.warn(`schema cache: reload failed (${err.message})`));
      }
    });
    client
      .connect()
      .then(() => client.query(`LISTEN ${NOTIFY_CHANNEL}`))
      .then(() => {
        connected = true;
        if (this.closed) return client.end();
        if (attempt > 0) return this.reload('reconnect').then(() => {});
      })
      .catch(retry);
  }
}
