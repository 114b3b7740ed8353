import { createHash, createHmac } from 'node:crypto';
import { type Pool, quoteIdent } from '../kit/db.js';
import { scramVerifier } from '../kit/scram.js';

// REST requests run on a pool connected as a login role that owns nothing and can do nothing by
// itself (NOINHERIT): it can only switch, per transaction, into anon / authenticated / service_role,
// exactly like PostgREST's `authenticator`. Row-level security then applies to the switched role.
//
// Roles are cluster-wide while several idp databases may share a cluster (tests run many at once),
// so the role is per database. Its password is derived from the secret key, so every instance
// configured with the same key computes the same password without any coordination.

const MAX_IDENTIFIER_BYTES = 63;
const SUFFIX = '_authenticator';

/** `<database>_authenticator`, shortened with a hash of the full name when it would pass 63 bytes. */
export function authenticatorRoleName(database: string): string {
  const full = `${database}${SUFFIX}`;
  if (Buffer.byteLength(full) <= MAX_IDENTIFIER_BYTES) return full;
  const hash = createHash('sha256').update(database).digest('hex').slice(0, 8);
  const room = MAX_IDENTIFIER_BYTES - Buffer.byteLength(`_${hash}${SUFFIX}`);
  let prefix = '';
  for (const ch of database) {
    if (Buffer.byteLength(prefix + ch) > room) break;
    prefix += ch;
  }
  return `${prefix}_${hash}${SUFFIX}`;
}

export function authenticatorPassword(secretKey: string, role: string): string {
  return createHmac('sha256', secretKey).update(role).digest('hex');
}

/** The connection string of `databaseUrl` with the login role's user and password. */
export function authenticatorUrl(databaseUrl: string, role: string, password: string): string {
  const url = new URL(databaseUrl);
  url.username = encodeURIComponent(role);
  url.password = encodeURIComponent(password);
  return url.toString();
}

/**
 * Creates the login role of the current database, or resets its password and attributes, and
 * grants it the three API roles. Runs on the admin connection (superuser or CREATEROLE), under an
 * advisory lock so instances starting together do not race. Returns its connection string.
 */
export async function ensureAuthenticator(adminPool: Pool, databaseUrl: string, secretKey: string): Promise<string> {
  const client = await adminPool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('idp:authenticator'))`);
    const { rows } = await client.query<{ db: string }>('SELECT current_database() AS db');
    const role = authenticatorRoleName(rows[0]!.db);
    const password = authenticatorPassword(secretKey, role);
    const exists = await client.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role]);
    // DDL takes no parameters; the name is quoted and the password's verifier is base64 and `$:`, so
    // neither can break out. The verifier, not the password, so that a logged statement holds no secret.
    const attributes = `LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '${scramVerifier(password)}'`;
    await client.query(`${exists.rowCount === 0 ? 'CREATE' : 'ALTER'} ROLE ${quoteIdent(role)} ${attributes}`);
    await client.query(`GRANT anon, authenticated, service_role TO ${quoteIdent(role)}`);
    await client.query('COMMIT');
    return authenticatorUrl(databaseUrl, role, password);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    const code = (err as { code?: string }).code;
    if (code === '42501') {
      throw new Error('the DATABASE_URL role cannot create roles: the idp needs a superuser or a role with CREATEROLE');
    }
    throw err;
  } finally {
    client.release();
  }
}
