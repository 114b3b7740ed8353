import { abandonTransaction, type Pool, type PoolClient } from '../../kit/db.js';

// One transaction per REST request on the authenticator pool, as PostgREST runs it: the first
// statement switches to the request's role and publishes its claims, both transaction-local, so
// nothing leaks to the next request on the same connection. Row-level security then applies to the
// role; nothing in the REST code filters rows by user.

export interface TransactionSettings {
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

export async function inRequestTransaction<T>(pool: Pool, settings: TransactionSettings, work: (client: PoolClient) => Promise<Outcome<T>>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    // BEGIN and the settings go out as one message (one round trip instead of two on every
    // request); a multi-statement message cannot carry bind parameters, so these values, which
    // come from the verified token and the route, are quoted by pg's own escapeLiteral. The
    // request's query values stay bind parameters.
    const literal = (v: string) => client.escapeLiteral(v);
    await client.query(
      `${settings.readOnly ? 'BEGIN READ ONLY' : 'BEGIN'};
       SELECT set_config('role', ${literal(settings.role)}, true), set_config('request.jwt.claims', ${literal(JSON.stringify(settings.claims))}, true),
              set_config('search_path', 'public', true), set_config('request.method', ${literal(settings.method)}, true),
              set_config('request.path', ${literal(settings.path)}, true)`,
    );
    const outcome = await work(client);
    await client.query(outcome.commit ? 'COMMIT' : 'ROLLBACK');
    return outcome.value;
  } catch (err) {
    broken = await abandonTransaction(client, err);
    throw err;
  } finally {
    client.release(broken);
  }
}
