import { existsSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { type Clock, systemClock } from '../kit/clock.js';
import { createPool, migrate, type Pool, readMigrations } from '../kit/db.js';
import type { App } from '../kit/http.js';
import { buildApp } from './app.js';
import { authenticatorPassword, authenticatorRoleName, authenticatorUrl, ensureAuthenticator } from './authenticator.js';
import type { IdpConfig } from './config.js';
import { SigningKeys } from './keys.js';

const ownMigrations = fileURLToPath(new URL('./migrations', import.meta.url));

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
        await client.query(`CREATE ROLE ${client.escapeIdentifier(role)} ${attributes}`).catch((err: { code?: string }) => {
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
 * The REST login role, made (or reset) here when the idp's role may manage roles; otherwise it
 * must have been prepared (prepareIdpRoles), and is only checked.
 */
async function authenticator(pool: Pool, databaseUrl: string, secretKey: string): Promise<string> {
  const me = await pool.query<{ manages: boolean; db: string }>(
    'SELECT rolsuper OR rolcreaterole AS manages, current_database() AS db FROM pg_catalog.pg_roles WHERE rolname = current_user',
  );
  if (me.rows[0]!.manages) return ensureAuthenticator(pool, databaseUrl, secretKey);
  const role = authenticatorRoleName(me.rows[0]!.db);
  const member = await pool.query<{ ok: boolean }>(
    `SELECT bool_and(pg_has_role($1, r, 'MEMBER')) AS ok FROM unnest($2::text[]) AS r WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`,
    [role, API_ROLES],
  );
  if (member.rows[0]?.ok !== true) {
    throw new Error(
      `the login role ${role} is missing or not granted ${API_ROLES.join(', ')}; the DATABASE_URL role cannot create roles: ` +
        'create them as superuser (see the README) or give the idp a role with CREATEROLE',
    );
  }
  return authenticatorUrl(databaseUrl, role, authenticatorPassword(secretKey, role));
}

/**
 * Everything the idp does at start, in order: its own schema, then the app's supabase/migrations
 * (as `supabase start` does), then the login role for REST, then the app. Used by server.ts and by
 * the test helper.
 */
export async function openIdp(
  config: IdpConfig,
  opts: { databaseUrl: string; clock?: Clock; logStream?: Writable },
): Promise<{ app: App; close: () => Promise<void> }> {
  const clock = opts.clock ?? systemClock;
  const pool = createPool(opts.databaseUrl, { max: 5, applicationName: 'idp' });
  try {
    await migrate(pool, 'idp', await readMigrations(ownMigrations));
    if (!existsSync(config.IDP_MIGRATIONS_DIR)) throw new Error(`IDP_MIGRATIONS_DIR ${config.IDP_MIGRATIONS_DIR} does not exist`);
    await migrate(pool, 'supabase', await readMigrations(config.IDP_MIGRATIONS_DIR));
    const restUrl = await authenticator(pool, opts.databaseUrl, config.IDP_SECRET_KEY);
    await grantConnect(pool);
    const restPool = createPool(restUrl, { max: 10, applicationName: 'idp-rest' });
    try {
      // A login role prepared with another secret key would only fail at the first REST request.
      await restPool.query('SELECT 1').catch((err: Error) => {
        throw new Error(`the login role for REST cannot connect (${err.message}); it was prepared with another IDP_SECRET_KEY?`);
      });
      const keys = await SigningKeys.load(config.IDP_SIGNING_KEY, config.DATA_DIR, clock);
      const app = await buildApp(config, { pool, restPool, keys, clock, logStream: opts.logStream });
      app.log.info({ kid: keys.kid, configured: config.IDP_SIGNING_KEY !== undefined }, 'access tokens signed with ES256');
      return {
        app,
        close: async () => {
          await restPool.end();
          await pool.end();
        },
      };
    } catch (err) {
      await restPool.end();
      throw err;
    }
  } catch (err) {
    await pool.end();
    throw err;
  }
}
