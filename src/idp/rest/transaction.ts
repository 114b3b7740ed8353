import type { Pool, PoolClient } from '../../kit/db.js';

// One transaction per REST request on the authenticator pool, as PostgREST runs it: the first
// statement switches to the request's role and publishes its claims, both transaction-local, so
// nothing leaks to the next request on the same connection. Row-level security then applies to the
// role; nothing in the REST code filters rows by user.

export interface RequestContext {
  role: 'anon' | 'authenticated' | 'service_role';
  /** Always includes `role`. */
  claims: Record<string, unknown>;
  method: string;
  path: string;
  readOnly: boolean;
}

export interface Outcome<T> {
  value: T;
  /** False undoes everything the request did (a failed singular check). */
  commit: boolean;
}

export async function inRequestTransaction<T>(pool: Pool, ctx: RequestContext, work: (client: PoolClient) => Promise<Outcome<T>>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(ctx.readOnly ? 'BEGIN READ ONLY' : 'BEGIN');
    await client.query(
      `SELECT set_config('role', $1, true), set_config('request.jwt.claims', $2, true),
              set_config('search_path', 'public', true), set_config('request.method', $3, true),
              set_config('request.path', $4, true)`,
      [ctx.role, JSON.stringify(ctx.claims), ctx.method, ctx.path],
    );
    const outcome = await work(client);
    await client.query(outcome.commit ? 'COMMIT' : 'ROLLBACK');
    return outcome.value;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackError: Error) => {
      // A connection that cannot even roll back must not go back to the pool.
      broken = rollbackError;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
