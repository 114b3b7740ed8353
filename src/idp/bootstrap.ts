import { existsSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { type Clock, systemClock } from '../kit/clock.js';
import { createPool, migrate, readMigrations } from '../kit/db.js';
import type { App } from '../kit/http.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { buildApp } from './app.js';
import { ensureAuthenticator } from './authenticator.js';
import type { IdpConfig } from './config.js';
import { SigningKeys } from './keys.js';

const ownMigrations = fileURLToPath(new URL('./migrations', import.meta.url));

/**
 * Everything the idp does at start, in order: its own schema, then the app's supabase/migrations
 * (as `supabase start` does), then the login role for REST, then the app. Used by server.ts and by
 * the test helper.
 */
export async function openIdp(
  config: IdpConfig,
  opts: { databaseUrl: string; clock?: Clock; logStream?: Writable; passwordHasher?: PasswordHasher },
): Promise<{ app: App; close: () => Promise<void> }> {
  const clock = opts.clock ?? systemClock;
  const pool = createPool(opts.databaseUrl, { max: 5, applicationName: 'idp' });
  try {
    await migrate(pool, 'idp', await readMigrations(ownMigrations));
    if (!existsSync(config.IDP_MIGRATIONS_DIR)) throw new Error(`IDP_MIGRATIONS_DIR ${config.IDP_MIGRATIONS_DIR} does not exist`);
    await migrate(pool, 'supabase', await readMigrations(config.IDP_MIGRATIONS_DIR));
    const restUrl = await ensureAuthenticator(pool, opts.databaseUrl, config.IDP_SECRET_KEY);
    const restPool = createPool(restUrl, { max: 10, applicationName: 'idp-rest' });
    try {
      const keys = await SigningKeys.load(config.IDP_SIGNING_KEY, config.DATA_DIR, clock);
      const app = await buildApp(config, { pool, restPool, keys, clock, logStream: opts.logStream, passwordHasher: opts.passwordHasher });
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
