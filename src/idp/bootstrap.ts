import { createPool, type Pool, quoteIdent } from '../kit/db.js';
import { authenticatorPassword, authenticatorRoleName, authenticatorUrl, ensureAuthenticator } from './authenticator.js';

const API_ROLES = ['anon', 'authenticated', 'service_role'];

/**
 * What the idp cannot do for itself when it connects as a role of its own
 * (owner of its database, no CREATEROLE): the API roles (service_role has
 * BYPASSRLS, which only a superuser can give) and the login role for REST,
 * with the password derived from the secret key. Run by whoever holds the
 * superuser, on the idp's database, before the idp starts.
 */
export async function prepareIdpRoles(superuserDatabaseUrl: string, secretKey: string): Promise<void> {
  const pool = createPool(superuserDatabaseUrl, { max: 1, applicationName: 'idp-roles' });
  try {
    const client = await pool.connect();
    try {
      // The same roles and attributes as the idp's first migration, which skips roles that exist.
      for (const role of API_ROLES) {
        const exists = await client.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role]);
        if (exists.rowCount !== 0) continue;
        const attributes = role === 'service_role' ? 'NOLOGIN INHERIT BYPASSRLS' : 'NOLOGIN INHERIT';
        await client.query(`CREATE ROLE ${quoteIdent(role)} ${attributes}`).catch((err: { code?: string }) => {
          // Another database's idp created it meanwhile.
          if (err.code !== '42710' && err.code !== '23505') throw err;
        });
      }
    } finally {
      client.release();
    }
    await ensureAuthenticator(pool, superuserDatabaseUrl, secretKey);
    await grantConnect(pool);
  } finally {
    await pool.end();
  }
}

/** The login role for REST must be able to connect when PUBLIC may not. The database owner or a superuser can grant it. */
async function grantConnect(pool: Pool): Promise<void> {
  const { rows } = await pool.query<{ db: string }>('SELECT current_database() AS db');
  const db = rows[0]!.db;
  const role = authenticatorRoleName(db);
  const granted = await pool.query<{ ok: boolean }>(`SELECT has_database_privilege($1, $2, 'CONNECT') AS ok`, [role, db]);
  if (granted.rows[0]!.ok) return;
  const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;
  await pool.query(`GRANT CONNECT ON DATABASE ${quote(db)} TO ${quote(role)}`);
}

/**
 * The REST login role: made (or reset) here when the idp connects as superuser. A role of its own
 * uses the one prepared for it (prepareIdpRoles, or by hand), after checking it; only when there is
 * none does it try to make one (which takes CREATEROLE).
 */
async function authenticator(pool: Pool, databaseUrl: string, secretKey: string): Promise<string> {
  const me = await pool.query<{ superuser: boolean; db: string }>(
    'SELECT rolsuper AS superuser, current_database() AS db FROM pg_catalog.pg_roles WHERE rolname = current_user',
  );
  if (me.rows[0]!.superuser) return ensureAuthenticator(pool, databaseUrl, secretKey);
  const role = authenticatorRoleName(me.rows[0]!.db);
  const prepared = await pool.query<{ ok: boolean | null }>(
    `SELECT bool_and(pg_has_role($1, r, 'MEMBER')) AS ok FROM unnest($2::text[]) AS r WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`,
    [role, API_ROLES],
  );
  if (prepared.rows[0]?.ok === true) return authenticatorUrl(databaseUrl, role, authenticatorPassword(secretKey, role));
  try {
    return await ensureAuthenticator(pool, databaseUrl, secretKey);
  } catch (err) {
    throw new Error(
      `the login role ${role} is missing or not granted ${API_ROLES.join(', ')}, and the DATABASE_URL role could not create it ` +
        `(${(err as Error).message}): create it as superuser (see the README)`,
    );
  }
}

/**
 * The pool every REST request runs on: connected as the login role that can only switch into the API
 * roles (authenticator above), checked before the first request.
 */
export async function openRestPool(pool: Pool, databaseUrl: string | undefined, secretKey: string): Promise<Pool> {
  if (!databaseUrl) throw new Error("the idp needs its database URL to derive the REST login role's");
  const restUrl = await authenticator(pool, databaseUrl, secretKey);
  await grantConnect(pool);
  const restPool = createPool(restUrl, { max: 10, applicationName: 'idp-rest' });
  // A login role prepared with another secret key would only fail at the first REST request.
  await restPool.query('SELECT 1').catch(async (err: Error) => {
    await restPool.end();
    throw new Error(`the login role for REST cannot connect (${err.message}); it was prepared with another IDP_SECRET_KEY?`);
  });
  return restPool;
}
