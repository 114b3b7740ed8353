import { createHash, randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import pg from 'pg';
import { type Migration, type Pool, createPool, migrate, withDatabase } from '../../src/kit/db.js';

// Every test file gets its own database, cloned from a template that was
// migrated once per run: CREATE DATABASE … TEMPLATE copies files, far faster
// than migrating each time.

export function adminUrl(): string {
  const url = process.env.TEST_ADMIN_DATABASE_URL;
  if (!url) throw new Error('run the tests through `npm test` (test/run.ts provides the database)');
  return url;
}

const runId = () => process.env.TEST_RUN_ID ?? 'tlocal';

/** One connection to `url` for the length of `fn`. */
export async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const withAdmin = <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => withClient(adminUrl(), fn);

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** Migrations applied under one scope (a service may have several, e.g. the kit's mail outbox and its own). */
export interface ScopedMigrations {
  scope: string;
  migrations: Migration[];
}

/**
 * A new, migrated database: a clone of a template migrated once per run with these migrations, under
 * the scope `name` (a list of Migration) or under each set's own scope. `prepare` runs once on the
 * template, before its migrations, for what migrations need but do not create themselves.
 */
export async function freshDatabase(
  name: string,
  migrations: Migration[] | ScopedMigrations[],
  prepare?: (url: string) => Promise<void>,
): Promise<TestDatabase> {
  const sets: ScopedMigrations[] =
    migrations.length > 0 && 'scope' in migrations[0]!
      ? (migrations as ScopedMigrations[])
      : [{ scope: name, migrations: migrations as Migration[] }];
  const digest = createHash('sha256').update(JSON.stringify(sets)).digest('hex').slice(0, 10);
  const template = `${runId()}_tpl_${name}_${digest}`;
  const database = `${runId()}_${name}_${randomBytes(4).toString('hex')}`;
  await withAdmin(async (admin) => {
    // One lock per run: creating a template and cloning it must not overlap,
    // because PostgreSQL refuses to clone a database someone is connected to.
    await admin.query('SELECT pg_advisory_lock(hashtext($1))', [runId()]);
    try {
      const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
      if (exists.rowCount === 0) {
        await admin.query(`CREATE DATABASE "${template}"`);
        const url = withDatabase(adminUrl(), template);
        if (prepare) await prepare(url);
        const pool = new pg.Pool({ connectionString: url, max: 1 });
        try {
          for (const set of sets) await migrate(pool, set.scope, set.migrations);
        } finally {
          await pool.end();
        }
      }
      await admin.query(`CREATE DATABASE "${database}" TEMPLATE "${template}"`);
    } finally {
      await admin.query('SELECT pg_advisory_unlock(hashtext($1))', [runId()]);
    }
  });
  return {
    name: database,
    url: withDatabase(adminUrl(), database),
    drop: () => withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`))),
  };
}

export interface FileDatabase {
  readonly url: string;
  readonly pool: Pool;
}

/**
 * The database of a whole test file and a pool on it (of `max` connections): made before its
 * tests (call it before the file's own hooks), dropped after them.
 */
export function fileDatabase(make: () => Promise<TestDatabase>, max = 10): FileDatabase {
  let db: TestDatabase | undefined;
  let pool: Pool | undefined;
  before(async () => {
    db = await make();
    pool = createPool(db.url, { max });
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the file database is made in a before hook; use it inside tests and hooks');
    return value;
  };
  return {
    get url() {
      return ready(db).url;
    },
    get pool() {
      return ready(pool);
    },
  };
}

export interface QueryLog {
  /**
   * SQL text of every pool.query call made through the pool since watching began; with
   * `transactions`, also the statements of the clients it checked out (BEGIN … COMMIT).
   */
  queries: string[];
  /** Connections checked out (pool.query checks one out too). */
  connects: number;
  stop(): void;
}

const sqlOf = (first: unknown): string => (typeof first === 'string' ? first : String((first as { text?: string }).text));

/**
 * Records every statement the app sends through this pool object, by
 * wrapping its own query and connect methods (the database stays real).
 */
export function watchQueries(pool: Pool, opts: { transactions?: boolean } = {}): QueryLog {
  const log: QueryLog = { queries: [], connects: 0, stop: () => {} };
  let watching = true;
  const target = pool as unknown as Record<'query' | 'connect', (...args: unknown[]) => unknown>;
  const originalQuery = target.query;
  const originalConnect = target.connect;
  const wrapped = new WeakSet<object>();
  const watchClient = (client: unknown) => {
    if (!client || wrapped.has(client as object)) return client;
    wrapped.add(client as object);
    const c = client as Record<'query', (...args: unknown[]) => unknown>;
    const clientQuery = c.query;
    c.query = function (this: unknown, ...args: unknown[]) {
      if (watching) log.queries.push(sqlOf(args[0]));
      return clientQuery.apply(client, args);
    };
    return client;
  };
  target.query = function (this: unknown, ...args: unknown[]) {
    log.queries.push(sqlOf(args[0]));
    return originalQuery.apply(pool, args);
  };
  target.connect = function (this: unknown, ...args: unknown[]) {
    log.connects += 1;
    const result = originalConnect.apply(pool, args);
    // The promise form (what the services use); a client's own statements are recorded from then on.
    if (opts.transactions && result instanceof Promise) return result.then(watchClient);
    return result;
  };
  log.stop = () => {
    watching = false;
    target.query = originalQuery;
    target.connect = originalConnect;
  };
  return log;
}
