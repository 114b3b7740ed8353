import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { cameFromRequestStream } from './http/request-stream.js';

// bigint (int8) and numeric come back as strings by default; every count in
// this project fits a JS number, so parse int8 once, here.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export interface PoolOptions {
  max?: number;
  /** Bound on how long a request waits for a connection while the database is down. */
  connectionTimeoutMillis?: number;
  /** Server-side bound on one statement, so a stuck query cannot hold a request forever. */
  statementTimeoutMillis?: number;
  applicationName?: string;
  /**
   * False sends every statement unnamed, for a transaction pooler that does not keep
   * prepared statements (PgBouncer before 1.21, or with max_prepared_statements = 0).
   */
  namedStatements?: boolean;
}

/** How much longer than statement_timeout the client waits for an answer before giving up. */
export const QUERY_TIMEOUT_MARGIN_MS = 2000;

/**
 * A client that drops the name of named statements. A named statement is parsed once
 * per server connection and then only executed by name; behind a transaction pooler
 * the next execution can run on another server connection, which never saw it
 * ("prepared statement … does not exist"). Unnamed, the statement is parsed and
 * executed in one message exchange, which a pooler never splits.
 */
class UnnamedStatementsClient extends pg.Client {
  // pg's query has a dozen overloads; this forwards them all unchanged.
  // biome-ignore lint/suspicious/noExplicitAny: the overloads' union, forwarded as it came
  override query(...args: any[]): any {
    const config = args[0];
    if (config !== null && typeof config === 'object' && typeof config.submit !== 'function' && config.name !== undefined) {
      const { name: _unused, ...unnamed } = config;
      args[0] = unnamed;
    }
    return (super.query as (...a: unknown[]) => unknown)(...args);
  }
}

export function createPool(connectionString: string, opts: PoolOptions = {}): Pool {
  const statementTimeout = opts.statementTimeoutMillis ?? 10_000;
  const pool = new pg.Pool({
    connectionString,
    Client: opts.namedStatements === false ? UnnamedStatementsClient : pg.Client,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectionTimeoutMillis ?? 3000,
    idleTimeoutMillis: 30_000,
    statement_timeout: statementTimeout,
    // statement_timeout is enforced by the server: a server that stopped answering
    // (frozen, or cut off by the network) would leave a query on an open connection
    // waiting forever, and its request with it (found by the resilience test that
    // freezes PostgreSQL). The client gives up a little later than the server would;
    // the pool then drops that connection and the request gets a 503.
    query_timeout: statementTimeout + QUERY_TIMEOUT_MARGIN_MS,
    application_name: opts.applicationName,
    keepAlive: true,
  });
  // An idle client losing its connection (database restart) must not crash the
  // process; the pool drops it and the next checkout reconnects.
  pool.on('error', () => {});
  // The pool listens for errors of idle clients only. A checked-out client that
  // is between two statements (a transaction) when the server terminates its
  // connection emits 'error' with nobody listening, which kills the process
  // (found by the resilience test restarting PostgreSQL under load). The error
  // is not lost: the client is no longer queryable, so its next statement
  // rejects, and the pool discards it on release.
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/** The one identifier quoter (table, column, role, database): names from the catalog, the code or the configuration, never from a request. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** True when the error is a PostgreSQL unique violation on the named constraint (or any, when omitted). */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string } | null;
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

/** Errors that mean "the database is not reachable right now", as opposed to a bad query. */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  if (!e) return false;
  // A client that closes its connection mid-body makes its request stream fail with
  // ECONNRESET too; that error never came from a database connection.
  if (cameFromRequestStream(err)) return false;
  if (typeof e.code === 'string') {
    // 57P01..57P03: admin shutdown, crash shutdown, cannot connect now; 08xxx: connection exceptions;
    // 53300: too many connections; 57014: statement timeout (a stuck server looks the same to a client).
    if (/^(08|57P0|53300|57014)/.test(e.code)) return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH'].includes(e.code)) return true;
  }
  return /timeout exceeded when trying to connect|Connection terminated|connection timeout|Client has encountered a connection error|not queryable|Query read timeout/i.test(
    e.message ?? '',
  );
}

/**
 * Ends a transaction whose statement failed. Rolls back, except when the
 * connection is lost or its server stopped answering: a ROLLBACK would then wait
 * out another query timeout, and discarding the connection rolls back anyway.
 * Returns the error to release the client with (so the pool discards it), if any.
 */
export async function abandonTransaction(client: PoolClient, err: unknown): Promise<Error | undefined> {
  if (isDatabaseUnavailable(err)) return err as Error;
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (rollbackError) {
    // A connection that cannot even roll back must not go back to the pool.
    return rollbackError as Error;
  }
}

export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    broken = await abandonTransaction(client, err);
    throw err;
  } finally {
    client.release(broken);
  }
}

export interface Migration {
  name: string;
  sql: string;
}

export async function readMigrations(dir: string): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  return Promise.all(files.map(async (name) => ({ name, sql: await readFile(path.join(dir, name), 'utf8') })));
}

/** A stable advisory-lock key per migration set, so different services never wait on each other. */
function lockKey(scope: string): bigint {
  return createHash('sha256').update(`migrations:${scope}`).digest().readBigInt64BE(0);
}

/**
 * Applies the migrations not yet recorded, in name order, all in one transaction
 * that first takes a transaction-scoped advisory lock: instances starting at the
 * same time queue on it, and the later ones find everything applied. The lock is
 * held by the transaction, not by the session, so it also serialises instances
 * that reach PostgreSQL through a transaction pooler (PgBouncer pool_mode =
 * transaction), where a session-level lock, the work and the unlock can each run
 * on a different server connection: the lock then stays held by an idle server
 * connection, or another instance handed that connection re-enters it.
 * Each migration runs under a savepoint: one that fails is undone entirely and
 * stops the run, while the ones applied before it are committed.
 */
export async function migrate(pool: Pool, scope: string, migrations: Migration[]): Promise<string[]> {
  const client = await pool.connect();
  const applied: string[] = [];
  let failure: Error | undefined;
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [lockKey(scope)]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      scope text NOT NULL,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (scope, name))`);
    const { rows } = await client.query<{ name: string; checksum: string }>(
      'SELECT name, checksum FROM schema_migrations WHERE scope = $1',
      [scope],
    );
    const done = new Map(rows.map((r) => [r.name, r.checksum]));
    for (const m of migrations) {
      const checksum = createHash('sha256').update(m.sql).digest('hex');
      const previous = done.get(m.name);
      if (previous !== undefined) {
        // An applied migration that changed afterwards is a deployment mistake worth stopping for.
        if (previous !== checksum) {
          failure = new Error(`migration ${scope}/${m.name} changed after it was applied`);
          break;
        }
        continue;
      }
      await client.query('SAVEPOINT migration');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (scope, name, checksum) VALUES ($1, $2, $3)', [scope, m.name, checksum]);
        await client.query('RELEASE SAVEPOINT migration');
      } catch (err) {
        failure = new Error(`migration ${scope}/${m.name} failed: ${(err as Error).message}`);
        // A lost connection has nothing left to roll back to; the outer handler discards it.
        if (isDatabaseUnavailable(err)) throw err;
        await client.query('ROLLBACK TO SAVEPOINT migration');
        break;
      }
      applied.push(m.name);
    }
    await client.query('COMMIT');
  } catch (err) {
    broken = await abandonTransaction(client, err);
    throw failure ?? err;
  } finally {
    client.release(broken);
  }
  if (failure) throw failure;
  return applied;
}

/** Replaces the database name of a connection string. */
export function withDatabase(connectionString: string, database: string): string {
  const url = new URL(connectionString);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString();
}

/** Creates the database when absent (used for one-database-per-service on a shared cluster). */
export async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (rowCount === 0) {
      await client.query(`CREATE DATABASE ${quoteIdent(database)}`).catch((err: { code?: string }) => {
        // Another instance created it between our check and our create.
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await client.end();
  }
}
