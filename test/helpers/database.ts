import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { type Migration, type Pool, migrate, withDatabase } from '../../src/kit/db.js';

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

/**
 * A new, migrated database. `prepare` runs once on the template, before its
 * migrations, for what migrations need but do not create themselves.
 */
export async function freshDatabase(scope: string, migrations: Migration[], prepare?: (url: string) => Promise<void>): Promise<TestDatabase> {
  const digest = createHash('sha256')
    .update(JSON.stringify(migrations))
    .digest('hex')
    .slice(0, 10);
  const template = `${runId()}_tpl_${scope}_${digest}`;
  const name = `${runId()}_${scope}_${randomBytes(4).toString('hex')}`;
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
          await migrate(pool, scope, migrations);
        } finally {
          await pool.end();
        }
      }
      await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
    } finally {
      await admin.query('SELECT pg_advisory_unlock(hashtext($1))', [runId()]);
    }
  });
  return {
    name,
    url: withDatabase(adminUrl(), name),
    drop: () => withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))),
  };
}

export interface QueryLog {
  /** SQL text of every pool.query call made through the pool since watching began. */
  queries: string[];
  /** Connections checked out (pool.query checks one out too). */
  connects: number;
  stop(): void;
}

/**
 * Records every statement the app sends through this pool object, by
 * wrapping its own query and connect methods (the database stays real).
 */
export function watchQueries(pool: Pool): QueryLog {
  const log: QueryLog = { queries: [], connects: 0, stop: () => {} };
  const target = pool as unknown as Record<'query' | 'connect', (...args: unknown[]) => unknown>;
  const originalQuery = target.query;
  const originalConnect = target.connect;
  target.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0];
    log.queries.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
    return originalQuery.apply(pool, args);
  };
  target.connect = function (this: unknown, ...args: unknown[]) {
    log.connects += 1;
    return originalConnect.apply(pool, args);
  };
  log.stop = () => {
    target.query = originalQuery;
    target.connect = originalConnect;
  };
  return log;
}
