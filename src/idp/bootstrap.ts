import { existsSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { type Clock, systemClock } from '../kit/clock.js';
import { createPool, migrate, type Pool, readMigrations } from '../kit/db.js';
import type { App } from '../kit/http.js';
import { awaitRedisAtStart, connectRedis } from '../kit/redis.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { buildApp } from './app.js';
import { authenticatorPassword, authenticatorRoleName, authenticatorUrl, ensureAuthenticator } from './authenticator.js';
import type { IdpConfig } from './config.js';
import { SigningKeys } from './keys.js';
import type { MailQueue } from './auth/mails.js';
import { enqueueMail } from '../kit/mail/outbox.js';
import { createMailTransport } from '../kit/mail/transport.js';
import { type MailWorker, startMailWorker } from '../kit/mail/worker.js';

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

export async function openIdp(
  config: IdpConfig,
  opts: { databaseUrl: string; clock?: Clock; logStream?: Writable; passwordHasher?: PasswordHasher },
): Promise<{ app: App; close: () => Promise<void> }> {
  const clock = opts.clock ?? systemClock;
  const pool = createPool(opts.databaseUrl, { max: 5, applicationName: 'idp', namedStatements: config.DATABASE_NAMED_STATEMENTS });
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
      // Connection errors are logged once the app (and its logger) exists; the limiter falls back
      // to in-process counters meanwhile.
      let log: App['log'] | undefined;
      const redis = config.REDIS_URL ? connectRedis(config.REDIS_URL, (err) => log?.warn(`redis: ${err.message}`)) : undefined;
      try {
        const keys = await SigningKeys.load(config.IDP_SIGNING_KEY, config.DATA_DIR, clock);
        // The worker is made once the app's logger exists; mail queued before that waits for its first poll.
        let worker: MailWorker | undefined;
        const mailQueue: MailQueue | undefined = config.SMTP_URL
          ? { enqueue: (client, mail) => enqueueMail(client, mail), committed: () => worker?.wake() }
          : undefined;
        const app = await buildApp(config, { pool, restPool, keys, clock, logStream: opts.logStream, redis, passwordHasher: opts.passwordHasher, mailQueue });
        log = app.log;
        if (redis) await awaitRedisAtStart(redis, app.log);
        if (config.SMTP_URL) {
          worker = startMailWorker({ pool, transport: createMailTransport(config.SMTP_URL), from: config.MAIL_FROM, log: app.log });
          const started = worker;
          // Before the pools end (close below): due mail is still sent, the rest stays queued.
          app.addHook('onClose', () => started.stop());
        }
        app.log.info({ kid: keys.kid, configured: config.IDP_SIGNING_KEY !== undefined }, 'access tokens signed with ES256');
        return {
          app,
          close: async () => {
            redis?.disconnect();
            await restPool.end();
            await pool.end();
          },
        };
      } catch (err) {
        redis?.disconnect();
        throw err;
      }
    } catch (err) {
      await restPool.end();
      throw err;
    }
  } catch (err) {
    await pool.end();
    throw err;
  }
}
