import type { Pool } from '../../kit/db.js';
import type { TableInfo } from './query.js';

// Which tables and columns exist, read from the catalog and kept per table. A name that is not
// cached is looked up again (a table created after start appears without a restart); a table
// whose columns changed is reloaded by the caller on an unknown-column error.

export const EXPOSED_SCHEMA = 'public';

export class SchemaCache {
  private readonly tables = new Map<string, TableInfo>();
  private readonly loading = new Map<string, Promise<TableInfo | undefined>>();

  constructor(private readonly pool: Pool) {}

  async table(name: string): Promise<TableInfo | undefined> {
    return this.tables.get(name) ?? this.reload(name);
  }

  /** Reads the table from the catalog again; concurrent reloads of one name share a query. */
  reload(name: string): Promise<TableInfo | undefined> {
    const pending = this.loading.get(name);
    if (pending) return pending;
    const load = this.load(name).finally(() => this.loading.delete(name));
    this.loading.set(name, load);
    return load;
  }

  /** Every table and view of the exposed schema, for the "Perhaps you meant" hint of an unknown name. */
  async tableNames(): Promise<string[]> {
    const { rows } = await this.pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')`,
      [EXPOSED_SCHEMA],
    );
    return rows.map((r) => r.name);
  }

  private async load(name: string): Promise<TableInfo | undefined> {
    // pg_catalog rather than information_schema: the latter hides columns the connected role has no
    // privilege on, and this runs as the admin role anyway. Type names without modifiers
    // (`character varying`, not `character varying(255)`) are what casts in filters need.
    const { rows } = await this.pool.query<{ name: string; type: string; pk: boolean }>(
      `SELECT a.attname AS name, format_type(a.atttypid, NULL) AS type,
              EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                      WHERE i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY (i.indkey)) AS pk
       FROM pg_catalog.pg_class c
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
       WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
         AND a.attnum > 0 AND NOT a.attisdropped
       ORDER BY a.attnum`,
      [EXPOSED_SCHEMA, name],
    );
    if (rows.length === 0) {
      this.tables.delete(name);
      return undefined;
    }
    const info: TableInfo = {
      schema: EXPOSED_SCHEMA,
      name,
      columns: new Map(rows.map((r) => [r.name, { type: r.type }])),
      primaryKey: rows.filter((r) => r.pk).map((r) => r.name),
    };
    this.tables.set(name, info);
    return info;
  }
}
